"""What every handler that talks to Neutron shares ([neutron] auth_type set): whether Neutron is the
network service, the process's Neutron client, the API's answer to a network error, the view of
the pod network's security group (without Neutron), and the floating IP lookups by address and the
floating IP's view. Used by the boot's network checks (server_networks.py), os-interface, the
/os-networks, /os-floating-ips and /os-security-groups proxies and the server's network actions, so
that no handler module takes them from another.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.compute import networks
from openkeel_compute.conf import neutron as neutron_conf
from openkeel_compute.network import errors as net_errors

GROUP_DESCRIPTION = "Default security group"


def enabled(req) -> bool:
    return neutron_conf.configured(common.services(req).conf)


def client(req):
    """The process's Neutron client, made on first use (keystoneauth is imported then, not at start)."""
    services = common.services(req)
    found = getattr(services, "network", None)
    if found is None:
        from openkeel_compute.network.client import NeutronClient

        found = services.network = NeutronClient(services.conf)
    return found


def answer(exc: net_errors.NetworkError) -> faults.Fault:
    """The API's answer to a network error, as Nova's servers API turns the exception into one."""
    if exc.code == 400:
        return faults.BadRequest(exc.message)
    if exc.code == 403:
        return faults.Forbidden(exc.message)
    if exc.code == 409:
        return faults.Conflict(exc.message)
    if exc.code == 401:
        return faults.Fault(exc.message, 401)
    if isinstance(exc, net_errors.NeutronError) and 400 <= exc.status < 500:
        return faults.Fault(exc.message, exc.status)
    return faults.Fault(exc.message, 503)


def group_view(project_id: str, name: str) -> dict:
    """A security group of the pod network (no Neutron): ``default``, without rules."""
    return {"id": networks.group_id(project_id, name), "description": GROUP_DESCRIPTION, "name": name,
            "tenant_id": project_id, "rules": []}


def fip_by_address(calls, address: str) -> dict:
    """The one floating IP with that address (Nova's ``_get_floating_ip_by_address``): 404 "Floating IP
    not found for address …" when none, 409 when several."""
    found = calls.list_floating_ips(floating_ip_address=address) if address else []
    if not found:
        raise faults.NotFound(f"Floating IP not found for address {address}.")
    if len(found) > 1:
        raise faults.Conflict(f"Multiple floating IPs are found for address {address}.")
    return found[0]


def fip_device(calls, fip: dict) -> str | None:
    """The server (device_id) of the port a floating IP is associated with, None when it is free or its
    port is gone (Nova's ``get_instance_id_by_floating_address``)."""
    if not fip.get("port_id"):
        return None
    try:
        port = calls.show_port(fip["port_id"])
    except net_errors.PortNotFound:
        return None
    return port.get("device_id") or None


def ports_of_fips(calls, project_id: str, fips: list[dict]) -> dict[str, dict]:
    """Each floating IP's port: Neutron's port_details (fip-port-details), else the project's ports."""
    if all("port_details" in fip for fip in fips):
        return {fip["id"]: fip["port_details"] for fip in fips if fip.get("port_details")}
    ports = {p["id"]: p for p in calls.list_ports(tenant_id=project_id)}
    return {fip["id"]: ports[fip["port_id"]] for fip in fips if fip.get("port_id") in ports}


def fip_view(fip: dict, network: dict | None, port: dict | None) -> dict:
    """A floating IP as Nova's os-floating-ips shows it."""
    network = network or {"id": fip.get("floating_network_id"), "name": None}
    return {"fixed_ip": fip.get("fixed_ip_address"), "id": fip["id"],
            "instance_id": port.get("device_id") if port else None, "ip": fip.get("floating_ip_address"),
            "pool": network.get("name") or network.get("id")}


# -- security groups in nova-network's shape ----------------------------------------------------------

def rule_ports(rule: dict) -> tuple[int | None, int | None]:
    """A Neutron rule's ports as nova-network showed them: every TCP/UDP port 1–65535, else -1."""
    protocol = rule.get("protocol")
    low, high = rule.get("port_range_min"), rule.get("port_range_max")
    if protocol and low is None and high is None:
        low, high = (1, 65535) if protocol.upper() in ("TCP", "UDP") else (-1, -1)
    return low, high


def rule_view(rule: dict, names: dict[str, dict]) -> dict | None:
    protocol = rule.get("protocol")
    low, high = rule_ports(rule)
    view = {"id": rule["id"], "parent_group_id": rule["security_group_id"], "ip_protocol": protocol,
            "from_port": low, "to_port": high, "group": {}, "ip_range": {}}
    if rule.get("remote_group_id"):
        source = names.get(rule["remote_group_id"])
        if source is None:
            return None  # a group that no longer exists: Nova leaves the rule out
        view["group"] = source
    else:
        view["ip_range"] = {"cidr": rule.get("remote_ip_prefix") or "0.0.0.0/0"}
    return view


def neutron_group_view(group: dict, names: dict[str, dict]) -> dict:
    rules_ = [rule_view(r, names) for r in group.get("security_group_rules") or [] if r.get("direction") == "ingress"]
    return {"id": group["id"], "description": group.get("description"), "name": group.get("name"),
            "tenant_id": group.get("tenant_id"), "rules": [r for r in rules_ if r is not None]}


def remote_names(calls, groups: list[dict]) -> dict[str, dict]:
    """{group id: {name, tenant_id}} of the groups listed and of the remote groups their rules name."""
    names = {g["id"]: {"name": g.get("name"), "tenant_id": g.get("tenant_id")} for g in groups}
    for group in groups:
        for rule in group.get("security_group_rules") or []:
            remote = rule.get("remote_group_id")
            if remote and remote not in names and rule.get("direction") == "ingress":
                try:
                    source = calls.show_security_group(remote)
                except net_errors.SecurityGroupNotFound:
                    continue
                names[remote] = {"name": source.get("name"), "tenant_id": source.get("tenant_id")}
    return names
