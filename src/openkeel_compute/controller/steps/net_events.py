"""Neutron's events about a server's ports after its build (POST /os-server-external-events, recorded by
the API), consumed once per pass in the order received, as Nova's compute handles them:

- ``network-changed``: the server's network info is read again from Neutron (its ports, their fixed and
  floating IPs, their state); a port Neutron no longer binds to the server is dropped, so the server
  never shows an address it no longer has;
- ``network-vif-deleted``: the port is dropped from the network info and its interface unplugged from the
  VirtualMachine (KubeVirt's declarative hotplug: ``state: absent``; KubeVirt then removes it);
- ``network-vif-plugged`` / ``network-vif-unplugged``: the port is marked plugged or not (a build waiting
  for its ports consumes its own plugged events: steps/vif_wait.py).

Events of a server without Neutron ports, or gone, are consumed with nothing to do, as Nova's compute
drops events for an instance it does not have.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from openkeel_compute.compute import external_events
from openkeel_compute.controller.steps import ports
from openkeel_compute.controller.steps.base import Context, read_server
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.attachments import port_interface_name
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import sysmeta
from openkeel_compute.network import errors as net_errors

LOG = logging.getLogger(__name__)
NAMES = ("network-changed", "network-vif-deleted", "network-vif-plugged", "network-vif-unplugged")


def consume(ctx: Context, limit: int = 500) -> None:
    """The pending network events, server by server in the order received. Neutron away: the server's
    events stay for the next pass."""
    if ctx.network is None:
        return
    with reader(ctx.engine) as conn:
        events = external_events.pending(conn, limit=limit, names=NAMES)
    by_server: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_server.setdefault(event["instance_uuid"], []).append(event)
    for uuid, theirs in by_server.items():
        server = read_server(ctx.engine, uuid)
        if server is not None and server["system_metadata"].get(sysmeta.VIF_WAIT):
            theirs = [e for e in theirs if e["name"] != "network-vif-plugged"]  # the build's own
        try:
            if server is not None and ports.info_of(server) is not None:
                _apply(ctx, server, theirs)
        except net_errors.NeutronUnavailable as exc:
            LOG.warning("server %s: its network events wait for Neutron: %s", uuid, exc.message)
            continue
        with transaction(ctx.engine) as conn:
            external_events.handled(conn, [e["id"] for e in theirs])


def _apply(ctx: Context, server: dict[str, Any], events: list[dict[str, Any]]) -> None:
    info = ports.info_of(server) or []
    before = json.dumps(info, sort_keys=True)
    for event in events:
        name, tag = event["name"], event["tag"]
        if name == "network-changed":
            info = refreshed(ctx, server, info)
        elif name == "network-vif-deleted":
            gone = [vif for vif in info if vif["port_id"] == tag]
            info = [vif for vif in info if vif["port_id"] != tag]
            for vif in gone:
                unplug(ctx, server, vif["port_id"])
        elif name in ("network-vif-plugged", "network-vif-unplugged"):
            for vif in info:
                if vif["port_id"] == tag and event["status"] == "completed":
                    vif["active"] = name == "network-vif-plugged"
    if json.dumps(info, sort_keys=True) != before:
        ports.save(ctx, server, info)


def refreshed(ctx: Context, server: dict[str, Any], info: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The network info as Neutron shows the server's ports now (their order and OpenKeel's flags kept)."""
    assert ctx.network is not None
    calls = ctx.network.admin()
    found = {p["id"]: p for p in calls.list_ports(device_id=server["uuid"])}
    out = []
    networks: dict[str, dict[str, Any]] = {}
    for vif in info:
        port = found.get(vif["port_id"])
        if port is None:
            LOG.info("server %s: port %s is no longer bound to it", server["uuid"], vif["port_id"])
            unplug(ctx, server, vif["port_id"])
            continue
        network = networks.get(port["network_id"]) or calls.show_network(port["network_id"])
        networks[network["id"]] = network
        floating = [f["floating_ip_address"] for f in calls.list_floating_ips(port_id=port["id"])]
        out.append(ports.vif_of(port, network, floating, vif.get("created", False), vif.get("tag"),
                                ports.subnets_of(calls, port)))
    return out


def unplug(ctx: Context, server: dict[str, Any], port_id: str) -> None:
    """The port's interface unplugged from the VM (``state: absent``), if the VM has it."""
    namespace = ctx.namespace_of(server)
    vm = ctx.cluster.look(namespace, server["uuid"])[0]
    if vm is None:
        return
    path = "/spec/template/spec/domain/devices/interfaces"
    current = (((((vm.get("spec") or {}).get("template") or {}).get("spec") or {}).get("domain") or {})
               .get("devices") or {}).get("interfaces") or []
    name = port_interface_name(port_id)
    wanted = [{**i, "state": "absent"} if i.get("name") == name else i for i in current]
    if wanted != current:
        ctx.cluster.patch("VirtualMachine", namespace, server_vm_name(server["uuid"]),
                          [{"op": "test", "path": path, "value": current}, {"op": "replace", "path": path, "value": wanted}])
