"""A VMI's disks as KubeVirt reports them (``status.volumeStatus``) and the steps of volume hot(un)plug.

- At boot each volume gets its entry (sorted by name, as KubeVirt sorts them): ``target`` (the guest's device:
  ``vda``, ``vdb``, … for virtio, ``sda``, … for sata and scsi, in disk order), and for a claim or DataVolume
  ``persistentVolumeClaimInfo`` (claim, access modes, capacity, requests, volume mode, filesystem overhead);
  the cloud-init disk its ``size``.
- A hotpluggable volume (``persistentVolumeClaim`` / ``dataVolume`` with ``hotpluggable: true``) goes
  Pending (its claim is not there or not bound: ``PVC … not found`` / ``PVC is in phase ClaimPending``) or
  Bound (``PVC is in phase Bound``) → AttachedToNode (virt-controller made a ``hp-volume-…`` attachment pod
  holding every hotplugged claim of the VMI: ``hotplugVolume.attachPodName``/``attachPodUID``) →
  MountedToPod → Ready (in the domain: ``target`` set, the guest's kernel prints the new disk on its
  console). Removing it: UnMountedFromPod → Detaching (the attachment pod replaced without it) → gone.
- A virtio hotplug needs a free PCIe port: KubeVirt leaves max(8 − devices, 3) of them (16/6 above 2 GiB of
  memory); a virtio disk beyond them stays MountedToPod.
- A claim that grows is seen by the guest (its kernel's capacity change lines) and in ``capacity``.
"""

from __future__ import annotations

import copy
import random
import string
from typing import Any

from openkeel_compute.emulator.console import human_size
from openkeel_compute.emulator.store import clone, now
from openkeel_compute.kubevirt.quantity import to_bytes

FILESYSTEM_OVERHEAD = "0.06"  # CDI's default for Filesystem claims
ATTACHMENT_LABEL = "hotplug-disk"


def claim_name(volume: dict[str, Any]) -> str | None:
    return (volume.get("persistentVolumeClaim") or {}).get("claimName") or (volume.get("dataVolume") or {}).get("name")


def hotpluggable(volume: dict[str, Any]) -> bool:
    source = volume.get("persistentVolumeClaim") or volume.get("dataVolume") or {}
    return bool(source.get("hotpluggable"))


def bus_of(disk: dict[str, Any]) -> str:
    for device, default in (("disk", "virtio"), ("lun", "scsi"), ("cdrom", "sata")):
        if device in disk:
            return (disk.get(device) or {}).get("bus") or default
    return "virtio"


def _prefix(bus: str) -> str:
    return "vd" if bus == "virtio" else "sd"


def next_target(bus: str, taken: set[str]) -> str:
    prefix = _prefix(bus)
    for letter in string.ascii_lowercase:
        if prefix + letter not in taken:
            return prefix + letter
    return prefix + "aa"


