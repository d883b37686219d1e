"""What POST /servers asks of the network, security groups, availability zone and scheduler,
checked with Nova 34.0.0's words and in its order (servers_create.py calls these):

1. before the flavor is looked up, the form of ``networks``: a port given twice, a port with a
   fixed IP, an entry without ``uuid``, a network id that is not a uuid;
2. after the flavor, the availability zone (servers_create.py: a zone with a ready node);
3. after the image and the flavor's state, the security groups (only ``default`` exists), then
   the networks themselves: the pod network's uuid is the only network, and there are no
   ports. The pod network's addresses come from the cluster: a fixed IP cannot be chosen.

Scheduler hints are kept as Nova's request spec keeps them (each value a list of strings,
hints starting with ``_nova`` dropped) and shown from 2.100. The controller does not act on
them yet: Kubernetes places the server.
"""

from __future__ import annotations

from oslo_utils import uuidutils

from openkeel_compute.api import faults
from openkeel_compute.compute import networks as pod

DEFAULT_GROUPS = [{"name": "default"}]


def check_network_form(requested) -> None:
    """Step 1 (the API's own parsing of ``networks``)."""
    if not isinstance(requested, list):
        return
    ports: list[str] = []
    for network in requested:
        port = network.get("port")
        if port:
            if port in ports:
                raise faults.BadRequest(f"Port ID '{port}' was specified twice: you cannot attach a port "
                                        "multiple times.")
            if network.get("fixed_ip") is not None:
                raise faults.BadRequest(f"Specified Fixed IP '{network['fixed_ip']}' cannot be used with port "
                                        f"'{port}': the two cannot be specified together.")
            ports.append(port)
            continue
        if "uuid" not in network:
            raise faults.BadRequest("Bad network format: missing 'uuid'")
        if not uuidutils.is_uuid_like(network["uuid"]):
            raise faults.BadRequest(f"Bad networks format: network uuid is not in proper format ({network['uuid']})")


def security_groups(server: dict) -> list[str]:
    """Step 3a: the groups a boot asks for (``default`` when none), each of which must exist."""
    requested = server.get("security_groups")
    names = list(dict.fromkeys(g["name"] for g in requested or () if g.get("name"))) or ["default"]
    for name in names:
        if name not in pod.GROUPS:
            raise faults.BadRequest(f"Unable to find security_group with name or id '{name}'")
    return names


def check_networks(conf, requested) -> None:
    """Step 3b: the networks and ports named."""
    if not isinstance(requested, list):
        return
    name = pod.network_name(conf)
    network_id = pod.network_id(name)
    for network in requested:
        if network.get("port"):
            raise faults.BadRequest(f"Port id {network['port']} could not be found.")
        if network["uuid"] != network_id:
            raise faults.BadRequest(f"Network {network['uuid']} could not be found.")
        if network.get("fixed_ip") is not None:
            raise faults.BadRequest(f"Fixed IP {network['fixed_ip']} cannot be requested on network {name}: "
                                    "its addresses are given by the cluster.")


def _hint_value(key: str, value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    raise faults.BadRequest(f"Invalid scheduler hint {key}: its value must be a string, a number or a boolean, "
                            "or a list of them.")


def scheduler_hints(body: dict) -> dict[str, list[str]]:
    """The hints as they are kept and shown: every value a list of strings."""
    hints = body.get("os:scheduler_hints")
    if hints is None:
        hints = body.get("OS-SCH-HNT:scheduler_hints") or {}
    return {key: [_hint_value(key, v) for v in value] if isinstance(value, list) else [_hint_value(key, value)]
            for key, value in hints.items() if not key.startswith("_nova")}
