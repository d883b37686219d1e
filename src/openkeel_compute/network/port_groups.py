"""The security groups of servers as Nova 34.0.0 reads them from Neutron: those of each server's ports.

Nova's ``get_instances_security_groups_bindings`` (nova/network/security_group_api.py), called by the
servers view builder (show, detail, the 2.75 bodies of PUT and rebuild) and by
``GET /servers/{id}/os-security-groups``: one ports query for all the servers asked about (their
``device_id``; ``security_groups`` and ``device_id`` fields), then one security-groups query for every
group those ports have (``id`` and ``name`` unless the details are wanted), each in chunks of 150 ids
so that the URL stays short. A server then has, port after port in Neutron's order, each group of the
port that the caller can see: the same group on two ports is there twice, a group the caller cannot
see is left out, and a server without ports (or whose ports have no groups) has none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from openkeel_compute.network import errors

# Nova's MAX_SEARCH_IDS: the ids one query names
MAX_SEARCH_IDS = 150


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), MAX_SEARCH_IDS):
        yield ids[start:start + MAX_SEARCH_IDS]


def by_server(calls: Any, server_uuids: list[str], *, detailed: bool = False) -> dict[str, list[dict]]:
    """{server uuid: [group, ...]} for the servers that have any; ``detailed``: whole groups (with their
    rules), else each group's id and name. Raises NetworkError as the client does; a ports query Neutron
    answers PortNotFound (a port deleted while listed) counts as no ports, as in Nova."""
    ports: list[dict] = []
    for chunk in _chunks(list(dict.fromkeys(server_uuids))):
        try:
            ports.extend(calls.list_ports(device_id=chunk, fields=["security_groups", "device_id"]))
        except errors.NeutronError as exc:
            if exc.status != 404 or exc.neutron_type != "PortNotFound":
                raise
    group_ids = list(dict.fromkeys(g for port in ports for g in port.get("security_groups") or ()))
    found: dict[str, dict] = {}
    for chunk in _chunks(group_ids):
        params: dict[str, Any] = {"id": chunk}
        if not detailed:
            params["fields"] = ["id", "name"]
        found.update((group["id"], group) for group in calls.list_security_groups(**params))
    bindings: dict[str, list[dict]] = {}
    for port in ports:
        for group_id in port.get("security_groups") or ():
            group = found.get(group_id)
            if group is not None:
                bindings.setdefault(port["device_id"], []).append(group)
    return bindings


def names(groups: list[dict]) -> list[str]:
    """The names a server body shows: a group without a name (optional in Neutron) by its id."""
    return [group.get("name") or group["id"] for group in groups]