def claim_info(pvc: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    if pvc is None:
        return None
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    mode = spec.get("volumeMode") or "Filesystem"
    info: dict[str, Any] = {"claimName": name, "accessModes": list(spec.get("accessModes") or ()),
                            "volumeMode": mode, "capacity": dict(status.get("capacity") or {}),
                            "requests": dict((spec.get("resources") or {}).get("requests") or {}),
                            "filesystemOverhead": FILESYSTEM_OVERHEAD if mode == "Filesystem" else "0"}
    return info


def boot_status(spec: dict[str, Any], claim: Any) -> list[dict[str, Any]]:
    """Every non-hotplug volume's entry as the guest comes up (``claim(name)``: the claim or None)."""
    disks = ((spec.get("domain") or {}).get("devices") or {}).get("disks") or []
    volumes = {v.get("name"): v for v in spec.get("volumes") or ()}
    taken: set[str] = set()
    out = []
    for disk in disks:
        volume = volumes.get(disk.get("name"))
        if volume is None or hotpluggable(volume):
            continue
        entry: dict[str, Any] = {"name": disk["name"], "target": next_target(bus_of(disk), taken)}
        taken.add(entry["target"])
        name = claim_name(volume)
        if name:
            info = claim_info(claim(name), name)
            if info:
                entry["persistentVolumeClaimInfo"] = info
        elif volume.get("cloudInitNoCloud") is not None or volume.get("cloudInitConfigDrive") is not None:
            entry["size"] = 1048576
        out.append(entry)
    return sorted(out, key=lambda e: e["name"])


def free_ports(spec: dict[str, Any]) -> int:
    """The PCIe ports left for virtio hotplug (KubeVirt's v2 count, devices approximated by NICs and virtio
    disks plus the controllers every VM has)."""
    domain = spec.get("domain") or {}
    devices = domain.get("devices") or {}
    memory = (domain.get("memory") or {}).get("guest") or ((domain.get("resources") or {}).get("requests") or {}).get(
        "memory") or "0"
    large = int(to_bytes(memory)) > 2 * 1024**3
    total, minimum = (16, 6) if large else (8, 3)
    in_use = len(devices.get("interfaces") or ()) + sum(
        1 for d in devices.get("disks") or () if bus_of(d) == "virtio") + 3  # serial, balloon, rng
    return max(total - in_use, minimum)


def _phase_from_claim(pvc: dict[str, Any] | None, name: str) -> tuple[str, str, str]:
    if pvc is None:
        return "Pending", "FailedPvcNotFound", f"PVC {name} not found"
    phase = (pvc.get("status") or {}).get("phase")
    if phase == "Bound":
        return "Bound", "PVCNotReady", "PVC is in phase Bound"
    if phase in (None, "Pending"):
        return "Pending", "PVCNotReady", "PVC is in phase ClaimPending"
    return "Pending", "PVCNotReady", "PVC is in phase Lost"


def _blocks(n_bytes: int) -> str:
    sectors = n_bytes // 512
    return (f"{sectors} 512-byte logical blocks ({human_size(n_bytes, 1000, ('B', 'kB', 'MB', 'GB', 'TB'))}/"
            f"{human_size(n_bytes, 1024, ('B', 'KiB', 'MiB', 'GiB', 'TiB'))})")


def attached_lines(target: str, n_bytes: int | None, lun: int) -> list[str]:
    """What the guest's kernel prints when a disk appears."""
    size = _blocks(n_bytes or 0)
    if target.startswith("vd"):
        return [f"virtio_blk virtio{lun + 5}: [{target}] {size}"]
    return [f"scsi 0:0:0:{lun}: Direct-Access     QEMU     QEMU HARDDISK    2.5+ PQ: 0 ANSI: 5",
            f"sd 0:0:0:{lun}: Attached scsi generic sg{lun} type 0",
            f"sd 0:0:0:{lun}: [{target}] {size.replace(' (', ': (')}",
            f"sd 0:0:0:{lun}: [{target}] Write Protect is off",
            f"sd 0:0:0:{lun}: [{target}] Attached SCSI disk"]


def resized_lines(target: str, old: int, new: int) -> list[str]:
    """What the guest's kernel prints when a disk grows under it."""
    if target.startswith("vd"):
        return [f"virtio_blk virtio2: [{target}] new size: {_blocks(new)}",
                f"{target}: detected capacity change from {old // 512} to {new // 512}"]
    return [f"sd 0:0:0:1: [{target}] {_blocks(new).replace(' (', ': (')}",
            f"{target}: detected capacity change from {old // 512} to {new // 512}"]


def attachment_pod(vmi: dict[str, Any], launcher: dict[str, Any], claims: list[tuple[str, str]]) -> dict[str, Any]:
    """virt-controller's hotplug attachment pod: on the launcher's node, owned by the launcher pod, mounting
    every hotplugged claim (volume name, claim name) of the VMI."""
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
    meta = launcher["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"hp-volume-{suffix}", "namespace": meta.get("namespace"),
                         "labels": {"kubevirt.io": ATTACHMENT_LABEL},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"nodeName": (launcher.get("spec") or {}).get("nodeName"), "restartPolicy": "Never",
                     "containers": [{"name": "hotplug-disk", "image": "quay.io/kubevirt/virt-launcher:v1.9.0",
                                     "command": ["/bin/sh", "-c", "/usr/bin/container-disk --copy-path /path/hp"]}],
                     "volumes": [{"name": name, "persistentVolumeClaim": {"claimName": claim}}
                                 for name, claim in claims]},
            "status": {"phase": "Running", "startTime": now(),
                       "containerStatuses": [{"name": "hotplug-disk", "ready": True, "restartCount": 0,
                                              "started": True, "state": {"running": {"startedAt": now()}}}]}}


