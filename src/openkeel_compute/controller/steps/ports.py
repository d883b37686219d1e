"""A server's Neutron ports, as Nova's compute allocates and deallocates them (with ``[neutron]``).

After the claim, each requested interface (instance_network_requests, in order; "auto": the project's
one network, or its auto-allocated topology) becomes a port bound to the server: a port OpenKeel
creates (``device_id`` = the server, ``network_id``, ``admin_state_up``, ``tenant_id``, the fixed IP
and security groups asked for) or the port the user passed, then updated with the ``[neutron]``
credential as Nova's compute does: ``device_id``, ``device_owner`` ``compute:<zone>``,
``binding:host_id`` = the node the server was claimed on, ``dns_name`` = its hostname when Neutron has
DNS integration and the network no ``dns_domain``. A port OpenKeel created is written down before
anything else happens to it (``port_created``), so that a build that fails later, or a controller
killed in between, leaks nothing: the server's delete deletes it.

What the ports are is kept as the server's network info (working state ``NETWORK_INFO``, Nova's
network info cache): each port's id, MAC, network, fixed and floating IPs, whether OpenKeel created
it and whether it is plugged. The VM's interfaces (controller/compose.py) and the server's addresses
(``addresses``, ``/ips``) are made from it, never from what the guest shows.

At the delete the ports OpenKeel created are deleted and the user's are unbound (``binding:host_id``,
``device_id`` and ``device_owner`` cleared), as Nova's ``deallocate_for_instance``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from typing import Any

from openkeel_compute.compute import network_requests, working_state
from openkeel_compute.compute.instances import cas
from openkeel_compute.controller.steps.base import Context
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.model import sysmeta
from openkeel_compute.network import errors as net_errors

LOG = logging.getLogger(__name__)
#: Nova's reason when a build's networks cannot be allocated (BuildAbortException)
NETWORK_FAILED = "Failed to allocate the network(s), not rescheduling."
BINDING_HOST = "binding:host_id"
BINDING_FAILED = "binding_failed"


class AllocationFailed(Exception):
    """Neutron refused the server's ports for good (no free IP, over quota, binding failed, a port gone):
    the build ends in Nova's fault; what was made is given back."""


def wanted(ctx: Context, server: dict[str, Any]) -> bool:
    """Whether the server's interfaces are Neutron ports."""
    return ctx.network is not None and \
        (server.get("system_metadata") or {}).get(sysmeta.REQUESTED_NETWORKS) in ("auto", "requested")


