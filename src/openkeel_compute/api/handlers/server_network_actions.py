"""The server actions Nova 34.0.0 proxies to the network service: ``addFloatingIp`` and
``removeFloatingIp`` (os-floating-ips, up to 2.43) and ``addFixedIp`` / ``removeFixedIp``
(os-multinic, up to 2.43), 404 from 2.44 as Nova answers.

- ``addFloatingIp`` takes the server's fixed addresses from its network information (what Nova reads
  from its network info cache: a server without any is 400 "Instance network is not ready yet"), the
  one asked for or the first IPv4 one, finds the server's port holding it and the floating IP by
  address, and associates them in Neutron with the caller's token; every refusal has Nova's words.
- ``removeFloatingIp`` looks the floating IP up by address, and disassociates it when its port belongs
  to the server in the URL (409 otherwise, before the server in the URL is even looked up, as Nova).
  The policy target is the project of the server the floating IP is associated with; a free floating
  IP gives an empty target, which only an admin passes (Nova's 403 for anyone else).
- ``addFixedIp`` / ``removeFixedIp``: Nova's API answers 202 and its compute service changes the
  server's port (a fixed IP from each subnet of the network added to the port on that network, or the
  address taken off the port holding it), telling nobody when it cannot. OpenKeel makes the same port
  update in Neutron before answering 202, and logs (only) what Neutron refuses. A locked server is 409
  "Instance … is locked" (Nova 34.0.0 answers a 500 there: its handler does not expect the lock).

Without [neutron] there is no floating IP (404 "floating IP not found" once the server's addresses
pass Nova's checks), and ``addFixedIp`` / ``removeFixedIp`` are accepted with nothing to change, as
Nova's compute finds no Neutron port to change.
"""

from __future__ import annotations

import ipaddress
import json
import logging

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, wsgi_path_params
from openkeel_compute.api.handlers.server_common import read_server
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import errors
from openkeel_compute.network import errors as net_errors
from openkeel_compute.policies import contract as rules

LOG = logging.getLogger(__name__)
VERSIONS = "-2.43"
_IP = {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]}


def _action(name: str, properties: dict, required: str) -> dict:
    return {"2.0-2.43": {
        "type": "object",
        "properties": {name: {"type": "object", "properties": properties, "required": [required],
                              "additionalProperties": False}},
        "required": [name], "additionalProperties": False}}


ADD_FLOATING = _action("addFloatingIp", {"address": _IP, "fixed_address": _IP}, "address")
REMOVE_FLOATING = _action("removeFloatingIp", {"address": _IP}, "address")
ADD_FIXED = _action("addFixedIp", {"networkId": {"type": ["string", "number"], "minLength": 1, "maxLength": 36}},
                    "networkId")
REMOVE_FIXED = _action("removeFixedIp", {"address": _IP}, "address")


def _server(req, server_id: str) -> dict:
    with common.read(req) as conn:
        return read_server(conn, req, server_id)


def _calls(req):
    return network_common.client(req).for_caller(req.context, req.environ)


def _fixed_addresses(row: dict) -> list[str] | None:
    """The server's fixed addresses from its network information (None when it has none at all)."""
    info = json.loads(row["network_info"]) if row["network_info"] else {}
    if not info:
        return None
    return [a["addr"] for items in info.values() for a in items if a.get("OS-EXT-IPS:type", "fixed") == "fixed"]


def _zone_owner(row: dict) -> str:
    return f"compute:{row['availability_zone']}"


def _unlocked(req, row: dict) -> None:
    if row["locked"] and not req.context.is_admin:
        raise faults.Conflict(errors.InstanceIsLocked(row["uuid"]).message)