def sync_vmi_volumes(vm_spec: dict[str, Any], vmi: dict[str, Any]) -> dict[str, Any] | None:
    """KubeVirt's declarative hotplug (pkg/storage/hotplug): the running VMI's spec with the VM template's
    hotpluggable volumes and their disks added, and those gone or changed in the VM removed (None: same)."""
    spec = vmi.get("spec") or {}
    if not any(hotpluggable(v) for v in vm_spec.get("volumes") or ()) and not any(
            hotpluggable(v) for v in spec.get("volumes") or ()):
        return None  # no hotpluggable volume on either side (the common case: costs no copy)
    vm_volumes = {v.get("name"): v for v in vm_spec.get("volumes") or ()}
    vm_disks = {d.get("name"): d for d in ((vm_spec.get("domain") or {}).get("devices") or {}).get("disks") or ()}
    reported = {s.get("name") for s in (vmi.get("status") or {}).get("volumeStatus") or ()}
    volumes = []
    for volume in spec.get("volumes") or ():
        if hotpluggable(volume):
            wanted = vm_volumes.get(volume.get("name"))
            if wanted is None or (hotpluggable(wanted) and wanted != volume):
                continue
        volumes.append(copy.deepcopy(volume))
    names = {v.get("name") for v in volumes}
    for volume in vm_spec.get("volumes") or ():
        if hotpluggable(volume) and volume.get("name") not in names and volume.get("name") not in reported:
            volumes.append(copy.deepcopy(volume))
    names = {v.get("name") for v in volumes}
    disks = [copy.deepcopy(d) for d in ((spec.get("domain") or {}).get("devices") or {}).get("disks") or ()
             if d.get("name") in names or (d.get("name") in vm_disks and d.get("name") not in vm_volumes)]
    have = {d.get("name") for d in disks}
    for name, disk in vm_disks.items():
        if name in names and name not in have and hotpluggable(next(v for v in volumes if v.get("name") == name)):
            disks.append(copy.deepcopy(disk))
    old_disks = ((spec.get("domain") or {}).get("devices") or {}).get("disks") or []
    if volumes == list(spec.get("volumes") or ()) and disks == list(old_disks):
        return None
    new_spec = dict(spec)
    new_spec["domain"] = dict(spec.get("domain") or {})
    new_spec["domain"]["devices"] = dict(new_spec["domain"].get("devices") or {})
    new_spec["domain"]["devices"]["disks"] = disks
    new_spec["volumes"] = volumes
    return new_spec


def hotplug_refusal(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> str | None:
    """KubeVirt's VMI update admission of hotplugged disks (the first refusal, None: admitted)."""
    old_volumes = {v.get("name") for v in old_spec.get("volumes") or ()}
    disks = {d.get("name"): d for d in ((new_spec.get("domain") or {}).get("devices") or {}).get("disks") or ()}
    for volume in new_spec.get("volumes") or ():
        if volume.get("name") in old_volumes or not hotpluggable(volume):
            continue
        disk = disks.get(volume.get("name"))
        name = volume.get("name")
        if disk is None:
            return f"disk {name} does not exist"
        if "disk" in disk and bus_of(disk) not in ("scsi", "virtio"):
            return (f"Hotplug configuration for disk [{name}] requires bus to be 'scsi' or 'virtio'. "
                    f"[{bus_of(disk)}] is not permitted.")
        if "lun" in disk and bus_of(disk) != "scsi":
            return f"Hotplug configuration for LUN [{name}] requires bus to be 'scsi'. [{bus_of(disk)}] is not permitted."
        if "disk" not in disk and "lun" not in disk:
            return f"Hotplug configuration for [{name}] requires diskDevice of type 'disk' or 'lun' to be used."
    return None


def entry_update(entry: dict[str, Any], **fields: Any) -> dict[str, Any]:
    new = clone(entry)
    new.update(fields)
    return new


def claims_of(vmi: dict[str, Any]) -> list[str]:
    """The claims a VMI's volumes name."""
    return [name for v in (vmi.get("spec") or {}).get("volumes") or () if (name := claim_name(v))]


def valid_live_volumes(last: dict[str, Any], current: dict[str, Any], strategy: str | None) -> bool:
    """KubeVirt's validLiveUpdateVolumes: only hotpluggable volumes were added, changed or removed (or claims
    swapped under ``updateVolumesStrategy: Migration``)."""
    old = {v.get("name"): v for v in last.get("volumes") or ()}
    for volume in current.get("volumes") or ():
        before = old.pop(volume.get("name"), None)
        if hotpluggable(volume):
            continue
        if before is None:
            return False
        if claim_name(volume) and strategy == "Migration":
            continue
        if before != volume:
            return False
    return all(hotpluggable(v) for v in old.values())


def valid_live_disks(last: dict[str, Any], current: dict[str, Any]) -> bool:
    """KubeVirt's validLiveUpdateDisks: only disks of hotpluggable volumes changed (a CD-ROM may not go)."""
    old_disks = {d.get("name"): d for d in ((last.get("domain") or {}).get("devices") or {}).get("disks") or ()}
    old_volumes = {v.get("name"): v for v in last.get("volumes") or ()}
    volumes = {v.get("name"): v for v in current.get("volumes") or ()}
    new_disks = {d.get("name"): d for d in ((current.get("domain") or {}).get("devices") or {}).get("disks") or ()}
    for name, disk in new_disks.items():
        if name in volumes and hotpluggable(volumes[name]):
            old_disks.pop(name, None)
            continue
        if name not in old_disks or old_disks[name] != disk:
            return False
        old_disks.pop(name)
    for name, disk in old_disks.items():
        if name in old_volumes and not hotpluggable(old_volumes[name]):
            return False
        if "cdrom" in disk and name not in new_disks:
            return False
    return True
