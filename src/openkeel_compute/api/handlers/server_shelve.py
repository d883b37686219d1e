"""POST /servers/{server_id}/action: shelve, shelveOffload, unshelve (docs/servers.md, "Shelve").

As Nova's API: the server (404), the policy (403), the lock and the state (409); shelve makes the image
``<name>-shelved`` in the image service (createImage's record, compute/snapshot_image.py) and sets the task
``shelving``; shelveOffload sets ``shelving_offloading``; unshelve checks, from 2.77, a zone (only for a
SHELVED_OFFLOADED server, 409; a zone that is not available, 400; with cores and RAM counted from
Placement, an offloaded server's flavor must fit the quota, 403) and, from 2.91, a host (admin policy
``unshelve_to_host``, an unknown host 400, a host outside the zone 409), then sets ``unshelving``. The
controller does the rest (controller/steps/shelve.py). A volume-backed server's shelve makes no image
(its volumes keep the data): the task ``shelving`` is set and the controller offloads it at once (event
``compute_shelve_offload_instance``, notifications ``instance.shelve_offload.*``), as Nova's API asks its
compute.
"""

from __future__ import annotations

import logging

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    check_zone,
    image_service,
    make_image,
    policy_target,
    read_server,
)
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import (
    aggregates,
    block_device_rows,
    block_devices,
    compute_services,
    preconditions,
    quotas,
)
from openkeel_compute.compute.instances import cas, store, updates
from openkeel_compute.images import errors as image_errors
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states
from openkeel_compute.policies import server_actions as rules

LOG = logging.getLogger(__name__)


@operation(body={"2.0-": schema.shelve}, success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def shelve(req, server_id):
    actor = actor_of(req)
    pre = preconditions.precondition("shelve")
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SHELVE % "shelve", policy_target(row, user=True))
        pre.check(row, is_admin=actor.is_admin)
        row["system_metadata"] = store.metadata_of(conn, row["uuid"], system=True)
        volume_backed = block_devices.volume_backed(block_device_rows.of(conn, row["uuid"]))
    if volume_backed:  # no image (the volumes keep the data): offloaded at once, as Nova's compute is asked
        with common.write(req) as conn:
            row = read_server(conn, req, server_id)
            cas.begin_action(conn, row, pre, actor)
            updates.outbox(conn, row["uuid"], ops.SHELVE_OFFLOAD, actor)
        return Response(None)
    image = make_image(req, row, f"{row['display_name']}-shelved", "snapshot", {})
    try:
        with common.write(req) as conn:
            row = read_server(conn, req, server_id)
            cas.begin_action(conn, row, pre, actor)
            updates.outbox(conn, row["uuid"], ops.SHELVE, actor, image_id=image["id"])
    except BaseException:
        try:
            image_service(req).delete(req.context, image["id"], req.environ)
        except image_errors.ImageError as exc:
            LOG.warning("Error while trying to clean up image %s: %s", image["id"], exc)
        raise
    return Response(None)


@operation(body={"2.0-": schema.shelve_offload}, success=202, expected=(400, 404, 409))
@wsgi_path_params
def shelve_offload(req, server_id):
    actor = actor_of(req)
    pre = preconditions.precondition("shelveOffload")
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SHELVE % "shelve_offload", policy_target(row, user=True))
        cas.begin_action(conn, row, pre, actor)
        updates.outbox(conn, row["uuid"], ops.SHELVE_OFFLOAD, actor)
    return Response(None)


def _check_quota(conn, conf, row: dict) -> None:
    """Nova's _check_quota_unshelve_offloaded: when cores and RAM are counted from Placement, an offloaded
    server holds none, so its unshelve must fit them (the instance itself is still counted)."""
    if row["vm_state"] != states.SHELVED_OFFLOADED or not conf.quota.count_usage_from_placement:
        return
    over = quotas.check_deltas(conn, conf, row["project_id"], row["user_id"],
                               {"instances": 0, "cores": int(row["vcpus"] or 0), "ram": int(row["memory_mb"] or 0)})
    if over is not None:
        raise faults.Forbidden(f"Quota exceeded for resources: {over[0]}")


def _host_zone(conn, conf, host: str) -> str:
    zones = [zone for _id, zone in aggregates.host_zones(conn, [host])]
    return zones[0] if zones else conf.default_availability_zone


@operation(body={"2.0-2.76": schema.unshelve, "2.77-2.90": schema.unshelve_v277, "2.91-": schema.unshelve_v291},
           success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def unshelve(req, server_id):
    entity = req.body.get("unshelve") or {}
    payload: dict = {}
    az_passed = req.version >= (2, 77) and "availability_zone" in entity
    host = entity.get("host") if req.version >= (2, 91) else None
    actor = actor_of(req)
    pre = preconditions.precondition("unshelve")
    conf = common.services(req).conf
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SHELVE % "unshelve", policy_target(row, user=False))
        pre.check(row, is_admin=actor.is_admin)
        _check_quota(conn, conf, row)
        if (az_passed or host) and row["vm_state"] != states.SHELVED_OFFLOADED:
            raise faults.Conflict(
                f'Specifying an availability zone or a host when unshelving server "{row["uuid"]}" with status '
                f'"{row["vm_state"]}" is not supported. The server status must be SHELVED_OFFLOADED.')
    zone = entity["availability_zone"] if az_passed else None  # the zone asked at boot is not kept apart
    if az_passed and zone:
        check_zone(req, zone)
    if host:
        common.can(req, rules.SHELVE % "unshelve_to_host", policy_target(row, user=True))
        with common.read(req) as conn:
            if not compute_services.listed(conn, host=host, binary="nova-compute"):
                raise faults.BadRequest(f"Compute host {host} could not be found.")
            if zone is not None and _host_zone(conn, conf, host) != zone:
                raise faults.Conflict(f'Host "{host}" is not in the availability zone "{zone}".')
        payload["host"] = host
    if az_passed:
        payload["availability_zone"] = zone
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        cas.begin_action(conn, row, pre, actor)
        updates.outbox(conn, row["uuid"], ops.UNSHELVE, actor, **payload)
    return Response(None)
