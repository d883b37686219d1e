"""GET /servers/{server_id}/os-interface and /os-interface/{port_id}: the server's ports, as Nova
34.0.0 answers them: Neutron's ports whose device_id is the server (asked with the caller's token),
each as net_id, port_id, mac_addr, port_state and fixed_ips, with the tag asked for at boot from
2.70. A port of another server is "Instance … does not have a port with id …" (404).

POST attaches an interface as Nova's API and compute do it together, in Nova's order and words: the body's
two refusals (both a network and a port; a fixed IP without its network), the lock and the states
(ACTIVE, PAUSED or STOPPED, no task), the ``attach_interface`` action recorded, a port passed looked up
(404), then what Nova's compute checks while the client waits (``compute_attach_interface``, "Error" when
refused): the port the project's and free (400 / 409), the network found (404), one network when none is
named (400), and the port made on it with the caller's token (the fixed IP in use 409, no free address
400, the port quota 403). The port is given the server (``device_id``) and the interface recorded; the
answer is the port as Neutron shows it then (its ``tag`` from 2.70, a ``tag`` in the body from 2.49).
The controller binds it to the server's node, plugs it into the VM (KubeVirt's interface hotplug) and
finishes the event (controller/steps/interfaces.py); what it cannot do is recorded as Nova's compute
records it (the event in "Error", ``InterfaceAttachFailed``), the port given back.

DELETE (202) records ``detach_interface`` after the lock and state checks and leaves the rest to the
controller, as Nova's API casts it: a port the server does not have ends the event in "Error" (Nova's
"Port … is not attached") while the answer is 202.

Without [neutron] a server has no Neutron port (it sits on the cluster's pod network): the list is
empty and every port is not found; an attach finds no port (404), no network (404) or none at all (400).
"""

from __future__ import annotations

import logging
from typing import Any

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, wsgi_path_params
from openkeel_compute.api.handlers.server_common import actor_of, read_server
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import network_requests, preconditions
from openkeel_compute.compute.instances import cas, instance_actions, updates
from openkeel_compute.model import events
from openkeel_compute.model import operations as ops
from openkeel_compute.network import errors as net_errors
from openkeel_compute.network import validate
from openkeel_compute.policies import server_subresources as rules
from openkeel_compute.policies import servers as server_rules

LOG = logging.getLogger(__name__)
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


_UUID = {"type": "string", "format": "uuid"}
_IP = {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]}
_TAG = {"type": "string", "pattern": "^[^,/]*$", "minLength": 1, "maxLength": 60}
_ATTACHMENT: dict[str, Any] = {"type": "object", "properties": {
    "net_id": _UUID, "port_id": _UUID,
    "fixed_ips": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
        "type": "object", "properties": {"ip_address": _IP}, "required": ["ip_address"],
        "additionalProperties": False}}},
    "additionalProperties": False}
_ATTACHMENT_V249 = {**_ATTACHMENT, "properties": {**_ATTACHMENT["properties"], "tag": _TAG}}
CREATE = {"2.0-2.48": {"type": "object", "properties": {"interfaceAttachment": _ATTACHMENT},
                       "additionalProperties": False},
          "2.49-": {"type": "object", "properties": {"interfaceAttachment": _ATTACHMENT_V249},
                    "additionalProperties": False}}
#: Neutron's refusals of the port Nova's compute creates, as Nova names them
_FIXED_IP_TAKEN = ("IpAddressInUse", "IpAddressAlreadyAllocated")
_FIXED_IP_INVALID = ("InvalidIpForNetwork", "InvalidIpForSubnet")


class _Refused(Exception):
    """What Nova's compute refuses while the client waits: the event ends in "Error", the answer is the fault."""

    def __init__(self, fault: faults.Fault) -> None:
        super().__init__(fault.message)
        self.fault = fault


def _network_for(req, calls, project_id: str, net_id: str | None) -> str:
    """The network the new port goes on (Nova's ``_validate_requested_network_ids`` for one request, with
    its ``_check_external_network_attach``)."""
    nets = validate.available_networks(calls, project_id, [net_id] if net_id else None)
    for net in nets:
        if net.get("router:external") and not net.get("shared") and \
                not common.can(req, server_rules.NETWORK_ATTACH_EXTERNAL, {"project_id": project_id}, fatal=False):
            raise _Refused(faults.Forbidden(f"It is not allowed to create an interface on external network "
                                            f"{net['id']}"))
    if net_id:
        if not nets:
            raise _Refused(faults.NotFound(f"Network {net_id} could not be found."))
        return net_id
    if not nets:
        raise _Refused(faults.BadRequest(
            f"No specific network was requested and none are available for project '{project_id}'."))
    if len(nets) > 1:
        raise _Refused(faults.BadRequest("Multiple possible networks found, use a Network ID to be more specific."))
    return str(nets[0]["id"])


def _check_port(port: dict, row: dict) -> None:
    """Nova's ``_validate_requested_port_ids`` for the port passed."""
    if port.get("tenant_id", port.get("project_id")) != row["project_id"]:
        raise _Refused(faults.BadRequest(f"Port {port['id']} not usable for instance {row['uuid']}."))
    if port.get("device_id"):
        raise _Refused(faults.Conflict(f"Port {port['id']} is still in use."))
    if port.get("dns_name") and port["dns_name"] != row.get("hostname"):
        raise _Refused(faults.BadRequest(
            f"Port {port['id']} not usable for instance {row['uuid']}. Value {port['dns_name']} assigned to dns_name "
            f"attribute does not match instance's hostname {row.get('hostname')}"))
    if port.get("binding:vif_type") == "binding_failed":
        raise _Refused(faults.BadRequest(f"Binding failed for port {port['id']}, please check neutron logs for more "
                                         "information."))


