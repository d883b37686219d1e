"""Secondary networks: Multus NetworkAttachmentDefinitions, the launcher pod's network annotations, KubeVirt's
network admission rules and its declarative interface hotplug, as KubeVirt v1.9 and Multus do them.

- A VMI network ``multus: {networkName: "ns/name" or "name"}`` names a NetworkAttachmentDefinition. virt-controller
  looks it up when it renders the launcher pod; a missing one leaves the VMI Pending, without a pod, with
  ``Synchronized=False`` reason ``FailedCreate`` (``failed to render launch manifest: failed to locate network
  attachment definition ns/name``) until it exists.
- The pod asks Multus for each secondary network in ``k8s.v1.cni.cncf.io/networks`` (a JSON list of network
  selection elements: name, namespace, mac, interface ``pod<sha256(network name)[:11]>``); Multus answers in
  ``k8s.v1.cni.cncf.io/network-status`` (its own layout: one indented JSON object per attachment), the cluster's
  default network first.
- Hotplug (HotplugNICs, GA): an interface with bridge (or SR-IOV) binding added to a running VM's template is
  appended to the VMI by the VM controller; Multus's dynamic networks controller attaches it to the running pod
  (network-status), then virt-handler plugs it into the domain. ``state: absent`` runs the same backwards, and the
  VM controller then drops the interface from the VMI and the VM. Meanwhile the VMI shows
  ``MigrationRequired=False`` ``AutoMigrationPending``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"
DEFAULT_NETWORK = "ovn-kubernetes"  # the cluster network's name as Multus reports it for eth0
RESERVED_MAC = "02:00:00:00:00:00"  # masquerade's in-pod bridge
INTERFACE_MODELS = {"e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139", "virtio"}
_NAME = re.compile(r"^[A-Za-z0-9-_]+$")
_HEX2 = r"[0-9A-Fa-f]{2}"
_HEX4 = r"[0-9A-Fa-f]{4}"
BINDINGS = ("bridge", "masquerade", "sriov", "passtBinding", "binding")
DISCONTINUED = (("slirp", "Slirp interface support has been discontinued since v1.3"),
                ("passt", "Passt network binding has been discontinued since v1.3"),
                ("macvtap", "Macvtap network binding has been discontinued since v1.3"))


def _devices(spec: dict[str, Any]) -> dict[str, Any]:
    return (spec.get("domain") or {}).get("devices") or {}


def interfaces_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(_devices(spec).get("interfaces") or [])


def networks_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("networks") or [])


def is_secondary(network: dict[str, Any]) -> bool:
    multus = network.get("multus")
    return isinstance(multus, dict) and not multus.get("default")


def nad_key(namespace: str | None, network_name: str) -> tuple[str | None, str]:
    """(namespace, name) of the NetworkAttachmentDefinition a ``multus.networkName`` names."""
    if "/" in network_name:
        ns, name = network_name.split("/", 1)
        return ns, name
    return namespace, network_name


def pod_interface_name(network_name: str) -> str:
    """The pod interface KubeVirt asks Multus for (its hashed name scheme)."""
    return "pod" + hashlib.sha256(network_name.encode()).hexdigest()[:11]


def mac_of(vmi_uid: str, name: str, spec_mac: str | None) -> str:
    """The interface's MAC: the one asked for, else a stable locally administered one."""
    if spec_mac:
        return spec_mac.lower()
    digest = hashlib.sha256(f"{vmi_uid}/{name}".encode()).hexdigest()
    return "02:" + ":".join(digest[i:i + 2] for i in range(0, 10, 2))


def parse_mac(text: str) -> int | None:
    """How many octets Go's net.ParseMAC finds in ``text`` (None: malformed)."""
    for sep in (":", "-"):
        parts = text.split(sep)
        if len(parts) in (6, 8, 20) and all(re.fullmatch(_HEX2, p) for p in parts):
            return len(parts)
    parts = text.split(".")
    if len(parts) in (3, 4, 10) and all(re.fullmatch(_HEX4, p) for p in parts):
        return len(parts) * 2
    return None


