"""The checks Nova 34.0.0's API makes of the networks, ports and security groups a boot asks for,
against Neutron, in Nova's order and with its words (``validate_networks`` and
``_ports_needed_per_instance`` of Nova's Neutron API, ``validate_name`` of its security groups).

``requested`` is the body's ``networks`` as the API parsed it: a list of dicts with ``uuid``,
``port``, ``fixed_ip`` (and ``tag``), or "auto", or None (no ``networks`` before 2.37: Nova treats it
as "auto" without the auto-allocation fallback). "none" never reaches Neutron. Each returns what
the boot keeps; a refusal raises network.errors.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from openkeel_compute.network import errors

if TYPE_CHECKING:  # the client (keystoneauth, requests) is imported by whoever makes the calls, when needed
    from openkeel_compute.network.client import Calls

DEFAULT_GROUP = "default"
# neutronclient's UUID_PATTERN: only what looks like an id is looked up as one
UUID_LIKE = re.compile("^" + "-".join(f"[0-9A-Fa-f]{{{n}}}" for n in (8, 4, 4, 4, 12)))
AUTO_ALLOCATE_EXTENSION = "auto-allocated-topology"


def available_networks(neutron: Calls, project_id: str, net_ids: list[str] | None = None) -> list[dict]:
    """The networks a project may boot on: those asked for by id (its own and shared ones), else its
    own unshared networks then the shared ones; in the order asked for."""
    if net_ids:
        nets = neutron.list_networks(id=net_ids)
        order = {net_id: index for index, net_id in reversed(list(enumerate(net_ids)))}
        return sorted(nets, key=lambda n: order.get(n["id"], len(order)))
    return (neutron.list_networks(tenant_id=project_id, shared=False)
            + neutron.list_networks(shared=True))


def can_auto_allocate(neutron: Calls, project_id: str) -> bool:
    """Whether Neutron has the auto-allocated topology extension and its dry run passes."""
    if not any(ext.get("alias") == AUTO_ALLOCATE_EXTENSION for ext in neutron.list_extensions()):
        return False
    try:
        neutron.validate_auto_allocated_topology(project_id)
    except errors.NeutronError as exc:
        if exc.status == 409:
            return False
        raise
    return True


def ports_needed_per_instance(neutron: Calls, project_id: str, requested) -> int:
    """How many ports each server needs Nova to create; each named network, port and fixed IP checked."""
    if not requested or requested == "auto":
        nets = available_networks(neutron, project_id)
        if len(nets) > 1:
            raise errors.NetworkAmbiguous()
        if not nets and requested == "auto" and not can_auto_allocate(neutron, project_id):
            raise errors.UnableToAutoAllocateNetwork(project_id)
        return 1
    needed = 0
    net_ids: list[str] = []
    for request in requested:
        port_id = request.get("port")
        if port_id:
            port = neutron.show_port(port_id)
            if port.get("device_id"):
                raise errors.PortInUse(port_id)
            if port.get("ip_allocation") not in ("deferred", "none") and not port.get("fixed_ips"):
                raise errors.PortRequiresFixedIP(port_id)
            request["uuid"] = port["network_id"]
            continue
        needed += 1
        net_ids.append(request["uuid"])
        address = request.get("fixed_ip")
        if address:
            found = neutron.list_ports(network_id=request["uuid"], fixed_ips=f"ip_address={address}",
                                       fields="device_id")
            if found:
                raise errors.FixedIpAlreadyInUse(address, found[0].get("device_id") or "")
    if net_ids:
        nets = available_networks(neutron, project_id, net_ids)
        for net in nets:
            if not net.get("subnets"):
                raise errors.NetworkRequiresSubnet(net["id"])
        missing = [net_id for net_id in dict.fromkeys(net_ids) if net_id not in {n["id"] for n in nets}]
        if missing:
            raise errors.NetworkNotFound(", ".join(missing))
    return needed


def validate_networks(neutron: Calls, project_id: str, requested, num_instances: int) -> int:
    """How many of ``num_instances`` servers the project's port quota leaves room for."""
    per_instance = ports_needed_per_instance(neutron, project_id, requested)
    if not per_instance:
        return num_instances
    quota = neutron.show_quota(project_id).get("port", -1)
    if quota == -1:
        return num_instances
    used = len(neutron.list_ports(tenant_id=project_id, fields=["id"]))
    free = quota - used
    if free < 0:
        raise errors.PortLimitExceeded(f"The number of defined ports: {used} is over the limit: {quota}")
    if free >= per_instance * num_instances:
        return num_instances
    return free // per_instance


def check_multiple_instances(requested, max_count: int) -> None:
    """Nova's refusals of several servers from one request that names a port or a fixed IP (400)."""
    if max_count <= 1 or not isinstance(requested, list):
        return
    for request in requested:
        if request.get("uuid") and request.get("fixed_ip"):
            raise errors.NetworkError("Failed to launch instances: max_count cannot be greater than 1 if an "
                                      "fixed_ip is specified.")
    for request in requested:
        if request.get("port"):
            raise errors.NetworkError("Failed to launch instances: Unable to launch multiple instances with a "
                                      "single configured port ID. Please launch your instance one by one with "
                                      "different ports.")


def security_group_id(neutron: Calls, project_id: str, name: str) -> str:
    """The id of the group named (or with that id) the project may use: ``default`` is kept as is."""
    if name == DEFAULT_GROUP:
        return name
    return find_security_group(neutron, project_id, name)


def find_security_group(neutron: Calls, project_id: str, name: str) -> str:
    """neutronclient's ``find_resourceid_by_name_or_id`` for a security group, as Nova calls it: by id
    when ``name`` looks like a UUID, else by name within the project (NoUniqueMatch when shared)."""
    if UUID_LIKE.match(name):
        by_id = neutron.list_security_groups(id=name, fields="id")
        if by_id:
            return by_id[0]["id"]
    by_name = neutron.list_security_groups(name=name, tenant_id=project_id, fields="id")
    if len(by_name) > 1:
        raise errors.NoUniqueMatch(f"Multiple security_group matches found for name '{name}', use an ID to be "
                                   "more specific.")
    if not by_name:
        raise errors.SecurityGroupNotFound(f"Unable to find security_group with name or id '{name}'")
    return by_name[0]["id"]


def security_groups(neutron: Calls, project_id: str, names: list[str]) -> list[str]:
    return [security_group_id(neutron, project_id, name) for name in names]


def max_for_quota(allowed: int, min_count: int, max_count: int) -> int:
    """The number of servers to create once the port quota is known (PortLimitExceeded below min_count)."""
    if allowed < min_count:
        raise errors.PortLimitExceeded()
    return min(allowed, max_count)


def requested_networks_record(requested) -> Any:
    """What the boot keeps for the controller: "auto", "none", or the list of requests (uuid, port,
    fixed_ip, tag) with each port's network filled in."""
    if not isinstance(requested, list):
        return requested or "auto"
    return [{key: value for key, value in r.items() if value is not None} for r in requested]
