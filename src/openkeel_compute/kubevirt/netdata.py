"""A server's Neutron ports as the guest's cloud-init network data.

``network_data`` is Nova's ``network_data.json`` (what its config drive and metadata service serve, built as
its ``get_network_metadata`` builds it): one link per port (``tap<port id[:11]>``, the port's VIF type, MTU
and MAC), one network per port and IP version (its first fixed IP of that version, the netmask, the default
route through the subnet's gateway and the subnet's host routes, the subnet's DNS servers as services), and
the DNS servers of every subnet as the document's services.

One choice differs from Nova's: a subnet with DHCP enabled is given as a static address too (Nova writes
``ipv4_dhcp``), because Neutron's DHCP agent does not sit on the Multus network the interface is on: the
guest must set the address itself.

``network_config`` is the same as cloud-init's network config version 2 (ethernets matched by MAC), for the
NoCloud source, whose ``network-config`` cloud-init reads in its own formats only; the config drive gets
``network_data.json``. Each port of the network info (steps/ports.py) carries what this needs: ``mac``,
``port_id``, ``network_id``, ``mtu``, ``vif_type`` and ``subnets`` (per fixed IP: ``ip_address``, the subnet's
``cidr``, ``gateway_ip``, ``dns_nameservers``, ``host_routes``); a port without ``subnets`` (a network info
written before they were kept) gives no network.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

#: Nova's ``LEGACY_EXPOSED_VIF_TYPES``: other VIF types are shown as ``phy``
_EXPOSED_VIF_TYPES = ("bridge", "dvs", "ethernet", "hw_veb", "hyperv", "ovs", "tap", "vhostuser", "vif")


def link_name(port_id: str) -> str:
    """The link's id: the tap device name Nova's libvirt driver gives the port."""
    return f"tap{port_id[:11]}"


def _routes(version: int, subnet: Mapping[str, Any]) -> list[dict[str, str]]:
    routes = []
    gateway = subnet.get("gateway_ip")
    if gateway:
        default = "0.0.0.0" if version == 4 else "::"
        routes.append({"network": default, "netmask": default, "gateway": str(gateway)})
    for route in subnet.get("host_routes") or ():
        net = ipaddress.ip_network(str(route["destination"]), strict=False)
        routes.append({"network": str(net.network_address), "netmask": str(net.netmask),
                       "gateway": str(route["nexthop"])})
    return routes


def _dns(subnet: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"type": "dns", "address": str(address)} for address in subnet.get("dns_nameservers") or ()]


def network_data(ports: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Nova's network_data.json of the ports (None: no port has a subnet)."""
    links: list[dict[str, Any]] = []
    nets: list[dict[str, Any]] = []
    services: list[dict[str, str]] = []
    for port in ports:
        subnets = list(port.get("subnets") or ())
        if not subnets:
            continue
        link = {"id": link_name(str(port["port_id"])), "vif_id": str(port["port_id"]),
                "type": port.get("vif_type") if port.get("vif_type") in _EXPOSED_VIF_TYPES else "phy",
                "mtu": port.get("mtu"), "ethernet_mac_address": str(port["mac"])}
        links.append(link)
        for version in (4, 6):
            first = next((s for s in subnets if ipaddress.ip_address(str(s["ip_address"])).version == version), None)
            if first is None:
                continue
            cidr = ipaddress.ip_network(str(first["cidr"]), strict=False)
            nets.append({"id": f"network{len(nets)}", "type": f"ipv{version}", "link": link["id"],
                         "ip_address": str(first["ip_address"]), "netmask": str(cidr.netmask),
                         "routes": _routes(version, first), "network_id": str(port["network_id"]),
                         "services": _dns(first)})
            services += [dns for dns in _dns(first) if dns not in services]
    if not links:
        return None
    return {"links": links, "networks": nets, "services": services}


def _prefix(netmask: str) -> int:
    return int(ipaddress.ip_address(netmask)).bit_count()


def network_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """cloud-init's network config v2 of a network_data.json: each link an ethernet matched by its MAC,
    with its static addresses, routes and DNS servers."""
    ethernets: dict[str, Any] = {}
    for link in data.get("links") or ():
        eth: dict[str, Any] = {"match": {"macaddress": link["ethernet_mac_address"]}}
        if link.get("mtu"):
            eth["mtu"] = link["mtu"]
        addresses, routes, dns = [], [], []
        for net in data.get("networks") or ():
            if net.get("link") != link["id"]:
                continue
            prefix = _prefix(str(net["netmask"]))
            addresses.append(f"{net['ip_address']}/{prefix}")
            for route in net.get("routes") or ():
                length = _prefix(str(route["netmask"]))
                routes.append({"to": "default" if length == 0 else f"{route['network']}/{length}",
                               "via": route["gateway"]})
            dns += [s["address"] for s in net.get("services") or () if s["address"] not in dns]
        eth["addresses"] = addresses
        if routes:
            eth["routes"] = routes
        if dns:
            eth["nameservers"] = {"addresses": dns}
        ethernets[link["id"]] = eth
    return {"version": 2, "ethernets": ethernets}