def attachment_keys(vmi: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    """The store keys of the NetworkAttachmentDefinitions a VMI's networks name."""
    namespace = vmi["metadata"].get("namespace")
    return [("network-attachment-definitions", *nad_key(namespace, n["multus"]["networkName"]))
            for n in networks_of(vmi.get("spec") or {})
            if isinstance(n.get("multus"), dict) and n["multus"].get("networkName")]


def missing_attachment(store: Any, vmi: dict[str, Any]) -> str | None:
    """``ns/name`` of the first NetworkAttachmentDefinition the VMI needs and its cluster lacks."""
    namespace = vmi["metadata"].get("namespace")
    for network in networks_of(vmi.get("spec") or {}):
        multus = network.get("multus")
        if isinstance(multus, dict) and multus.get("networkName"):
            ns, name = nad_key(namespace, multus["networkName"])
            if store.lookup("NetworkAttachmentDefinition", name, ns) is None:
                return f"{ns}/{name}"
    return None


# -- the launcher pod's annotations --------------------------------------------------------------------

def attachable(spec: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(network, interface) of each secondary Multus network the pod should carry (an absent interface's
    network goes once its interface left the domain; see ``Hotplug``)."""
    by_name = {i.get("name"): i for i in interfaces_of(spec)}
    return [(n, by_name.get(n.get("name"))) for n in networks_of(spec) if is_secondary(n)]


def selection(namespace: str | None, pairs: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> str | None:
    """``k8s.v1.cni.cncf.io/networks`` for these networks (None: the pod asks for no secondary network)."""
    elements = []
    for network, iface in pairs:
        ns, name = nad_key(namespace, network["multus"]["networkName"])
        element: dict[str, Any] = {"name": name, "namespace": ns}
        if iface and iface.get("macAddress"):
            element["mac"] = iface["macAddress"]
        element["interface"] = pod_interface_name(network["name"])
        elements.append(element)
    if not elements:
        return None
    return json.dumps(elements, separators=(",", ":"))


def _go_indent(entry: dict[str, Any]) -> str:
    """One network status as Go's json.MarshalIndent(status, "", "    ") writes it (Multus's layout)."""
    return json.dumps(entry, indent=4)


def network_status(namespace: str | None, pod_ip: str, pod_mac: str,
                   pairs: list[tuple[dict[str, Any], dict[str, Any] | None]], vmi_uid: str) -> str:
    """``k8s.v1.cni.cncf.io/network-status`` as Multus writes it: the default network (eth0, the pod's IP),
    then one entry per attached secondary network (its MAC; no IP: the emulator models no IPAM)."""
    entries: list[dict[str, Any]] = [{"name": DEFAULT_NETWORK, "interface": "eth0", "ips": [pod_ip], "mac": pod_mac,
                                      "default": True, "dns": {}}]
    for network, iface in pairs:
        ns, name = nad_key(namespace, network["multus"]["networkName"])
        entries.append({"name": f"{ns}/{name}", "interface": pod_interface_name(network["name"]),
                        "mac": mac_of(vmi_uid, network["name"], (iface or {}).get("macAddress")), "dns": {}})
    return "[" + ",".join(_go_indent(e) for e in entries) + "]"


def attached_names(pod: dict[str, Any] | None) -> set[str]:
    """The pod interfaces Multus attached (from the pod's network-status)."""
    raw = ((pod or {}).get("metadata", {}).get("annotations") or {}).get(STATUS_ANNOTATION)
    if not raw:
        return set()
    try:
        return {e.get("interface") for e in json.loads(raw) if isinstance(e, dict)}
    except ValueError:
        return set()


# -- KubeVirt's network admission (pkg/network/admitter) ---------------------------------------------

def validate(spec: dict[str, Any], path: str, creating: bool = True) -> list[str]:
    """The messages KubeVirt v1.9's network validator gives for a VMI spec at ``path``."""
    ifaces, nets = interfaces_of(spec), networks_of(spec)
    ipath = f"{path}.domain.devices.interfaces"
    out: list[str] = []
    if creating:
        out.extend(message for iface in ifaces for field, message in DISCONTINUED if iface.get(field) is not None)
    pods = [n for n in nets if n.get("pod") is not None]
    defaults = [n for n in nets if isinstance(n.get("multus"), dict) and n["multus"].get("default")]
    if len(pods) > 1:
        out.append(f"more than one interface is connected to a pod network in {path}.interfaces")
    if len(defaults) > 1:
        out.append("Multus CNI should only have one default network")
    if pods and defaults:
        out.append("Pod network cannot be defined when Multus default network is defined")
    for i, net in enumerate(nets):
        count = (net.get("pod") is not None) + (net.get("multus") is not None) + (net.get("resourceClaim") is not None)
        if count == 0:
            out.append("should have a network type")
        elif count > 1:
            out.append("should have only one network type")
    for i, net in enumerate(nets):
        if net.get("multus") is not None and not (net.get("multus") or {}).get("networkName"):
            out.append("CNI delegating plugin must have a networkName")
            break
    default_net = (pods or defaults or [None])[0]
    for iface in ifaces:
        state = iface.get("state")
        name = iface.get("name")
        if state not in (None, "", "absent", "down", "up"):
            out.append(f"logical {name} interface state value is unsupported: {state}")
        if iface.get("sriov") is not None and state in ("down", "up"):
            out.append(f'"{name}" interface\'s state "{state}" is not supported for SR-IOV NICs')
        if state == "absent" and iface.get("bridge") is None:
            out.append(f'"{name}" interface\'s state "absent" is supported only for bridge binding')
        if state == "absent" and default_net is not None and default_net.get("name") == name:
            out.append(f'"{name}" interface\'s state "absent" is not supported on default networks')
    nets_by_name = {n.get("name"): n for n in nets}
    for i, iface in enumerate(ifaces):
        name = iface.get("name")
        if sum(iface.get(b) is not None for b in BINDINGS) != 1:
            out.append(f"logical {name} interface must have exactly one binding method or binding plugin")
        net = nets_by_name.get(name) or {}
        if iface.get("masquerade") is not None and net.get("pod") is None:
            out.append("Masquerade interface only implemented with pod network")
        if iface.get("masquerade") is not None and iface.get("macAddress") == RESERVED_MAC:
            out.append("The requested MAC address is reserved for the in-pod bridge. Please choose another one.")
        if iface.get("passtBinding") is not None and net.get("pod") is None:
            out.append("PasstBinding interface only implemented with pod network")
    seen: set[str] = set()
    for net in nets:
        if net.get("name") in seen:
            out.append(f'Network with name "{net.get("name")}" already exists, every network must have a unique name')
        seen.add(net.get("name"))
    iface_names = {i.get("name") for i in ifaces}
    for i, net in enumerate(nets):
        if net.get("name") not in iface_names:
            out.append(f"{path}.networks[{i}].name '{net.get('name')}' not found.")
    seen = set()
    for iface in ifaces:
        if iface.get("name") in seen:
            out.append("Only one interface can be connected to one specific network")
        seen.add(iface.get("name"))
    for i, iface in enumerate(ifaces):
        if iface.get("name") not in nets_by_name:
            out.append(f"{ipath}[{i}].name '{iface.get('name')}' not found.")
    for i, iface in enumerate(ifaces):
        out.extend(_interface_fields(iface, f"{ipath}[{i}]", nets_by_name.get(iface.get("name")) or {}))
    return out


def _interface_fields(iface: dict[str, Any], field: str, net: dict[str, Any]) -> list[str]:
    out = []
    if not _NAME.fullmatch(str(iface.get("name") or "")):
        out.append("Network interface name can only contain alphabetical characters, numbers, dashes (-) or "
                   "underscores (_)")
    model = iface.get("model")
    if model and model not in INTERFACE_MODELS:
        out.append(f"interface {field}.name uses model {model} that is not supported.")
    mac = iface.get("macAddress")
    if mac:
        octets = parse_mac(mac)
        if octets is None:
            out.append(f"interface {field}.name has malformed MAC address ({mac}).")
        elif octets > 6:
            out.append(f"interface {field}.name has too long MAC address ({mac}).")
    if net.get("pod") is not None and iface.get("ports"):
        names: set[str] = set()
        for j, port in enumerate(iface["ports"]):
            pname = port.get("name")
            if pname:
                if pname in names:
                    out.append(f"Duplicate name of the port: {pname}")
                names.add(pname)
            number = port.get("port") or 0
            if number == 0:
                out.append("Port field is mandatory.")
            if number < 0 or number >= 65536:
                out.append("Port field must be in range 0 < x < 65536.")
            if port.get("protocol") not in (None, "", "TCP", "UDP"):
                out.append("Unknown protocol, only TCP or UDP allowed")
    return out


# -- the VM controller's interface sync (pkg/network/controllers/vm.go) -------------------------------

def sync_vmi(vm_spec: dict[str, Any], vmi: dict[str, Any]) -> dict[str, Any] | None:
    """The VMI spec with the VM template's dynamic interface requests applied (new bridge/SR-IOV interfaces
    appended, state changes copied, absent interfaces no longer reported dropped, Multus network names
    followed); None when nothing changes."""
    spec = vmi.get("spec") or {}
    wanted = {i.get("name"): i.get("state") for i in interfaces_of(vm_spec)}
    have = {i.get("name"): i.get("state") for i in interfaces_of(spec)}
    if wanted == have and not any(state == "absent" for state in have.values()) and all(
            not isinstance(n.get("multus"), dict) for n in networks_of(spec)):
        return None  # nothing to hotplug, unplug or follow (the common case: costs no copy)
    vmi_ifaces = copy.deepcopy(interfaces_of(spec))
    vmi_nets = copy.deepcopy(networks_of(spec))
    by_name = {i.get("name"): i for i in vmi_ifaces}
    vm_nets = {n.get("name"): n for n in networks_of(vm_spec)}
    for vm_iface in interfaces_of(vm_spec):
        current = by_name.get(vm_iface.get("name"))
        state = vm_iface.get("state") or ""
        if current is None:
            if state != "absent" and (vm_iface.get("bridge") is not None or vm_iface.get("sriov") is not None) \
                    and vm_iface.get("name") in vm_nets:
                vmi_nets.append(copy.deepcopy(vm_nets[vm_iface["name"]]))
                vmi_ifaces.append(copy.deepcopy(vm_iface))
        elif state != (current.get("state") or "") and (current.get("state") or "") != "absent":
            if state:
                current["state"] = state
            else:
                current.pop("state", None)
    reported = {s.get("name") for s in (vmi.get("status") or {}).get("interfaces") or ()}
    kept = [i for i in vmi_ifaces if i.get("state") != "absent" or i.get("name") in reported]
    names = {i.get("name") for i in kept}
    nets = [n for n in vmi_nets if n.get("name") in names]
    for net in nets:
        wanted = vm_nets.get(net.get("name"))
        if wanted and isinstance(wanted.get("multus"), dict) and isinstance(net.get("multus"), dict):
            net["multus"]["networkName"] = wanted["multus"].get("networkName")
    if kept == interfaces_of(spec) and nets == networks_of(spec):
        return None
    new_spec = dict(spec)
    new_spec["domain"] = dict(spec.get("domain") or {})
    new_spec["domain"]["devices"] = dict(_devices(spec))
    new_spec["domain"]["devices"]["interfaces"] = kept
    new_spec["networks"] = nets
    return new_spec


def clear_vm(vm_spec: dict[str, Any], vmi: dict[str, Any] | None) -> dict[str, Any] | None:
    """The VM template spec without the absent interfaces the VMI no longer has (None: unchanged)."""
    ifaces = interfaces_of(vm_spec)
    if not any(i.get("state") == "absent" for i in ifaces):
        return None
    vmi_spec = (vmi or {}).get("spec") or {}
    in_vmi = {i.get("name") for i in interfaces_of(vmi_spec)}
    reported = {s.get("name") for s in ((vmi or {}).get("status") or {}).get("interfaces") or ()}
    kept = [i for i in ifaces if i.get("state") != "absent" or i.get("name") in in_vmi or i.get("name") in reported]
    if len(kept) == len(ifaces):
        return None
    names = {i.get("name") for i in kept}
    new_spec = copy.deepcopy(vm_spec)
    new_spec["domain"]["devices"]["interfaces"] = kept
    new_spec["networks"] = [n for n in networks_of(vm_spec) if n.get("name") in names]
    return new_spec


def restart_required(vm_spec: dict[str, Any], vmi_spec: dict[str, Any]) -> bool:
    """pkg/network/vmliveupdate: whether the VM's interfaces and networks differ from the running VMI's in a
    way hotplug cannot carry (an interface or network removed without ``absent``, one changed other than its
    state or Multus network name, a pod network added)."""
    desired = {i.get("name"): i for i in interfaces_of(vm_spec)}
    for iface in interfaces_of(vmi_spec):
        other = desired.get(iface.get("name"))
        if other is None or {k: v for k, v in other.items() if k != "state"} != \
                {k: v for k, v in iface.items() if k != "state"}:
            return True
    wanted = {n.get("name"): n for n in networks_of(vm_spec)}
    current = networks_of(vmi_spec)
    if any(n.get("pod") is not None for n in wanted.values()) and not any(n.get("pod") is not None for n in current):
        return True

    def plain(net: dict[str, Any] | None) -> dict[str, Any] | None:
        if net is None:
            return None
        net = copy.deepcopy(net)
        if isinstance(net.get("multus"), dict):
            net["multus"].pop("networkName", None)
        return net

    return any(plain(wanted.get(n.get("name"))) != plain(n) for n in current)
