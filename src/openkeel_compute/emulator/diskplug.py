"""One step on of a running VMI's volumes: hot(un)plug through the attachment pod, and claims that grew
(see disks.py for what each phase means)."""

from __future__ import annotations

from typing import Any

from openkeel_compute.emulator import disks
from openkeel_compute.emulator.store import clone

MOUNTED = ("AttachedToNode", "MountedToPod", "Ready", "UnMountedFromPod")


def _storage(info: dict[str, Any] | None) -> str | None:
    return ((info or {}).get("capacity") or {}).get("storage")


def _bytes(quantity: str | None) -> int:
    return int(disks.to_bytes(quantity)) if quantity else 0


class VolumePlug:
    """The volumes of one running VMI: what one step changes (``advance``), applied by ``apply``."""

    def __init__(self, store: Any, launchers: Any, vmi: dict[str, Any]) -> None:
        self.store, self.launchers, self.vmi = store, launchers, vmi
        self.ns = vmi["metadata"].get("namespace")
        spec = vmi.get("spec") or {}
        self.spec = spec
        self.volumes = {v.get("name"): v for v in spec.get("volumes") or ()}
        self.disk_by_name = {d.get("name"): d for d in ((spec.get("domain") or {}).get("devices") or {}).get(
            "disks") or ()}
        self.entries = {e.get("name"): e for e in (vmi.get("status") or {}).get("volumeStatus") or ()}
        self.launcher = launchers.pod_of(vmi)
        self.pod = self._attachment_pod()

    def _claim(self, name: str | None) -> dict[str, Any] | None:
        return self.store.lookup("PersistentVolumeClaim", name, self.ns) if name else None

    def _attachment_pod(self) -> dict[str, Any] | None:
        if self.launcher is None:
            return None
        for key in self.store.objects.dependents_of(self.launcher["metadata"]["uid"]):
            pod = self.store.objects.get(key)
            if key[0] == "pods" and pod is not None and not pod["metadata"].get("deletionTimestamp"):
                return pod
        return None

    def advance(self) -> tuple[dict[str, dict[str, Any]], list[str], list[tuple[str, list[str]]]] | None:
        """(entries by name, the volumes the attachment pod must hold, (target, kernel lines) the guest prints);
        None when nothing moves."""
        entries = dict(self.entries)
        lines: list[tuple[str, list[str]]] = []
        taken = {e.get("target") for e in entries.values() if e.get("target")}
        ready_virtio = sum(1 for n, e in entries.items() if e.get("hotplugVolume") is not None and e.get(
            "phase") == "Ready" and (e.get("target") or "").startswith("vd"))
        for name, volume in self.volumes.items():
            entry = entries.get(name)
            claim_name = disks.claim_name(volume)
            pvc = self._claim(claim_name)
            if disks.hotpluggable(volume):
                phase = (entry or {}).get("phase")
                if phase in (None, "Pending", "Bound", "Detaching"):
                    new_phase, reason, message = disks._phase_from_claim(pvc, claim_name or "")
                    if new_phase == "Bound" and phase == "Bound":
                        entries[name] = disks.entry_update(entry, phase="AttachedToNode", reason="SuccessfulCreate",
                                                           message="")  # the pod's name once it exists
                        continue
                    fresh = {"name": name, "hotplugVolume": {}, "phase": new_phase, "reason": reason,
                             "message": message}
                    info = disks.claim_info(pvc, claim_name or "")
                    if info:
                        fresh["persistentVolumeClaimInfo"] = info
                    if fresh != entry:
                        entries[name] = fresh
                    continue
                if phase == "AttachedToNode":
                    entries[name] = disks.entry_update(entry, phase="MountedToPod", reason="VolumeMountedToPod",
                                                       message=f"Volume {name} has been mounted in virt-launcher pod")
                    continue
                if phase == "MountedToPod":
                    bus = disks.bus_of(self.disk_by_name.get(name) or {})
                    if bus == "virtio" and ready_virtio >= disks.free_ports(self.spec):
                        continue  # no PCIe port left: virt-handler cannot attach it
                    target = disks.next_target(bus, taken)
                    taken.add(target)
                    ready_virtio += bus == "virtio"
                    entries[name] = disks.entry_update(
                        entry, phase="Ready", reason="VolumeReady", target=target,
                        message=f"Successfully attach hotplugged volume {name} to VM")
                    lines.append((target, disks.attached_lines(target, _bytes(_storage(
                        entry.get("persistentVolumeClaimInfo"))), ord(target[-1]) - ord("a"))))
                    continue
            self._grown(entries, name, pvc, claim_name, lines)
        for name, entry in self.entries.items():
            if name in self.volumes or entry.get("hotplugVolume") is None:
                continue
            phase = entry.get("phase")
            if phase in ("Ready", "MountedToPod", "AttachedToNode"):
                new = disks.entry_update(entry, phase="UnMountedFromPod", reason="VolumeUnMountedFromPod",
                                         message=f"Volume {name} has been unmounted from virt-launcher pod")
                new.pop("target", None)
                entries[name] = new
                target = entry.get("target") or ""
                if target.startswith("sd"):
                    lun = ord(target[-1]) - ord("a")
                    lines.append((target, [f"sd 0:0:0:{lun}: [{target}] Synchronizing SCSI cache"]))
            elif phase == "UnMountedFromPod":
                entries[name] = disks.entry_update(entry, phase="Detaching", reason="SuccessfulDelete", message="")
            else:
                del entries[name]
        if entries == self.entries:
            return None
        # the attachment pod holds what is attached or being attached, until a volume goes Detaching
        attach = [n for n, e in entries.items() if e.get("hotplugVolume") is not None and e.get("phase") in MOUNTED]
        return entries, attach, lines

    def _grown(self, entries: dict[str, Any], name: str, pvc: dict[str, Any] | None, claim_name: str | None,
               lines: list[tuple[str, list[str]]]) -> None:
        """A claim whose capacity changed: KubeVirt's status follows, and the guest sees its disk grow."""
        entry = entries.get(name)
        if entry is None or pvc is None or "persistentVolumeClaimInfo" not in entry:
            return
        info = disks.claim_info(pvc, claim_name or "")
        old = _storage(entry["persistentVolumeClaimInfo"])
        if info == entry["persistentVolumeClaimInfo"]:
            return
        entries[name] = disks.entry_update(entry, persistentVolumeClaimInfo=info)
        new = _storage(info)
        if entry.get("target") and old and new and _bytes(new) > _bytes(old):
            lines.append((entry["target"], disks.resized_lines(entry["target"], _bytes(old), _bytes(new))))

    def _held_claim(self, name: str) -> str:
        if name in self.volumes:
            return disks.claim_name(self.volumes[name]) or name
        info = (self.entries.get(name) or {}).get("persistentVolumeClaimInfo") or {}
        return info.get("claimName") or name

    def apply(self, entries: dict[str, dict[str, Any]], attach: list[str]) -> list[dict[str, Any]]:
        """Replace the attachment pod when the claims it must hold changed, and fill in its name."""
        held = sorted(v.get("name") for v in ((self.pod or {}).get("spec") or {}).get("volumes") or ())
        pod = self.pod
        if sorted(attach) != held and self.launcher is not None:
            if self.pod is not None:
                self.store._remove(("pods", self.ns, self.pod["metadata"]["name"]))
            pod = None
            if attach:
                claims = [(n, self._held_claim(n)) for n in sorted(attach)]
                pod = self.store.put(disks.attachment_pod(self.vmi, self.launcher, claims))
        out = []
        for name, entry in sorted(entries.items()):
            if entry.get("hotplugVolume") is not None:
                entry = clone(entry)
                if entry.get("phase") in MOUNTED and pod is not None:
                    entry["hotplugVolume"] = {"attachPodName": pod["metadata"]["name"],
                                              "attachPodUID": pod["metadata"]["uid"]}
                    if entry.get("phase") == "AttachedToNode" and not entry.get("message"):
                        entry["message"] = (f"Created hotplug attachment pod {pod['metadata']['name']}, for volume "
                                            f"{name}")
                if entry.get("phase") == "Detaching" and not entry.get("message"):
                    gone = (self.pod or {}).get("metadata", {}).get("name", "")
                    entry["message"] = f"Deleted hotplug attachment pod {gone}, for volume {name}"
            out.append(entry)
        return out
