"""A server's security groups: GET /servers/{server_id}/os-security-groups and the
addSecurityGroup / removeSecurityGroup actions, as Nova 34.0.0 answers them.

OpenKeel has no Neutron: a server's groups are names kept with the server (compute/networks.py).
``default`` is the only group; it has no rules, because the pod network does not filter traffic.
A server booted with ``networks: none`` has no interface to put a group on, as a Nova server
without ports.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.network_common import group_view
from openkeel_compute.api.handlers.server_common import SUBRESOURCE_QUERY, read_server
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import networks
from openkeel_compute.policies import server_subresources as rules


def _action(name: str) -> dict:
    return {"type": "object",
            "properties": {name: {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}},
                                  "required": ["name"], "additionalProperties": False}},
            "required": [name], "additionalProperties": True}


ADD = _action("addSecurityGroup")
REMOVE = _action("removeSecurityGroup")
@operation(query=SUBRESOURCE_QUERY, expected=(404,))
@wsgi_path_params
def index(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SECURITY_GROUPS % "list", {"project_id": row["project_id"]})
        names = networks.groups_of(conn, row["uuid"]) if networks.on_network(row) else []
    groups = [group_view(row["project_id"], name) for name in names]
    return {"security_groups": sorted(groups, key=lambda g: (g["tenant_id"], g["name"]))}


def _name(req, action: str) -> str:
    name = req.body[action]["name"]
    if not name.strip():
        raise faults.BadRequest("Security group name cannot be empty")
    return name


def _change(req, server_id: str, action: str, rule: str, *, add: bool) -> Response:
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SECURITY_GROUPS % rule, {"project_id": row["project_id"]})
        name = _name(req, action)
        if name not in networks.GROUPS:
            raise faults.NotFound(f"Security group {name} is not found for project {req.context.project_id}")
        if not networks.has_interface(conn, row):
            raise faults.NotFound(f"instance_id {row['uuid']} could not be found as device id on any ports")
        names = networks.groups_of(conn, row["uuid"])
        if add:
            if name not in names:
                networks.set_groups(conn, row["uuid"], [*names, name])
        else:
            if name not in names:
                raise faults.NotFound(f"Security group {name} not associated with the instance {row['uuid']}")
            networks.set_groups(conn, row["uuid"], [n for n in names if n != name])
    return Response(None)


@operation(body={"2.0-": ADD}, success=202, expected=(400, 404, 409))
@wsgi_path_params
def add(req, server_id):
    return _change(req, server_id, "addSecurityGroup", "add", add=True)


@operation(body={"2.0-": REMOVE}, success=202, expected=(400, 404, 409))
@wsgi_path_params
def remove(req, server_id):
    return _change(req, server_id, "removeSecurityGroup", "remove", add=False)
