"""GET /servers/{server_id}/os-interface and /os-interface/{port_id}: the server's ports, as Nova
34.0.0 answers them: Neutron's ports whose device_id is the server (asked with the caller's token),
each as net_id, port_id, mac_addr, port_state and fixed_ips, with the tag asked for at boot from
2.70. A port of another server is "Instance … does not have a port with id …" (404).

Without [neutron] a server has no Neutron port (it sits on the cluster's pod network): the list is
empty and every port is not found. Attaching and detaching interfaces (POST, DELETE) need the
controller's NIC hotplug and are still to come.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, wsgi_path_params
from openkeel_compute.api.handlers.server_common import read_server
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import network_requests
from openkeel_compute.network import errors as net_errors
from openkeel_compute.policies import server_subresources as rules

_LENIENT = {"type": "object", "properties": {}, "additionalProperties": True}
_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}
QUERY = {"2.0-2.101": _LENIENT, "2.102-": _STRICT}
TAG_VERSION = (2, 70)


def _view(port: dict, tags: dict[str, str | None] | None) -> dict:
    info = {"net_id": port["network_id"], "port_id": port["id"], "mac_addr": port["mac_address"],
            "port_state": port["status"], "fixed_ips": port.get("fixed_ips")}
    if tags is not None:
        info["tag"] = tags.get(port["id"])
    return info


def _server(req, server_id: str, rule: str) -> tuple[dict, dict[str, str | None] | None]:
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        tags = {r["port_id"]: r["tag"] for r in network_requests.of(conn, row["uuid"]) if r["port_id"]} \
            if req.version >= TAG_VERSION else None
    common.can(req, rules.INTERFACES % rule, {"project_id": row["project_id"]})
    return row, tags


@operation(query=QUERY, expected=(404, 501))
@wsgi_path_params
def index(req, server_id):
    row, tags = _server(req, server_id, "list")
    if not network_common.enabled(req):
        return {"interfaceAttachments": []}
    calls = network_common.client(req).for_caller(req.context, req.environ)
    try:
        ports = calls.list_ports(device_id=row["uuid"])
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return {"interfaceAttachments": [_view(port, tags) for port in ports]}


@operation(query=QUERY, expected=(403, 404))
@wsgi_path_params
def show(req, server_id, port_id):
    _row, tags = _server(req, server_id, "show")
    if not network_common.enabled(req):
        raise faults.NotFound(f"Port id {port_id} could not be found.")
    calls = network_common.client(req).for_caller(req.context, req.environ)
    try:
        port = calls.show_port(port_id)
    except net_errors.PortNotFound as exc:
        raise faults.NotFound(exc.message) from None
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    if port.get("device_id") != server_id:
        raise faults.NotFound(f"Instance {server_id} does not have a port with id {port_id}")
    return {"interfaceAttachment": _view(port, tags)}