@operation(versions=VERSIONS, body=ADD_FLOATING, success=202, expected=(400, 403, 404))
@wsgi_path_params
def add_floating_ip(req, server_id):
    row = _server(req, server_id)
    common.can(req, rules.FLOATING_IPS % "add", {"project_id": row["project_id"]})
    asked = req.body["addFloatingIp"]
    address = asked["address"]
    fixed_ips = _fixed_addresses(row)
    if fixed_ips is None:
        raise faults.BadRequest("Instance network is not ready yet")
    if not fixed_ips:
        raise faults.BadRequest("No fixed IPs associated to instance")
    fixed_address = asked.get("fixed_address")
    if fixed_address is not None and fixed_address not in fixed_ips:
        raise faults.BadRequest("Specified fixed address not assigned to instance")
    if not fixed_address:
        fixed_address = next((ip for ip in fixed_ips if ipaddress.ip_address(ip).version == 4), None)
        if fixed_address is None:
            raise faults.BadRequest(
                f"Unable to associate floating IP {address} to any fixed IPs for instance {server_id}. Instance "
                "has no fixed IPv4 addresses to associate.")
    failed = (f"Unable to associate floating IP {address} to fixed IP {fixed_address} for instance "
              f"{server_id}. Error: %s")
    if not network_common.enabled(req):
        raise faults.NotFound("floating IP not found")
    calls = _calls(req)
    try:
        ports = calls.list_ports(device_id=row["uuid"], device_owner=_zone_owner(row))
        port_id = next((p["id"] for p in ports for ip in p.get("fixed_ips") or ()
                        if ip.get("ip_address") == fixed_address), None)
        if port_id is None:
            raise faults.BadRequest(failed % f"Fixed IP not found for address {fixed_address}.")
        try:
            fip = network_common.fip_by_address(calls, address)
        except faults.Fault as fault:
            if fault.status == 404:
                raise faults.NotFound("floating IP not found") from None
            raise faults.BadRequest(failed % fault.message) from None
        try:
            calls.update_floating_ip(fip["id"], {"port_id": port_id, "fixed_ip_address": fixed_address})
        except net_errors.NeutronError as exc:
            if exc.status == 409:
                raise faults.BadRequest(exc.text) from None  # FloatingIpAssociateFailed(str(e))
            raise
    except net_errors.NeutronUnavailable as exc:
        raise network_common.answer(exc) from None
    except net_errors.NeutronError as exc:
        raise faults.BadRequest(failed % exc.text) from None
    except net_errors.NetworkError as exc:
        raise faults.BadRequest(failed % exc.message) from None
    return Response(None)


@operation(versions=VERSIONS, body=REMOVE_FLOATING, success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def remove_floating_ip(req, server_id):
    address = req.body["removeFloatingIp"]["address"]
    if not network_common.enabled(req):  # no floating IP: not found before any policy check, as Nova
        raise faults.NotFound(f"Floating IP not found for address {address}.")
    calls = _calls(req)
    try:
        device = network_common.fip_device(calls, network_common.fip_by_address(calls, address))
        row = _server(req, device) if device else None
        common.can(req, rules.FLOATING_IPS % "remove", {"project_id": row["project_id"]} if row else {})
        try:
            fip = network_common.fip_by_address(calls, address)
        except faults.Fault as fault:
            if fault.status == 404:
                raise faults.NotFound("floating IP not found") from None
            raise
        if not (row and fip.get("port_id") and row["uuid"] == server_id):
            raise faults.Conflict(f"Floating IP {address} is not associated with instance {server_id}.")
        calls.update_floating_ip(network_common.fip_by_address(calls, address)["id"], {"port_id": None})
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return Response(None)


@operation(versions=VERSIONS, body=ADD_FIXED, success=202, expected=(400, 404, 409))
@wsgi_path_params
def add_fixed_ip(req, server_id):
    row = _server(req, server_id)
    common.can(req, rules.MULTINIC % "add", {"project_id": row["project_id"]})
    network_id = str(req.body["addFixedIp"]["networkId"])
    _unlocked(req, row)
    if not network_common.enabled(req):
        return Response(None)
    calls = _calls(req)
    try:
        subnets = calls.list_subnets(network_id=network_id)
        ports = calls.list_ports(device_id=row["uuid"], device_owner=_zone_owner(row), network_id=network_id) \
            if subnets else []
        for port in ports[:1]:
            fixed = [*port.get("fixed_ips", []), {"subnet_id": subnets[0]["id"]}]
            calls.update_port(port["id"], {"fixed_ips": fixed})
        if not ports:
            LOG.info("addFixedIp on server %s: no port of it on network %s with a subnet (as Nova's compute, "
                     "nothing changes)", row["uuid"], network_id)
    except net_errors.NetworkError as exc:
        LOG.warning("addFixedIp on server %s: Neutron refused the port update: %s", row["uuid"], exc.message)
    return Response(None)


@operation(versions=VERSIONS, body=REMOVE_FIXED, success=202, expected=(400, 404, 409))
@wsgi_path_params
def remove_fixed_ip(req, server_id):
    row = _server(req, server_id)
    common.can(req, rules.MULTINIC % "remove", {"project_id": row["project_id"]})
    address = req.body["removeFixedIp"]["address"]
    _unlocked(req, row)
    if not network_common.enabled(req):
        return Response(None)
    calls = _calls(req)
    try:
        ports = calls.list_ports(device_id=row["uuid"], device_owner=_zone_owner(row),
                                 fixed_ips=f"ip_address={address}")
        for port in ports[:1]:
            kept = [ip for ip in port.get("fixed_ips", []) if ip.get("ip_address") != address]
            calls.update_port(port["id"], {"fixed_ips": kept})
        if not ports:
            LOG.info("removeFixedIp on server %s: it has no port holding %s (as Nova's compute, nothing changes)",
                     row["uuid"], address)
    except net_errors.NetworkError as exc:
        LOG.warning("removeFixedIp on server %s: Neutron refused the port update: %s", row["uuid"], exc.message)
    return Response(None)