def _create_port(calls, row: dict, network_id: str, fixed_ip: str | None) -> dict:
    """The port Nova's compute makes (``_create_port_minimal``) with the caller's token."""
    body: dict = {"device_id": row["uuid"], "network_id": network_id, "admin_state_up": True,
                  "tenant_id": row["project_id"]}
    if fixed_ip:
        body["fixed_ips"] = [{"ip_address": fixed_ip}]
    try:
        return calls.create_port(body)
    except net_errors.NeutronError as exc:
        if exc.neutron_type in _FIXED_IP_TAKEN:
            raise _Refused(faults.Conflict(f"Fixed IP {fixed_ip} is already in use.")) from None
        if exc.neutron_type in _FIXED_IP_INVALID:  # Nova's InvalidInput, which its handler answers 500
            raise _Refused(faults.BadRequest(f"Invalid input received: Fixed IP {fixed_ip} is not a valid ip address "
                                             f"for network {network_id}.")) from None
        if exc.neutron_type == "OverQuota":
            raise _Refused(faults.Forbidden("Maximum number of ports exceeded")) from None
        if exc.neutron_type == "IpAddressGenerationFailure":
            raise _Refused(faults.BadRequest(f"No fixed IP addresses available for network: {network_id}")) from None
        raise


def _compute_event(req, uuid: str, fault: faults.Fault) -> None:
    """``compute_attach_interface`` ended in "Error" with the refusal, as Nova's compute records it."""
    with common.write(req) as conn:
        action_id = instance_actions.action_for_request(conn, uuid, actor_of(req).request_id or "")
        if action_id is not None:
            event_id = instance_actions.start_event(conn, action_id, events.ATTACH_INTERFACE)
            instance_actions.finish_event(conn, event_id, "Error", traceback=f"{fault.message}\n",
                                          details=fault.message)


def _attach_neutron(req, row: dict, net_id: str | None, port_id: str | None, fixed_ip: str | None,
                    tag: str | None) -> dict:
    """The Neutron half of the attach; the port as it is once it is the server's."""
    caller = network_common.client(req).for_caller(req.context, req.environ)
    admin = network_common.client(req).admin()
    port = None
    if port_id:  # Nova's API looks the port up (as an administrator) before its compute is asked
        try:
            port = admin.show_port(port_id)
        except net_errors.PortNotFound as exc:
            raise faults.NotFound(exc.message) from None
    try:
        if port is not None:
            _check_port(port, row)
            port = admin.update_port(port["id"], {"device_id": row["uuid"]})
            created = False
        else:
            network_id = _network_for(req, caller, row["project_id"], net_id)
            port = _create_port(caller, row, network_id, fixed_ip)
            created = True
    except _Refused as refused:
        _compute_event(req, row["uuid"], refused.fault)
        raise refused.fault from None
    except net_errors.NetworkError as exc:
        fault = network_common.answer(exc)
        _compute_event(req, row["uuid"], fault)
        raise fault from None
    try:
        with common.write(req) as conn:
            network_requests.add(conn, row["uuid"], {"network_id": port["network_id"], "port_id": port["id"],
                                                     "fixed_ip": fixed_ip, "tag": tag, "port_created": created})
            updates.outbox(conn, row["uuid"], ops.ATTACH_INTERFACE, actor_of(req), port_id=port["id"])
    except Exception:  # nothing recorded: the port given back, so that nothing is half made
        try:
            if created:
                admin.delete_port(port["id"])
            else:
                admin.update_port(port["id"], {"device_id": ""})
        except net_errors.NetworkError as exc:
            LOG.warning("server %s: port %s of an attach that could not be recorded not given back: %s",
                        row["uuid"], port["id"], exc.message)
        raise
    return port


@operation(body=CREATE, expected=(400, 403, 404, 409, 500, 501))
@wsgi_path_params
def create(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
    common.can(req, rules.INTERFACES % "create", {"project_id": row["project_id"]})
    asked = (req.body or {}).get("interfaceAttachment") or {}
    net_id, port_id, tag = asked.get("net_id"), asked.get("port_id"), asked.get("tag")
    fixed_ip = (asked.get("fixed_ips") or [{}])[0].get("ip_address")
    if net_id and port_id:
        raise faults.BadRequest("Must not input both network_id and port_id")
    if fixed_ip and not net_id:
        raise faults.BadRequest("Must input network_id when request IP address")
    with common.write(req) as conn:
        row = cas.begin_action(conn, row["uuid"], preconditions.precondition("attach_interface"), actor_of(req))
    if not network_common.enabled(req):  # a Neutron with nothing: no such port, network, or none at all
        if port_id:
            raise faults.NotFound(f"Port id {port_id} could not be found.")
        fault: faults.Fault = faults.NotFound(f"Network {net_id} could not be found.") if net_id else \
            faults.BadRequest(f"No specific network was requested and none are available for project "
                              f"'{row['project_id']}'.")
        _compute_event(req, row["uuid"], fault)
        raise fault
    port = _attach_neutron(req, row, net_id, port_id, fixed_ip, tag)
    return {"interfaceAttachment": _view(port, {port["id"]: tag} if req.version >= TAG_VERSION else None)}


@operation(success=202, expected=(400, 404, 409, 501))
@wsgi_path_params
def delete(req, server_id, port_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.INTERFACES % "delete", {"project_id": row["project_id"]})
        cas.begin_action(conn, row, preconditions.precondition("detach_interface"), actor)
        updates.outbox(conn, row["uuid"], ops.DETACH_INTERFACE, actor, port_id=port_id)
    return Response(None)
