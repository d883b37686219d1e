"""GET /servers/{server_id} (and, in servers_list, GET /servers and /servers/detail)."""

from __future__ import annotations

import contextlib

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.schemas import servers as schema
from openkeel_compute.api.views import servers as view
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import errors, instances
from openkeel_compute.policies import servers as rules


@contextlib.contextmanager
def compute_errors():
    """Errors of the server state → Nova's faults with their messages."""
    try:
        yield
    except errors.NotFound as exc:
        raise faults.NotFound(exc.message) from None
    except errors.Conflict as exc:
        raise faults.Conflict(exc.message) from None
    except errors.Invalid as exc:
        raise faults.BadRequest(exc.message) from None
    except errors.Forbidden as exc:
        raise faults.Forbidden(exc.message) from None


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


def read_server(conn, req, server_id: str) -> dict:
    """A live server the caller may see: another project's server is "not found" to non-admins."""
    row = instances.get(conn, server_id)
    if not req.context.is_admin and row["project_id"] != req.context.project_id:
        raise errors.InstanceNotFound(server_id)
    return row


def server_data(conn, req, row: dict) -> view.ServerData:
    uuid = row["uuid"]
    data = view.ServerData(row=row, metadata=instances.metadata_of(conn, uuid))
    if req.version >= (2, 98):
        data.system_metadata = instances.metadata_of(conn, uuid, system=True)
    if req.version >= (2, 26):
        data.tags = instances.tags_of(conn, uuid)
    if instances.status(row) in ("ERROR", "DELETED"):
        data.fault = instances.latest_faults(conn, [uuid]).get(uuid)
    return data


@operation(query=schema.SHOW_QUERY, expected=(404,))
@wsgi_path_params
def show(req, server_id):
    with compute_errors(), common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "show", {"project_id": row["project_id"]})
        data = server_data(conn, req, row)
    decisions = shown(req, {"project_id": row["project_id"]}, server_groups=req.version >= (2, 71))
    return {"server": view.full(req, common.links(req), data, decisions)}
