"""A server's diagnostics (GET /servers/{id}/diagnostics) and NUMA topology (GET /servers/{id}/topology), from
what the database keeps of the server as the controller last saw its VirtualMachineInstance: its power state,
node, launch time, frozen flavor (vCPUs, memory, disks, NUMA extra specs) and interfaces (network info).

KubeVirt's VMI status carries no counters (CPU time, disk and network traffic are Prometheus metrics of
virt-handler, not API fields): those fields are null in the 2.48 format, as Nova's schema allows for a driver
that does not know them. The driver is libvirt (KubeVirt runs QEMU under libvirt in each virt-launcher pod),
the hypervisor kvm. A server must be running on a node, as Nova's compute requires.
"""

from __future__ import annotations

import datetime as dt
import json

from openkeel_compute.compute import errors
from openkeel_compute.compute.flavor_copy import FlavorCopy
from openkeel_compute.db.models import utcnow
from openkeel_compute.model.states import POWER_STATE_NAMES, power_state

_NUMA_SPECS = ("hw:numa_nodes", "hw:mem_page_size")


def check(row: dict) -> None:
    """Nova's checks: a host (409 "is not ready"), then a running guest (409 naming its power state)."""
    if not row["host"]:
        raise errors.InstanceNotReady(row["uuid"])
    if row["power_state"] != power_state.RUNNING:
        raise errors.InstanceInvalidState("get_diagnostics", row["uuid"], "power state",
                                          POWER_STATE_NAMES.get(row["power_state"], "pending"))


def _macs(row: dict) -> list[str]:
    macs: list[str] = []
    try:
        networks = json.loads(row["network_info"] or "{}")
    except ValueError:
        networks = {}
    for addresses in networks.values():
        for address in addresses:
            mac = address.get("OS-EXT-IPS-MAC:mac_addr")
            if mac and mac not in macs:
                macs.append(mac)
    return macs


def _flavor(row: dict) -> dict:
    return FlavorCopy.loads(row["flavor"]).cur if row.get("flavor") else {}


def _uptime(row: dict, now: dt.datetime | None) -> int | None:
    if row["launched_at"] is None:
        return None
    return max(0, int(((now or utcnow()) - row["launched_at"]).total_seconds()))


def standard(row: dict, *, now: dt.datetime | None = None) -> dict:
    """The 2.48 format."""
    flavor = _flavor(row)
    macs = _macs(row)
    disks = 1 + (1 if flavor.get("ephemeral_gb") else 0) + (1 if flavor.get("swap") else 0)
    nic = dict.fromkeys(("rx_drop", "rx_errors", "rx_octets", "rx_packets", "rx_rate", "tx_drop", "tx_errors",
                         "tx_octets", "tx_packets", "tx_rate"))
    return {
        "state": POWER_STATE_NAMES.get(row["power_state"], "pending"),
        "driver": "libvirt",
        "hypervisor": "kvm",
        "hypervisor_os": None,
        "uptime": _uptime(row, now),
        "config_drive": bool(row["config_drive"]),
        "num_cpus": row["vcpus"],
        "num_nics": len(macs),
        "num_disks": disks,
        "disk_details": [dict.fromkeys(("read_bytes", "read_requests", "write_bytes", "write_requests",
                                        "errors_count")) for _ in range(disks)],
        "cpu_details": [{"id": cpu, "time": None, "utilisation": None} for cpu in range(row["vcpus"] or 0)],
        "nic_details": [{"mac_address": mac, **nic} for mac in macs],
        "memory_details": {"maximum": row["memory_mb"], "used": None},
    }


def legacy(row: dict) -> dict:
    """Before 2.48, the driver's own keys (libvirt's); only the memory (KiB) is known without counters."""
    return {"memory": (row["memory_mb"] or 0) * 1024}


def _page_size_kb(value: str | None) -> int | None:
    if not value:
        return None
    text = value.strip().lower()
    if text in ("small", "any"):
        return 4
    if text == "large":
        return 2048
    units = {"kb": 1, "k": 1, "mb": 1024, "m": 1024, "gb": 1024 * 1024, "g": 1024 * 1024}
    for suffix, factor in units.items():
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    return int(text) if text.isdigit() else None


def topology(row: dict, *, show_host: bool) -> dict:
    """The guest's NUMA cells as Nova keeps them for a flavor that asks for a NUMA topology (hw:numa_nodes,
    hw:mem_page_size, hw:cpu_policy dedicated): vCPUs and memory split evenly over the nodes, as Nova does
    without hw:numa_cpus.N; none otherwise. KubeVirt does not report which host CPUs a vCPU was pinned to:
    ``cpu_pinning`` is empty."""
    specs = _flavor(row).get("extra_specs") or {}
    wanted = any(specs.get(key) for key in _NUMA_SPECS) or specs.get("hw:cpu_policy") == "dedicated"
    if not wanted:
        return {"nodes": [], "pagesize_kb": None}
    try:
        count = max(1, int(specs.get("hw:numa_nodes") or 1))
    except ValueError:
        count = 1
    vcpus, memory = row["vcpus"] or 0, row["memory_mb"] or 0
    per_cpu, per_mem = vcpus // count, memory // count
    nodes = []
    for cell in range(count):
        node: dict = {"vcpu_set": list(range(cell * per_cpu, (cell + 1) * per_cpu)), "siblings": [],
                      "memory_mb": per_mem}
        if show_host:
            node["host_node"] = cell
            node["cpu_pinning"] = {}
        nodes.append(node)
    return {"nodes": nodes, "pagesize_kb": _page_size_kb(specs.get("hw:mem_page_size"))}
