"""GET, PUT and DELETE /servers/{server_id} (GET /servers and /servers/detail: servers_list)."""

from __future__ import annotations

import ipaddress

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.schemas import servers as schema
from openkeel_compute.api.views import servers as view
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import errors, networks, soft_delete
from openkeel_compute.compute.instances import cas, instance_faults, store, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.policies import servers as rules

compute_errors = common.domain_errors  # errors of the server state → Nova's faults


def shown(req, target: dict | None, *, server_groups: bool = False) -> view.Shown:
    """The policy decisions that change server bodies, taken once per request."""
    version = req.version
    extra_specs = version >= (2, 47) and common.can(req, rules.SERVERS % "show:flavor-extra-specs", target,
                                                    fatal=False)
    host_status = None
    if version >= (2, 16):
        if common.can(req, rules.SERVERS % "show:host_status", target, fatal=False):
            host_status = True
        elif common.can(req, rules.SERVERS % "show:host_status:unknown-only", target, fatal=False):
            host_status = False
    return view.Shown(
        extended_attributes=common.can(req, rules.EXTENDED_ATTRIBUTES, target, fatal=False),
        flavor_extra_specs=extra_specs, host_status=host_status, is_admin=bool(req.context.is_admin),
        server_groups=server_groups)


def read_server(conn, req, server_id: str, *, for_update: bool = False) -> dict:
    """A live server the caller may see: another project's server is "not found" to non-admins.

    ``for_update`` locks its row until the transaction ends: writes of the server's children (tags,
    metadata) that read before they write take their turns, one after the other. In an API write
    transaction the row is always locked, first: every write of one server (lock, resetState, the
    password, actions) takes its turn; parallel copies deadlocked on MariaDB or collided on a
    system-metadata key (a 500) when each read before the other wrote."""
    row = store.get(conn, server_id, for_update=for_update or common.in_write(conn))
    if not req.context.is_admin and row["project_id"] != req.context.project_id:
        raise errors.InstanceNotFound(server_id)
    return row


def server_data(conn, req, row: dict, *, host_status: bool) -> view.ServerData:
    """What a server's body shows besides its row; ``host_status``: whether the body may show it (the
    caller's policy allows it at this microversion), which costs a read of the nodes."""
    uuid = row["uuid"]
    data = view.ServerData(row=row, metadata=store.metadata_of(conn, uuid))
    if req.version >= (2, 98):
        data.system_metadata = store.metadata_of(conn, uuid, system=True)
    if req.version >= (2, 26):
        data.tags = store.tags_of(conn, uuid)
    if networks.on_network(row):
        data.security_groups = (networks.groups_from(data.system_metadata) if req.version >= (2, 98)
                                else networks.groups_of(conn, uuid))
    if store.status(row) in ("ERROR", "DELETED"):
        data.fault = instance_faults.latest_faults(conn, [uuid]).get(uuid)
    if host_status and req.version >= (2, 16) and row["host"]:
        data.host_status = networks.host_states(conn, [row["host"]]).get(row["host"])
    return data


@operation(query=schema.SHOW_QUERY, expected=(404,))
@wsgi_path_params
def show(req, server_id):
    with compute_errors(), common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "show", {"project_id": row["project_id"]})
        decisions = shown(req, {"project_id": row["project_id"]}, server_groups=req.version >= (2, 71))
        data = server_data(conn, req, row, host_status=decisions.host_status is not None)
    return {"server": view.full(req, common.links(req), data, decisions)}


def canonical_ip(value: str | None) -> str | None:
    """An access IP as Nova keeps it: an address, shown in its canonical (compressed) form.

    Every write of accessIPv4/accessIPv6 goes through here (create, update; rebuild too).
    """
    return ipaddress.ip_address(value).compressed if value else value


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
    with compute_errors(), common.write(req) as conn:
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
    with compute_errors(), common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "delete", {"user_id": row["user_id"], "project_id": row["project_id"]})
        if _keeps_deleted(req):
            try:
                soft_delete.begin_soft_delete(conn, row, actor)
                return Response(None)
            except (errors.InstanceInvalidState, errors.InstanceIsLocked):
                pass  # a task runs, never launched, or locked: deleted at once (or refused), as in Nova
        if cas.begin_delete(conn, row, actor):
            updates.outbox(conn, row["uuid"], "delete", actor)
    return Response(None)


def _keeps_deleted(req) -> bool:
    """Whether DELETE keeps servers for a while ([DEFAULT] reclaim_instance_interval > 0)."""
    conf = common.services(req).conf
    return bool(getattr(conf, "reclaim_instance_interval", 0))


def actor_of(req) -> Actor:
    ctx = req.context
    return Actor(user_id=ctx.user_id, project_id=ctx.project_id, is_admin=bool(ctx.is_admin),
                 request_id=getattr(ctx, "request_id", None))
