"""The emulated guest: an Ubuntu 24.04 cloud image with cloud-init and the QEMU guest agent.

What KubeVirt learns from inside a real guest comes from its guest agent; the emulator's guest is
deterministic so that tests can check addresses end to end:

- **Network**: at boot, cloud-init configures the static addresses of the VMI's cloud-init network data
  (``cloudInitNoCloud`` or ``cloudInitConfigDrive``: ``networkData``, ``networkDataBase64`` or the Secret of
  ``networkDataSecretRef``, key ``networkdata`` or ``networkData``) on the interface whose MAC the data names.
  Understood: OpenStack's ``network_data.json`` (``links`` + ``networks`` of type ``ipv4``/``ipv6``, as Nova's
  config drive and metadata service serve it) and cloud-init's network-config v1 (``subnets`` of type
  ``static``) and v2 (``ethernets`` matched by ``macaddress``, ``addresses``). DHCP is not modelled (no address).
  Every interface also has its IPv6 link-local address (EUI-64 of its MAC). An interface hotplugged later is
  configured from the network data as it is then (the Secret may have changed), as cloud-init's hotplug handler
  does. Interfaces are named as Ubuntu names virtio NICs on q35: ``enp1s0``, ``enp2s0``, … in device order.
- **Guest agent**: connected once the guest runs (VMI condition ``AgentConnected``), reporting the OS
  (``status.guestOSInfo``) and each interface's name and addresses. A VMI (its VM's template) annotated
  ``emulator.openkeel.io/guest-agent: "false"`` runs an image without the agent: no ``AgentConnected``, no
  ``guestOSInfo``, and KubeVirt then knows no address of a bridge-bound secondary interface.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from collections.abc import Callable
from typing import Any

import yaml

from openkeel_compute.emulator.store import ApiError, now
from openkeel_compute.kubevirt.quantity import to_bytes

AGENT_ANNOTATION = "emulator.openkeel.io/guest-agent"
AGENT_VERBS = ("guestosinfo", "userlist", "filesystemlist")
AGENT_VERSION = "8.2.2"
AGENT_COMMANDS = ("guest-exec", "guest-exec-status", "guest-fsfreeze-freeze", "guest-fsfreeze-status",
                  "guest-fsfreeze-thaw", "guest-get-fsinfo", "guest-get-host-name", "guest-get-osinfo",
                  "guest-get-time", "guest-get-timezone", "guest-get-users", "guest-info",
                  "guest-network-get-interfaces", "guest-ping", "guest-set-user-password", "guest-shutdown",
                  "guest-ssh-add-authorized-keys", "guest-ssh-get-authorized-keys", "guest-sync")
GUEST_OS_INFO = {"name": "Ubuntu", "kernelRelease": "6.8.0-45-generic", "version": "24.04.1 LTS (Noble Numbat)",
                 "prettyName": "Ubuntu 24.04.1 LTS", "versionId": "24.04",
                 "kernelVersion": "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024",
                 "machine": "x86_64", "id": "ubuntu"}
Lookup = Callable[[str, str, "str | None"], "dict[str, Any] | None"]


def has_agent(vmi: dict[str, Any]) -> bool:
    return ((vmi.get("metadata") or {}).get("annotations") or {}).get(AGENT_ANNOTATION) != "false"


def agent_condition() -> dict[str, Any]:
    """virt-handler's condition once the agent's channel is up (no reason, no transition time)."""
    return {"type": "AgentConnected", "status": "True", "lastProbeTime": now(), "lastTransitionTime": None}


def link_local(mac: str) -> str:
    """The IPv6 link-local address a Linux guest derives from a MAC (EUI-64)."""
    octets = [int(p, 16) for p in re.split("[:-]", mac)]
    octets[0] ^= 0x02
    eui = octets[:3] + [0xFF, 0xFE] + octets[3:]
    groups = [f"{eui[i] << 8 | eui[i + 1]:x}" for i in range(0, 8, 2)]
    return str(ipaddress.IPv6Address("fe80::" + ":".join(groups)))


def _network_data_text(spec: dict[str, Any], namespace: str | None, lookup: Lookup) -> str | None:
    for volume in spec.get("volumes") or ():
        source = volume.get("cloudInitNoCloud") or volume.get("cloudInitConfigDrive")
        if not isinstance(source, dict):
            continue
        if source.get("networkData"):
            return source["networkData"]
        if source.get("networkDataBase64"):
            try:
                return base64.b64decode(source["networkDataBase64"]).decode()
            except ValueError:
                return None
        ref = (source.get("networkDataSecretRef") or {}).get("name")
        if ref:
            secret = lookup("Secret", ref, namespace) or {}
            data = secret.get("data") or {}
            for key in ("networkdata", "networkData"):
                if key in data:
                    try:
                        return base64.b64decode(data[key]).decode()
                    except ValueError:
                        return None
            for key in ("networkdata", "networkData"):
                if key in (secret.get("stringData") or {}):
                    return secret["stringData"][key]
    return None


def _address(address: str, netmask: str | None = None) -> str | None:
    try:
        if "/" in address or not netmask:
            return str(ipaddress.ip_interface(address).ip)
        return str(ipaddress.ip_interface(f"{address}/{netmask}").ip)
    except ValueError:
        return None


def _from_openstack(doc: dict[str, Any]) -> dict[str, list[str]]:
    """network_data.json: MAC -> static addresses."""
    macs = {link.get("id"): str(link.get("ethernet_mac_address") or "").lower()
            for link in doc.get("links") or () if isinstance(link, dict)}
    found: dict[str, list[str]] = {}
    for net in doc.get("networks") or ():
        if not isinstance(net, dict) or net.get("type") not in ("ipv4", "ipv6") or not net.get("ip_address"):
            continue
        mac = macs.get(net.get("link"))
        ip = _address(str(net["ip_address"]), net.get("netmask"))
        if mac and ip:
            found.setdefault(mac, []).append(ip)
    return found


def _from_v1(doc: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in doc.get("config") or ():
        if not isinstance(entry, dict) or entry.get("type") != "physical" or not entry.get("mac_address"):
            continue
        for subnet in entry.get("subnets") or ():
            if isinstance(subnet, dict) and subnet.get("type") in ("static", "static6") and subnet.get("address"):
                ip = _address(str(subnet["address"]), subnet.get("netmask"))
                if ip:
                    found.setdefault(str(entry["mac_address"]).lower(), []).append(ip)
    return found


def _from_v2(doc: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for eth in (doc.get("ethernets") or {}).values():
        if not isinstance(eth, dict):
            continue
        mac = str(((eth.get("match") or {}).get("macaddress")) or "").lower()
        for address in eth.get("addresses") or ():
            ip = _address(str(address))
            if mac and ip:
                found.setdefault(mac, []).append(ip)
    return found


def configured_addresses(spec: dict[str, Any], namespace: str | None, lookup: Lookup) -> dict[str, list[str]]:
    """MAC (lower case) -> the static addresses the guest's cloud-init network data gives it."""
    text = _network_data_text(spec, namespace, lookup)
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            return {}
    if not isinstance(doc, dict):
        return {}
    if "links" in doc or "networks" in doc and isinstance(doc.get("networks"), list):
        return _from_openstack(doc)
    if isinstance(doc.get("network"), dict):
        doc = doc["network"]
    if doc.get("version") == 1:
        return _from_v1(doc)
    if doc.get("version") == 2:
        return _from_v2(doc)
    return {}


