"""/servers/{server_id}/shares (+ /{share_id}), from 2.97: Manila shares, answered as Nova answers
when no share can be attached.

OpenKeel has no Manila, so a server never has a share: the list is empty and any share is "not
found". Nova checks the rule against the server's project before it looks at the server (another
project's server is a 403, a server that never existed "has no mapping to a cell"), then the
server's state: a share is attached to or detached from a stopped server only (detached from one in
error too). Attaching then needs computes that offer virtiofs shares; KubeVirt nodes here offer none,
and Nova answers that with its 409 "Feature not supported because either compute or instance are not
configured correctly." (a Nova whose computes offer them but which has no Manila configured fails
with a 500 instead: docs/api.md).
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import errors
from openkeel_compute.compute.instances import store
from openkeel_compute.model import states
from openkeel_compute.policies import contract as rules

_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}
SHARE_ID = {"type": "string", "format": "uuid"}
SHARE_TAG = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[a-zA-Z0-9-]*$"}
CREATE = {"title": "Server shares", "type": "object",
          "properties": {"share": {"type": "object", "properties": {"share_id": SHARE_ID, "tag": SHARE_TAG},
                                   "required": ["share_id"], "additionalProperties": False}},
          "required": ["share"], "additionalProperties": False}
NOT_CONFIGURED = ("Feature not supported because either compute or instance are not configured "
                  "correctly.")


def _server(conn, req, server_id: str, rule: str) -> dict:
    """The rule on the server's project first (Nova reads its instance mapping), then the server."""
    try:
        row = store.get(conn, server_id, read_deleted="yes")
    except errors.InstanceNotFound:
        raise faults.NotFound(f"Instance {server_id} has no mapping to a cell.") from None
    common.can(req, rules.SHARES % rule, {"project_id": row["project_id"]})
    if row["deleted"]:
        raise errors.InstanceNotFound(server_id)
    return row


def _share_not_found(share_id: str) -> faults.Fault:
    return faults.NotFound(f"Share {share_id} could not be found.")


@operation(versions="2.97-", query={"2.97-": _STRICT}, expected=(400, 403, 404), without="Manila")
@wsgi_path_params
def index(req, server_id):
    with common.read(req) as conn:
        _server(conn, req, server_id, "index")
    return {"shares": []}


@operation(versions="2.97-", query={"2.97-": _STRICT}, expected=(400, 403, 404), without="Manila")
@wsgi_path_params
def show(req, server_id, share_id):
    with common.read(req) as conn:
        _server(conn, req, server_id, "show")
    raise _share_not_found(share_id)


@operation(versions="2.97-", body={"2.97-": CREATE}, success=201, expected=(400, 403, 404, 409),
           without="Manila")
@wsgi_path_params
def create(req, server_id):
    with common.read(req) as conn:
        row = _server(conn, req, server_id, "create")
        if row["vm_state"] != states.STOPPED:
            raise errors.InstanceInvalidState("create share", row["uuid"], "vm_state", row["vm_state"])
    raise faults.Conflict(NOT_CONFIGURED)


@operation(versions="2.97-", success=200, expected=(400, 403, 404, 409), without="Manila")
@wsgi_path_params
def delete(req, server_id, share_id):
    with common.read(req) as conn:
        row = _server(conn, req, server_id, "delete")
        if row["vm_state"] not in (states.STOPPED, states.ERROR):
            raise errors.InstanceInvalidState("delete share", row["uuid"], "vm_state", row["vm_state"])
    raise _share_not_found(share_id)
