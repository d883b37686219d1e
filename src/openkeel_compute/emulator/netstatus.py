"""A running VMI's interfaces as KubeVirt reports them (``status.interfaces``), and the steps of interface
hot(un)plug on the pod and in the domain.

An interface's entry is built as virt-handler's netstat and virt-controller's Multus status updater build it:

- on the pod network: the pod's IP (``ipAddress``/``ipAddresses``), ``podInterfaceName: eth0``, infoSource
  ``domain`` (``domain, guest-agent`` with the agent, which adds ``interfaceName``);
- on a secondary Multus network: its MAC, ``podInterfaceName`` (the hashed pod interface), infoSource
  ``domain, multus-status`` (``domain, guest-agent, multus-status`` with the agent, which adds ``interfaceName`` and
  the guest's addresses: without it KubeVirt knows no address of a bridge-bound secondary interface, as the
  emulator models no IPAM on the pod side);
- ``queueCount`` 1 and ``linkState`` (``down`` for ``state: down``).

Hotplug of an interface: (1) Multus attaches the network to the pod (network-status) and the VMI lists it with
infoSource ``multus-status`` only; (2) virt-handler plugs it into the domain (full entry). Unplug (``state:
absent``): (1) it leaves the domain (``multus-status`` only); (2) it leaves the pod and the status.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.emulator import guest, networks

MULTUS = "multus-status"


def _entry_of_pod(iface: dict[str, Any], mac: str, pod_ip: str | None, agent: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": iface.get("name"), "mac": mac}
    if pod_ip:
        entry["ipAddress"], entry["ipAddresses"] = pod_ip, [pod_ip]
        if agent is not None and iface.get("bridge") is not None:  # the guest's own link-local, not NATed away
            entry["ipAddresses"] = [pod_ip, guest.link_local(mac)]
    if agent is not None:
        entry["interfaceName"] = agent
    entry.update(infoSource="domain, guest-agent" if agent is not None else "domain", podInterfaceName="eth0",
                 queueCount=1, linkState="down" if iface.get("state") == "down" else "up")
    return entry


def _entry_of_secondary(iface: dict[str, Any], mac: str, agent: str | None,
                        configured: dict[str, list[str]]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": iface.get("name"), "mac": mac}
    if agent is not None:
        ips = guest.guest_addresses(mac, configured)
        entry.update(ipAddress=ips[0], ipAddresses=ips, interfaceName=agent,
                     infoSource=f"domain, guest-agent, {MULTUS}")
    else:
        entry["infoSource"] = f"domain, {MULTUS}"
    entry.update(podInterfaceName=networks.pod_interface_name(iface.get("name")), queueCount=1,
                 linkState="down" if iface.get("state") == "down" else "up")
    return entry


def _multus_only(name: str) -> dict[str, Any]:
    return {"name": name, "infoSource": MULTUS, "podInterfaceName": networks.pod_interface_name(name)}


def _plugged(entry: dict[str, Any] | None) -> bool:
    return entry is not None and "domain" in str(entry.get("infoSource") or "").split(", ")


class Interfaces:
    """The interfaces of one running VMI: what its status lists, what its pod has attached, and one step on."""

    def __init__(self, vmi: dict[str, Any], pod: dict[str, Any] | None, configured: dict[str, list[str]],
                 agent: bool, attachable: Any = None) -> None:
        """``attachable(network)``: whether Multus can attach that network (its definition exists)."""
        self.vmi, self.pod, self.configured, self.agent = vmi, pod, configured, agent
        self.attachable = attachable or (lambda _network: True)
        spec = vmi.get("spec") or {}
        self.ifaces = networks.interfaces_of(spec)
        self.nets = {n.get("name"): n for n in networks.networks_of(spec)}
        self.previous = {e.get("name"): e for e in (vmi.get("status") or {}).get("interfaces") or ()}
        self.attached = networks.attached_names(pod)
        self.pod_ip = ((pod or {}).get("status") or {}).get("podIP")

    def _mac(self, iface: dict[str, Any]) -> str:
        return networks.mac_of(self.vmi["metadata"]["uid"], iface.get("name"), iface.get("macAddress"))

    def _guest_name(self, name: str, taken: set[str]) -> str | None:
        if not self.agent:
            return None
        known = (self.previous.get(name) or {}).get("interfaceName")
        if known:
            return known
        chosen = guest.next_interface_name(taken)
        taken.add(chosen)
        return chosen

    def at_boot(self) -> list[dict[str, Any]]:
        """Every interface plugged, as the guest comes up (names in device order)."""
        taken: set[str] = set()
        out = []
        for iface in sorted(self.ifaces, key=lambda i: (self.nets.get(i.get("name"), {}).get("pod") is None)):
            name = iface.get("name")
            net = self.nets.get(name) or {}
            if iface.get("state") == "absent":
                continue
            agent = self._guest_name(name, taken)
            if net.get("pod") is not None:
                out.append(_entry_of_pod(iface, self._mac(iface), self.pod_ip, agent))
            elif networks.is_secondary(net):
                out.append(_entry_of_secondary(iface, self._mac(iface), agent, self.configured))
        return out

    def pending(self) -> bool:
        """Whether a hot(un)plug step is left to do."""
        return self.advance() is not None

    def advance(self) -> tuple[list[dict[str, Any]], list[str]] | None:
        """(the status interfaces, the secondary networks attached to the pod) one step on; None: settled.
        Entries of interfaces that did not move are kept as they are (a guest's addresses are read once)."""
        moved = False
        taken = {e.get("interfaceName") for e in self.previous.values() if e.get("interfaceName")}
        out: list[dict[str, Any]] = []
        attached: list[str] = []
        for iface in self.ifaces:
            name = iface.get("name")
            net = self.nets.get(name) or {}
            entry = self.previous.get(name)
            if not networks.is_secondary(net):
                if entry is not None:
                    out.append(self._link(iface, entry))
                continue
            pod_side = networks.pod_interface_name(name) in self.attached
            if iface.get("state") != "absent":
                if not pod_side and not self.attachable(net):
                    continue  # Multus cannot attach it (no such NetworkAttachmentDefinition): it waits
                if not pod_side:  # (1) Multus attaches it to the pod, the VMI controller lists it
                    moved = True
                    attached.append(name)
                    out.append(_multus_only(name))
                elif not _plugged(entry):  # (2) virt-handler plugs it into the domain
                    moved = True
                    attached.append(name)
                    out.append(_entry_of_secondary(iface, self._mac(iface), self._guest_name(name, taken),
                                                   self.configured))
                else:
                    attached.append(name)
                    out.append(self._link(iface, entry))
            elif _plugged(entry):  # unplug (1): out of the domain
                moved = True
                attached.append(name)
                out.append(_multus_only(name))
            elif pod_side:  # unplug (2): out of the pod, and of the status
                moved = True
        out.extend(e for n, e in self.previous.items() if n not in self.nets)  # guest-only, kept as they are
        primary = [e for e in out if (self.nets.get(e.get("name")) or {}).get("pod") is not None]
        out = primary + [e for e in out if e not in primary]
        if not moved and out == list(self.previous.values()):
            return None
        return out, attached

    @staticmethod
    def _link(iface: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
        state = "down" if iface.get("state") == "down" else "up"
        if entry.get("linkState") in (None, state) or not _plugged(entry):
            return entry
        return {**entry, "linkState": state}

    def migration_required(self) -> bool:
        """KubeVirt's network migration evaluator: a hot(un)plug on a secondary network is pending (the
        VMI shows MigrationRequired=False, AutoMigrationPending, until the dynamic networks controller did it)."""
        for iface in self.ifaces:
            if not networks.is_secondary(self.nets.get(iface.get("name")) or {}):
                continue
            entry = self.previous.get(iface.get("name"))
            if iface.get("state") != "absent" and entry is None:
                return True
            if iface.get("state") == "absent" and entry is not None and not _plugged(entry):
                return True
        return False