def guest_addresses(mac: str, configured: dict[str, list[str]]) -> list[str]:
    """What the guest agent reports for one interface: IPv4 first, then IPv6 (link-local included), as
    KubeVirt orders them."""
    ips = list(configured.get(mac.lower(), []))
    v4 = [ip for ip in ips if ":" not in ip]
    v6 = [ip for ip in ips if ":" in ip] + [link_local(mac)]
    return v4 + v6


def next_interface_name(taken: set[str]) -> str:
    """The name Ubuntu gives the next virtio NIC on a free PCIe root port."""
    used = {int(m.group(1)) for name in taken if (m := re.fullmatch(r"enp(\d+)s0", name or ""))}
    slot = 1
    while slot in used:
        slot += 1
    return f"enp{slot}s0"


def boot_disk(spec: dict[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    """(the disk the guest boots from: the lowest bootOrder, else the first, its claim's name or None), None
    for a VMI without disks."""
    disks = ((spec.get("domain") or {}).get("devices") or {}).get("disks") or []
    if not disks:
        return None
    first = min(disks, key=lambda d: (d.get("bootOrder") is None, d.get("bootOrder") or 0, disks.index(d)))
    volume = next((v for v in spec.get("volumes") or () if v.get("name") == first.get("name")), {})
    return first, (volume.get("dataVolume") or {}).get("name") or (volume.get("persistentVolumeClaim") or {}).get(
        "claimName")


def _root_filesystem(vmi: dict[str, Any], lookup: Lookup) -> dict[str, Any]:
    """The root filesystem the guest reports: ext4 on the first partition of its boot disk."""
    total = 0
    serial = ""
    boot = boot_disk(vmi.get("spec") or {})
    if boot is not None:
        first, claim = boot
        serial = first.get("serial") or ""
        pvc = lookup("PersistentVolumeClaim", claim, vmi["metadata"].get("namespace")) if claim else None
        size = (((pvc or {}).get("status") or {}).get("capacity") or {}).get("storage")
        if size:
            total = int(to_bytes(size)) - 116 * 1024 * 1024  # less the BIOS and EFI partitions
    return {"diskName": "vda1", "mountPoint": "/", "fileSystemType": "ext4", "usedBytes": min(total, 1_879_048_192),
            "totalBytes": total, "disk": [{"serial": serial, "busType": "virtio"}]}


def agent_answer(store: Any, namespace: str, name: str, verb: str) -> dict[str, Any]:
    """``GET …/virtualmachineinstances/NAME/{guestosinfo,userlist,filesystemlist}`` as virt-api relays the guest
    agent's report: 409 unless the VMI runs with its agent connected."""
    vmi = store.lookup("VirtualMachineInstance", name, namespace)
    if vmi is None:
        raise ApiError(404, f'virtualmachineinstance.kubevirt.io "{name}" not found',
                       details={"name": name, "group": "kubevirt.io", "kind": "virtualmachineinstance"})
    status = vmi.get("status") or {}
    why = None
    if status.get("phase") != "Running":
        why = "VMI is not running"
    elif not any(c.get("type") == "AgentConnected" for c in status.get("conditions") or ()):
        why = "VMI does not have guest agent connected"
    if why:
        raise ApiError(409, f'Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "{name}": {why}',
                       details={"name": name, "group": "kubevirt.io", "kind": "virtualmachineinstance"})
    root = _root_filesystem(vmi, store.lookup)
    if verb == "userlist":  # a cloud image nobody logged in to
        return {"metadata": {}, "items": []}
    if verb == "filesystemlist":
        return {"metadata": {}, "items": [root]}
    return {"guestAgentVersion": AGENT_VERSION,
            "supportedCommands": [{"name": c, "enabled": True} for c in AGENT_COMMANDS],
            "hostname": (vmi.get("spec") or {}).get("hostname") or name, "os": dict(GUEST_OS_INFO),
            "timezone": "UTC, 0", "fsInfo": {"disks": [root]}, "fsFreezeStatus": "thawed"}