def info_of(server: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The server's network info (None: no port allocated yet)."""
    text = (server.get("working_state") or {}).get(sysmeta.NETWORK_INFO)
    return json.loads(text) if text else None


def addresses(info: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Nova's ``addresses`` from the network info: the fixed IPs of each port under its network's name,
    then its floating IPs, each with the port's MAC."""
    out: dict[str, list[dict[str, Any]]] = {}
    for vif in info:
        entries = out.setdefault(str(vif.get("network_name") or vif["network_id"]), [])
        for kind, key in (("fixed", "fixed_ips"), ("floating", "floating_ips")):
            for ip in vif.get(key) or ():
                entries.append({"version": ipaddress.ip_address(ip).version, "addr": ip,
                                "OS-EXT-IPS:type": kind, "OS-EXT-IPS-MAC:mac_addr": vif["mac"]})
    return out


def save(ctx: Context, server: dict[str, Any], info: list[dict[str, Any]]) -> None:
    """Keep the network info and the addresses it gives."""
    text = json.dumps(info, sort_keys=True)
    with transaction(ctx.engine) as conn:
        working_state.put(conn, server["uuid"], sysmeta.NETWORK_INFO, text)
        cas.save_state(conn, server["uuid"], network_info=json.dumps(addresses(info)))
    server.setdefault("working_state", {})[sysmeta.NETWORK_INFO] = text
    server["network_info"] = json.dumps(addresses(info))


def vif_of(port: dict[str, Any], network: dict[str, Any], floating: list[str], created: bool,
           tag: str | None, subnets: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A port's network info entry; ``subnets`` (by id): what the guest's network data needs of each fixed
    IP's subnet (kubevirt/netdata.py)."""
    vif = {"port_id": port["id"], "network_id": port["network_id"], "network_name": network.get("name") or "",
           "mac": port["mac_address"], "fixed_ips": [ip["ip_address"] for ip in port.get("fixed_ips") or ()],
           "floating_ips": floating, "created": created, "tag": tag,
           "active": port.get("status") == "ACTIVE", "host": port.get(BINDING_HOST) or None,
           "mtu": network.get("mtu"), "vif_type": port.get("binding:vif_type")}
    if subnets is not None:
        vif["subnets"] = [
            {"ip_address": ip["ip_address"], "cidr": sub["cidr"], "gateway_ip": sub.get("gateway_ip"),
             "dns_nameservers": list(sub.get("dns_nameservers") or ()), "host_routes": list(sub.get("host_routes") or ())}
            for ip in port.get("fixed_ips") or () if (sub := subnets.get(ip.get("subnet_id") or "")) and sub.get("cidr")]
    return vif


def subnets_of(calls: Any, port: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The subnets of the port's fixed IPs, by id."""
    ids = sorted({ip["subnet_id"] for ip in port.get("fixed_ips") or () if ip.get("subnet_id")})
    return {s["id"]: s for s in calls.list_subnets(id=ids)} if ids else {}


def _auto_network(calls: Any, project_id: str) -> str:
    """The network "auto" puts the server on: the project's only one, else its auto-allocated topology."""
    nets = calls.list_networks(tenant_id=project_id, shared=False) + calls.list_networks(shared=True)
    ids = sorted({n["id"] for n in nets if not n.get("router:external")})
    if len(ids) == 1:
        return ids[0]
    if not ids:
        topology = calls.request("GET", f"/auto-allocated-topology/{project_id}")["auto_allocated_topology"]
        return str(topology["id"])
    raise AllocationFailed("Multiple possible networks found, use a Network ID to be more specific.")


def _security_groups(calls: Any, server: dict[str, Any]) -> list[str]:
    """The ids of the groups asked for ("default" alone: none, Neutron applies the project's default)."""
    names = json.loads((server.get("system_metadata") or {}).get(sysmeta.SECURITY_GROUPS) or "null") or []
    if not names or names == ["default"]:
        return []
    groups = calls.list_security_groups(tenant_id=server["project_id"])
    ids = []
    for name in names:
        found = [g["id"] for g in groups if name in (g["id"], g["name"])]
        if not found:
            raise AllocationFailed(f"Security group {name} not found.")
        ids.append(found[0])
    return ids


def binding(ctx: Context, server: dict[str, Any], network: dict[str, Any], dns: bool) -> dict[str, Any]:
    """What Nova's compute sets on a port it binds to the server."""
    zone = server.get("availability_zone") or ctx.settings.options.default_availability_zone
    body: dict[str, Any] = {"device_id": server["uuid"], "device_owner": f"compute:{zone}",
                            BINDING_HOST: server.get("node") or server.get("host")}
    if dns and not network.get("dns_domain") and server.get("hostname"):
        body["dns_name"] = server["hostname"]
    return body


def allocate(ctx: Context, server: dict[str, Any]) -> list[dict[str, Any]]:
    """Create or bind the server's ports (idempotent: a port created before is bound again, not made
    twice), keep the network info and return it. Raises AllocationFailed (Nova's fault) or a
    NeutronUnavailable (tried again)."""
    assert ctx.network is not None
    uuid = server["uuid"]
    calls = ctx.network.admin()
    with reader(ctx.engine) as conn:
        requests = network_requests.of(conn, uuid)
    if not requests and server["system_metadata"].get(sysmeta.REQUESTED_NETWORKS) == "auto":
        try:
            network_id = _auto_network(calls, str(server["project_id"]))
        except net_errors.NeutronError as exc:
            raise AllocationFailed(exc.message) from None
        requests = [{"position": 0, "network_id": network_id, "port_id": None, "fixed_ip": None, "tag": None,
                     "port_created": False}]
        with transaction(ctx.engine) as conn:
            network_requests.record(conn, uuid, requests)
    dns = dns_integration(calls)
    groups: list[str] | None = None
    info: list[dict[str, Any]] = []
    networks: dict[str, dict[str, Any]] = {}
    for request in requests:
        port_id, created = request["port_id"], bool(request["port_created"])
        try:
            if port_id is None:
                if groups is None:
                    groups = _security_groups(calls, server)
                body: dict[str, Any] = {"device_id": uuid, "network_id": request["network_id"],
                                        "admin_state_up": True, "tenant_id": server["project_id"]}
                if request["fixed_ip"]:
                    body["fixed_ips"] = [{"ip_address": request["fixed_ip"]}]
                if groups:
                    body["security_groups"] = groups
                port = calls.create_port(body)
                port_id, created = port["id"], True
                with transaction(ctx.engine) as conn:  # written down before anything else can fail
                    network_requests.set_port(conn, uuid, request["position"], port_id, True)
        except net_errors.NeutronUnavailable:
            raise
        except net_errors.NetworkError as exc:
            raise AllocationFailed(exc.message) from None
        info.append(bind(ctx, server, calls, port_id, created, request["tag"], dns, networks))
    save(ctx, server, info)
    return info


def dns_integration(calls: Any) -> bool:
    return any(e.get("alias") == "dns-integration" for e in calls.list_extensions())


def bind(ctx: Context, server: dict[str, Any], calls: Any, port_id: str, created: bool, tag: str | None,
         dns: bool, networks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One port bound to the server as Nova's compute binds it; its network info entry. Raises
    AllocationFailed (Neutron refused it, or failed the binding) or NeutronUnavailable."""
    try:
        port = calls.show_port(port_id)
        network = networks.get(port["network_id"]) or calls.show_network(port["network_id"])
        networks[network["id"]] = network
        port = calls.update_port(port_id, binding(ctx, server, network, dns))
    except net_errors.NeutronUnavailable:
        raise
    except net_errors.NetworkError as exc:
        raise AllocationFailed(exc.message) from None
    if port.get("binding:vif_type") == BINDING_FAILED:
        raise AllocationFailed(f"Binding failed for port {port_id}, please check neutron logs for more "
                               "information.")
    floating = [f["floating_ip_address"] for f in calls.list_floating_ips(port_id=port_id)]
    return vif_of(port, network, floating, created, tag, subnets_of(calls, port))


def let_go(ctx: Context, uuid: str, port_id: str, created: bool) -> None:
    """One port no longer the server's: deleted when OpenKeel made it, else unbound and kept (a port
    already gone is what was wanted). Raises NeutronUnavailable."""
    assert ctx.network is not None
    calls = ctx.network.admin()
    try:
        if created:
            calls.delete_port(port_id)
        else:
            calls.update_port(port_id, {BINDING_HOST: None, "device_id": "", "device_owner": ""})
    except net_errors.PortNotFound:
        LOG.info("server %s: its port %s is gone already", uuid, port_id)


def networks_of(ctx: Context, info: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Neutron networks of the ports (as the [neutron] credential sees them: provider fields, mtu)."""
    assert ctx.network is not None
    calls = ctx.network.admin()
    seen: dict[str, dict[str, Any]] = {}
    for vif in info:
        if vif["network_id"] not in seen:
            seen[vif["network_id"]] = calls.show_network(vif["network_id"])
    return list(seen.values())


def deallocate(ctx: Context, uuid: str) -> None:
    """Delete the ports OpenKeel created for the server and unbind the user's, as Nova's
    ``deallocate_for_instance``; a port Neutron lists with the server's ``device_id`` and no owner was
    made for it and never bound (a controller stopped before it wrote the port down): deleted too. A
    port already gone is what was wanted. Raises NeutronUnavailable (the delete is tried again)."""
    assert ctx.network is not None
    calls = ctx.network.admin()
    with reader(ctx.engine) as conn:
        requests = network_requests.of(conn, uuid)
    users = {r["port_id"] for r in requests if r["port_id"] and not r["port_created"]}
    ours = {r["port_id"] for r in requests if r["port_id"] and r["port_created"]}
    for port in calls.list_ports(device_id=uuid):
        if port["id"] not in users and not port.get("device_owner"):
            ours.add(port["id"])  # made for the server and never bound: its row was not written
    for port_id in sorted(users):
        try:
            calls.update_port(port_id, {BINDING_HOST: None, "device_id": "", "device_owner": ""})
        except net_errors.PortNotFound:
            LOG.info("server %s: its port %s is gone already", uuid, port_id)
    for port_id in sorted(ours):
        calls.delete_port(port_id)


def bind_to_node(ctx: Context, server: dict[str, Any], info: list[dict[str, Any]]) -> bool:
    """Bind the ports to the server's node where they are bound elsewhere or nowhere (the node known
    only once the VM is scheduled, or the server moved); True when some port changed. A port gone
    meanwhile is left to the events (network-vif-deleted); a binding Neutron fails raises AllocationFailed."""
    node = server.get("node") or server.get("host")
    if ctx.network is None or not node:
        return False
    calls = ctx.network.admin()
    changed = False
    for vif in info:
        if vif.get("host") == node:
            continue
        try:
            port = calls.update_port(vif["port_id"], {BINDING_HOST: node})
        except net_errors.PortNotFound:
            continue
        if port.get("binding:vif_type") == BINDING_FAILED:
            raise AllocationFailed(f"Binding failed for port {vif['port_id']}, please check neutron logs for more "
                                   "information.")
        vif["host"] = port.get(BINDING_HOST)
        changed = True
    return changed


def unbind_from_node(ctx: Context, server: dict[str, Any]) -> None:
    """The server's ports no longer bound to the node it leaves (a shelve offload, as Nova's
    ``unbind_ports(detach=False)``): ``binding:host_id`` cleared, the ports kept the server's
    (``device_id``, ``device_owner``), the network info following. A port gone meanwhile is left to
    the events. Raises NeutronUnavailable (the offload is tried again)."""
    if not wanted(ctx, server):
        return
    info = info_of(server)
    if not info:
        return
    assert ctx.network is not None
    calls = ctx.network.admin()
    changed = False
    for vif in info:
        if vif.get("host") is None:
            continue  # unbound already (an offload's pass before this one)
        try:
            port = calls.update_port(vif["port_id"], {BINDING_HOST: None})
        except net_errors.PortNotFound:
            continue
        changed = changed or vif.get("host") != (port.get(BINDING_HOST) or None)
        vif["host"] = port.get(BINDING_HOST) or None
        vif["active"] = port.get("status") == "ACTIVE"
    if changed:
        save(ctx, server, info)


def bind_for_unshelve(ctx: Context, server: dict[str, Any]) -> None:
    """The server's ports bound to the node its unshelve claimed, before its VM is made (Nova's
    ``setup_instance_network_on_host``: ``binding:host_id`` the node, ``device_owner`` ``compute:<zone>``
    of the zone it now is in). Raises AllocationFailed (a binding Neutron fails) or NeutronUnavailable."""
    node = server.get("node") or server.get("host")
    if not node or not wanted(ctx, server):
        return
    info = info_of(server)
    if not info:
        return
    assert ctx.network is not None
    calls = ctx.network.admin()
    zone = server.get("availability_zone") or ctx.settings.options.default_availability_zone
    changed = False
    for vif in info:
        if vif.get("host") == node:
            continue
        try:
            port = calls.update_port(vif["port_id"], {BINDING_HOST: node, "device_owner": f"compute:{zone}"})
        except net_errors.PortNotFound:
            continue
        if port.get("binding:vif_type") == BINDING_FAILED:
            raise AllocationFailed(f"Binding failed for port {vif['port_id']}, please check neutron logs for more "
                                   "information.")
        vif["host"], vif["vif_type"] = port.get(BINDING_HOST), port.get("binding:vif_type")
        changed = True
    if changed:
        save(ctx, server, info)


def follow(ctx: Context, server: dict[str, Any], node: str | None) -> None:
    """The server's ports bound to ``node`` (a resize finished or reverted there, a start moved it), as
    Nova's ``migrate_instance_finish`` updates the bindings. Neutron away raises (the step is tried
    again before it writes anything); a binding Neutron fails is logged, the server stays where it runs."""
    if not node or not wanted(ctx, server):
        return
    info = info_of(server)
    if not info:
        return
    try:
        changed = bind_to_node(ctx, {**server, "node": node}, info)
    except AllocationFailed as exc:
        LOG.warning("server %s: its ports on node %s: %s", server["uuid"], node, exc)
        return
    if changed:
        save(ctx, server, info)


def refresh_states(ctx: Context, server: dict[str, Any], info: list[dict[str, Any]]) -> bool:
    """Each port plugged or not as Neutron shows it now (``status`` ACTIVE); True when one changed."""
    assert ctx.network is not None
    found = {p["id"]: p for p in ctx.network.admin().list_ports(device_id=server["uuid"])}
    changed = False
    for vif in info:
        port = found.get(vif["port_id"])
        if port is not None and vif.get("active") != (port.get("status") == "ACTIVE"):
            vif["active"] = port.get("status") == "ACTIVE"
            changed = True
    return changed
