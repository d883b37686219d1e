"""GET, PUT and DELETE /servers/{server_id} (GET /servers and /servers/detail: servers_list)."""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import server_port_groups, wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    canonical_ip,
    compute_down,
    read_server,
    server_data,
    shown,
)
from openkeel_compute.api.schemas import servers as schema
from openkeel_compute.api.views import servers as view
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import errors, networks, soft_delete
from openkeel_compute.compute.instances import cas, instance_sysmeta, store, updates
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states
from openkeel_compute.policies import servers as rules


@operation(query=schema.SHOW_QUERY, expected=(404,))
@wsgi_path_params
def show(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "show", {"project_id": row["project_id"]})
        decisions = shown(req, {"project_id": row["project_id"]}, server_groups=req.version >= (2, 71))
        data = server_data(conn, req, row, host_status=decisions.host_status is not None)
    server_port_groups.fill(req, [data])
    return {"server": view.full(req, common.links(req), data, decisions)}


@operation(body=schema.UPDATE_BODY, expected=(400, 404, 409))
@wsgi_path_params
def update(req, server_id):
    vals = dict(req.body["server"])
    changes: dict = {}
    if "name" in vals:
        changes["display_name"] = vals["name"].strip()
    if "description" in vals:
        changes["display_description"] = vals["description"]
    if "hostname" in vals:
        changes["hostname"] = vals["hostname"]
    if "OS-DCF:diskConfig" in vals:
        changes["auto_disk_config"] = vals["OS-DCF:diskConfig"] == "AUTO"
    if "accessIPv4" in vals:
        changes["access_ip_v4"] = canonical_ip(vals["accessIPv4"])
    if "accessIPv6" in vals:
        changes["access_ip_v6"] = canonical_ip(vals["accessIPv6"])
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "update", {"user_id": row["user_id"], "project_id": row["project_id"]})
        if req.version >= (2, 104) and "pinned_availability_zone" in vals:
            zone = networks.zone_of(conn, row, networks.default_zone(common.services(req).conf))
            changes.update(networks.pin_change(row, vals["pinned_availability_zone"], zone))
        if changes and not updates.update_fields(conn, row["uuid"], changes, actor_of(req)):
            raise faults.NotFound("Instance could not be found")
        row = store.get(conn, row["uuid"])
        data = server_data(conn, req, row, host_status=req.version >= (2, 75))  # 2.75: the body of a show
    target = {"project_id": row["project_id"]}
    every = req.version >= (2, 75)
    if every:
        server_port_groups.fill(req, [data])  # the groups are in the body from 2.75, read after the write
        decisions = shown(req, target, server_groups=req.version >= (2, 71))
    else:
        extra_specs = req.version >= (2, 47) and common.can(req, rules.SERVERS % "show:flavor-extra-specs", target,
                                                            fatal=False)
        decisions = view.Shown(flavor_extra_specs=extra_specs, is_admin=bool(req.context.is_admin),
                               server_groups=req.version >= (2, 71))
    return {"server": view.full(req, common.links(req), data, decisions, update=not every)}


@operation(success=204, expected=(404, 409))
@wsgi_path_params
def delete(req, server_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "delete", {"user_id": row["user_id"], "project_id": row["project_id"]})
        down = compute_down(req, conn, row)
        if _keeps_deleted(req) and not down:  # a soft delete on a down service is Nova's local delete too
            try:
                soft_delete.begin_soft_delete(conn, row, actor)
                return Response(None)
            except (errors.InstanceInvalidState, errors.InstanceIsLocked):
                pass  # a task runs, never launched, or locked: deleted at once (or refused), as in Nova
        if down:  # Nova's local delete: gone at once, the controller cleans up
            # a shelved server's image goes too, as Nova's API deletes it (named now: its keys go with the row)
            shelved = instance_sysmeta.system_metadata_item(conn, row["uuid"], "shelved_image_id") \
                if row["vm_state"] in (states.SHELVED, states.SHELVED_OFFLOADED) else None
            if cas.delete_locally(conn, row, actor, soft=_keeps_deleted(req)):
                updates.outbox(conn, row["uuid"], ops.LOCAL_DELETE, actor,
                               **({"shelved_image_id": shelved} if shelved else {}))
        elif cas.begin_delete(conn, row, actor):
            updates.outbox(conn, row["uuid"], "delete", actor)
    return Response(None)



def _keeps_deleted(req) -> bool:
    """Whether DELETE keeps servers for a while ([DEFAULT] reclaim_instance_interval > 0)."""
    conf = common.services(req).conf
    return bool(getattr(conf, "reclaim_instance_interval", 0))


