"""A server's VirtualMachine in rescue and back: pure, data in and JSON patches out (no I/O).

Nova's libvirt driver rescues a guest in one of two ways, and so does this module:

- **legacy rescue** (no ``hw_rescue_device``/``hw_rescue_bus`` on the rescue image, or before 2.87): the
  rescue image is the first disk, the server's own root disk the second, and the cloud-init disk carries
  the rescue password; the server's other disks (ephemeral, swap, volumes) are not attached, as
  libvirt's rescue domain has only ``disk.rescue``, the root disk and the config drive;
- **stable device rescue** (2.87, an image with both properties): every disk of the server stays where it
  is, the rescue disk is added with the device and bus asked for and booted first.

The VM's disks, volumes and DataVolume templates before the rescue are kept in one annotation of the VM
(``RESCUED_FROM``): unrescue puts exactly them back. See docs/servers.md, "Rescue".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from openkeel_compute.kubevirt.mapping import CLOUD_INIT_DISK, ROOT_DISK
from openkeel_compute.kubevirt.names import server_vm_name

RESCUED_FROM = "openkeel.io/rescued-from"
RESCUE_DISK = "rescue"
_ANNOTATION_PATH = "/metadata/annotations/" + RESCUED_FROM.replace("~", "~0").replace("/", "~1")
_DISKS = "/spec/template/spec/domain/devices/disks"
_VOLUMES = "/spec/template/spec/volumes"
_TEMPLATES = "/spec/dataVolumeTemplates"
_CLOUD_INIT_SOURCES = ("cloudInitNoCloud", "cloudInitConfigDrive")

#: Nova's hw_rescue_bus values KubeVirt has a bus for; the others (ide, fdc, xen, uml, lxc) become sata,
#: the bus a PC's legacy devices sit on in KubeVirt
_DISK_BUSES = ("virtio", "sata", "scsi", "usb")
#: KubeVirt's cdrom accepts sata and scsi only
_CDROM_BUSES = ("sata", "scsi")


def rescue_volume(server_uuid: str) -> str:
    """Name of the DataVolume (and PVC) the rescue image is imported into."""
    return f"{server_vm_name(server_uuid)}-rescue"


def rescue_secret(server_uuid: str) -> str:
    """Name of the Secret with the rescue guest's cloud-init user data (its password)."""
    return f"{server_vm_name(server_uuid)}-rescue-user-data"


def is_rescued(vm: Mapping[str, Any] | None) -> bool:
    """Whether the VM is in its rescue form."""
    return RESCUED_FROM in (((vm or {}).get("metadata") or {}).get("annotations") or {})


def stable_device(properties: Mapping[str, Any]) -> tuple[str, str] | None:
    """(KubeVirt device, bus) of a stable device rescue from an image's properties, None when the image
    does not ask for one (Nova needs both properties)."""
    device, bus = properties.get("hw_rescue_device"), properties.get("hw_rescue_bus")
    if not device or not bus:
        return None
    kind = "cdrom" if str(device) == "cdrom" else "disk"  # a floppy: KubeVirt has none, a disk instead
    bus = str(bus) if str(bus) in _DISK_BUSES else "sata"
    if kind == "cdrom" and bus not in _CDROM_BUSES:
        bus = "sata"
    return kind, bus


def user_data(password: str) -> bytes:
    """cloud-init user data giving the rescue guest ``password`` (root's and the image's default user's),
    with password logins over SSH allowed, as Nova's rescue password is meant to be used."""
    quoted = json.dumps(password)  # a YAML double-quoted scalar
    return ("#cloud-config\n"
            f"password: {quoted}\n"
            "chpasswd:\n"
            "  expire: false\n"
            "  users:\n"
            f"    - {{name: root, password: {quoted}, type: text}}\n"
            "ssh_pwauth: true\n").encode()


def _tspec(vm: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}


def _replace(path: str, current: Any, wanted: Any) -> list[dict[str, Any]]:
    if current is None:
        return [{"op": "add", "path": path, "value": wanted}]
    return [{"op": "test", "path": path, "value": current}, {"op": "replace", "path": path, "value": wanted}]


