"""A server's security groups: GET /servers/{server_id}/os-security-groups and the
addSecurityGroup / removeSecurityGroup actions, as Nova 34.0.0 answers them.

With [neutron] the groups are those of the server's ports (Neutron's ports whose ``device_id`` is
the server), each with its rules; the actions find the group by id or by name in the caller's project
(404 "Security group … is not found for project …", 409 when a name is shared), then update every
port of the server with the caller's token: a server without ports is 404 "instance_id … could not be
found as device id on any ports", a port without port security or without a fixed IP refuses a group
(400), and removing a group none of the ports has is 404 "… not associated with the instance …".

Without [neutron] a server's groups are names kept with the server (compute/networks.py).
``default`` is the only group; it has no rules, because the pod network does not filter traffic.
A server booted with ``networks: none`` has no interface to put a group on, as a Nova server
without ports.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, wsgi_path_params
from openkeel_compute.api.handlers.network_common import group_view
from openkeel_compute.api.handlers.server_common import SUBRESOURCE_QUERY, read_server
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import networks
from openkeel_compute.network import errors as net_errors
from openkeel_compute.network import validate
from openkeel_compute.policies import server_subresources as rules

CANNOT_BE_APPLIED = ("Network requires port_security_enabled and subnet associated in order to apply security "
                     "groups.")


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
    if network_common.enabled(req):
        groups = _port_groups(req, row["uuid"])
    else:
        groups = [group_view(row["project_id"], name) for name in names]
    return {"security_groups": sorted(groups, key=lambda g: (g["tenant_id"] or "", g["name"] or ""))}


def _port_groups(req, server_uuid: str) -> list[dict]:
    """The groups of the server's ports in nova-network's shape (Nova's ``get_instance_security_groups``
    with details): one entry per port and group, rules with their remote groups by name."""
    from openkeel_compute.network import port_groups

    calls = network_common.client(req).for_caller(req.context, req.environ)
    try:
        found = port_groups.by_server(calls, [server_uuid], detailed=True).get(server_uuid, [])
        names = network_common.remote_names(calls, list({g["id"]: g for g in found}.values()))
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return [network_common.neutron_group_view(group, names) for group in found]


def _name(req, action: str) -> str:
    name = req.body[action]["name"]
    if not name.strip():
        raise faults.BadRequest("Security group name cannot be empty")
    return name


def _port_security(port: dict) -> bool:
    """Nova's ``_has_security_group_requirements``: port security on, and a fixed IP (or one to come)."""
    if port.get("fixed_ips") or port.get("ip_allocation") == "deferred":
        return bool(port.get("port_security_enabled", True))
    return False


def _change_ports(req, row: dict, name: str, *, add: bool) -> Response:
    """Nova's ``add_to_instance`` / ``remove_from_instance``: the group on (or off) every port of the server."""
    calls = network_common.client(req).for_caller(req.context, req.environ)
    project_id = req.context.project_id
    try:
        try:
            group_id = validate.find_security_group(calls, project_id, name)
        except net_errors.SecurityGroupNotFound:
            raise faults.NotFound(f"Security group {name} is not found for project {project_id}") from None
        except net_errors.NoUniqueMatch as exc:
            raise faults.Conflict(exc.message) from None
        ports = calls.list_ports(device_id=row["uuid"])
        if not ports:
            raise faults.NotFound(f"instance_id {row['uuid']} could not be found as device id on any ports")
        found = False
        for port in ports:
            groups = list(port.get("security_groups") or [])
            if add:
                if not _port_security(port):
                    raise faults.BadRequest(CANNOT_BE_APPLIED)
                groups.append(group_id)
            elif group_id in groups:
                groups.remove(group_id)
            else:
                continue
            try:
                calls.update_port(port["id"], {"security_groups": groups})
            except net_errors.NeutronError as exc:
                if add and exc.status == 400:
                    raise faults.BadRequest(exc.text) from None
                if add and exc.status == 409:
                    raise faults.Conflict(exc.text) from None
                raise
            found = True
        if not add and not found:
            raise faults.NotFound(f"Security group {name} not associated with the instance {row['uuid']}")
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return Response(None)


def _change(req, server_id: str, action: str, rule: str, *, add: bool) -> Response:
    if network_common.enabled(req):
        with common.read(req) as conn:
            row = read_server(conn, req, server_id)
        common.can(req, rules.SECURITY_GROUPS % rule, {"project_id": row["project_id"]})
        return _change_ports(req, row, _name(req, action), add=add)
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