def rescue_patch(vm: Mapping[str, Any], server_uuid: str, *, image_url: str, header_secret: str | None,
                 size_gib: int, labels: Mapping[str, str], storage_class: str | None = None,
                 stable: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """The JSON patch turning the server's stopped ``vm`` into its rescue form: the rescue image imported
    from ``image_url`` (Glance's file URL; ``header_secret``: the Secret with the token header) into a
    DataVolume of ``size_gib``, booted first, the cloud-init disk on the rescue Secret. Each changed field
    is ``test``ed as read first."""
    tspec = _tspec(vm)
    spec = vm.get("spec") or {}
    disks = list(((tspec.get("domain") or {}).get("devices") or {}).get("disks") or [])
    volumes = list(tspec.get("volumes") or [])
    templates = spec.get("dataVolumeTemplates")
    kept = {"disks": disks, "volumes": volumes, "dataVolumeTemplates": templates}

    def unbooted(disk: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in disk.items() if k != "bootOrder"}

    if stable is not None:
        kind, bus = stable
        new_disks = [unbooted(d) for d in disks] + [{"name": RESCUE_DISK, kind: {"bus": bus}, "bootOrder": 1}]
        new_volumes = list(volumes)
    else:
        keep = (ROOT_DISK, CLOUD_INIT_DISK)
        new_disks = [{"name": RESCUE_DISK, "disk": {}, "bootOrder": 1}]
        new_disks += [dict(unbooted(d), bootOrder=2) if d["name"] == ROOT_DISK else d
                      for d in disks if d.get("name") in keep]
        new_volumes = [v for v in volumes if v.get("name") in keep]
    new_volumes = [_on_secret(v, rescue_secret(server_uuid)) for v in new_volumes]
    new_volumes.append({"name": RESCUE_DISK, "dataVolume": {"name": rescue_volume(server_uuid)}})
    http: dict[str, Any] = {"url": image_url}
    if header_secret:
        http["secretExtraHeaders"] = [header_secret]
    storage: dict[str, Any] = {"resources": {"requests": {"storage": f"{max(1, int(size_gib))}Gi"}}}
    if storage_class:
        storage["storageClassName"] = storage_class
    template = {"metadata": {"name": rescue_volume(server_uuid), "labels": dict(labels)},
                "spec": {"source": {"http": http}, "storage": storage}}
    ops = _replace(_DISKS, disks, new_disks) + _replace(_VOLUMES, volumes, new_volumes)
    ops += _replace(_TEMPLATES, templates, [*(templates or []), template])
    annotations = (vm.get("metadata") or {}).get("annotations")
    value = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    if annotations is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {RESCUED_FROM: value}})
    else:
        ops.append({"op": "add", "path": _ANNOTATION_PATH, "value": value})
    return ops


def _on_secret(volume: Mapping[str, Any], secret: str) -> dict[str, Any]:
    """The cloud-init volume reading ``secret`` instead (other volumes unchanged)."""
    volume = dict(volume)
    for source in _CLOUD_INIT_SOURCES:
        if source in volume:
            volume[source] = {k: v for k, v in volume[source].items()
                              if k not in ("userData", "userDataBase64")} | {"secretRef": {"name": secret}}
    return volume


def unrescue_patch(vm: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch putting the rescued ``vm``'s disks, volumes and DataVolume templates back as they
    were before the rescue, and the annotation away. Empty when the VM is not rescued."""
    if not is_rescued(vm):
        return []
    kept = json.loads(vm["metadata"]["annotations"][RESCUED_FROM])
    tspec = _tspec(vm)
    disks = ((tspec.get("domain") or {}).get("devices") or {}).get("disks")
    templates = (vm.get("spec") or {}).get("dataVolumeTemplates")
    ops = [{"op": "test", "path": _ANNOTATION_PATH, "value": vm["metadata"]["annotations"][RESCUED_FROM]}]
    ops += _replace(_DISKS, disks, kept["disks"]) + _replace(_VOLUMES, tspec.get("volumes"), kept["volumes"])
    if kept["dataVolumeTemplates"] is None:
        if templates is not None:
            ops.append({"op": "remove", "path": _TEMPLATES})
    else:
        ops += _replace(_TEMPLATES, templates, kept["dataVolumeTemplates"])
    ops.append({"op": "remove", "path": _ANNOTATION_PATH})
    return ops
