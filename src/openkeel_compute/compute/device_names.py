"""The guest device names of a server's block devices, given when it is built as Nova's compute gives them
(``_default_block_device_names`` with the libvirt driver's ``default_device_names_for_instance``,
nova/virt/libvirt/blockinfo.py), so that each mapping records its ``device_name`` (os-volume_attachments'
``device``) and each Cinder attachment is given it as the connector's ``mountpoint`` (the volume's
``attachments[].device``).

- the root (boot index 0) keeps the name it was given, else the server's ``root_device_name``, else the
  first name of its bus (``/dev/vda`` on virtio);
- every other mapping's name is chosen afresh, whatever the request said ("Libvirt can't honour
  user-supplied dev names"): the ephemeral disks, then the swap disk, then the volumes (those of source
  ``volume``, then ``snapshot``, ``image`` and ``blank``, each group in the order written), each the next
  name of its bus not taken yet;
- the bus: the mapping's ``disk_bus`` when KVM has it, else the image's ``hw_disk_bus`` (``hw_cdrom_bus``,
  ... for other device types), else KVM's default (virtio for disks, fdc for floppies; sata for a cdrom).

An image booted as a cdrom (``disk_format`` iso) is not told apart: its root is named as a disk.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

KVM_BUSES = frozenset({"virtio", "scsi", "ide", "usb", "fdc", "sata"})
PREFIX = {"virtio": "vd", "scsi": "sd", "usb": "sd", "sata": "sd", "ide": "hd", "fdc": "fd"}
DEVICE_TYPES = ("disk", "cdrom", "floppy", "lun")
DEFAULT_BUS = {"disk": "virtio", "cdrom": "sata", "floppy": "fdc"}
VOLUME_ORDER = ("volume", "snapshot", "image", "blank")
IDE_DEVICES = 4
#: the names an attach may give on another bus (two letters: vda..vdzz), OpenKeel's bound where Nova's
#: ``[compute] max_disk_devices_to_attach`` (-1) sets none
ATTACH_DEVICES = 26 + 26 * 26


class TooManyDisks(ValueError):
    """No name is left on the bus (IDE has four)."""


def strip_dev(name: str | None) -> str:
    return (name or "").removeprefix("/dev/")


def _letters(index: int) -> str:
    """Nova's generate_device_name suffix: a..z, aa..zz, ..."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = string.ascii_lowercase[rest] + letters
    return letters


def _bus(bdm: Mapping[str, Any], default: str | None, image: Mapping[str, str]) -> str:
    kind = str(bdm.get("device_type")) if bdm.get("device_type") in DEVICE_TYPES else "disk"
    bus = bdm.get("disk_bus") or default
    if bus in KVM_BUSES:
        return str(bus)
    wanted = image.get("image_hw_disk_bus" if kind == "disk" else f"image_hw_{kind}_bus")
    if wanted in KVM_BUSES:
        return str(wanted)
    return DEFAULT_BUS.get(kind, "virtio")


def _free(taken: set[str], bus: str, most: int | None = None) -> str:
    prefix = PREFIX[bus]
    most = IDE_DEVICES if bus == "ide" else most
    index = 0
    while True:
        if most is not None and index >= most:
            raise TooManyDisks(f"The maximum allowed number of disk devices ({most}) to attach to a single "
                               f"instance has been exceeded.")
        name = prefix + _letters(index)
        if name not in taken:
            return name
        index += 1


def _is_local_blank(bdm: Mapping[str, Any]) -> bool:
    return bdm.get("source_type") == "blank" and bdm.get("destination_type") == "local"


def default_names(bdms: Sequence[Mapping[str, Any]], system_metadata: Mapping[str, str],
                  root_device_name: str | None = None) -> dict[str, str]:
    """Mapping uuid -> the device name Nova's compute gives it (``/dev/...``), for every mapping that gets
    one (``no_device`` mappings and a server without a root mapping get none)."""
    live = [b for b in bdms if not b.get("no_device")]
    root = next((b for b in live if b.get("boot_index") == 0), None)
    if root is None:
        return {}
    image_bus = _bus({}, None, system_metadata)
    named = strip_dev(root.get("device_name")) or strip_dev(root_device_name) \
        or _free(set(), _bus(root, image_bus, system_metadata))
    names = {str(root["uuid"]): named}
    taken = {named}

    def name(bdm: Mapping[str, Any], default: str | None) -> None:
        chosen = _free(taken, _bus(bdm, default, system_metadata))
        taken.add(chosen)
        names[str(bdm["uuid"])] = chosen

    rest = [b for b in live if b is not root]
    for bdm in rest:
        if _is_local_blank(bdm) and bdm.get("guest_format") != "swap":
            name(bdm, image_bus)
    for bdm in rest:
        if _is_local_blank(bdm) and bdm.get("guest_format") == "swap":
            name(bdm, image_bus)
            break  # Nova's driver keeps one swap disk
    for source in VOLUME_ORDER:
        for bdm in rest:
            if bdm.get("destination_type") == "volume" and bdm.get("source_type") == source:
                name(bdm, None)
    return {uuid: "/dev/" + dev for uuid, dev in names.items()}


def next_name(used: Sequence[str | None], system_metadata: Mapping[str, str]) -> str:
    """The name Nova's libvirt driver gives a volume attached to a built server (``get_device_name_for_instance``:
    a requested name is not honoured): the next free name of the image's ``hw_disk_bus`` (virtio when it
    names none), ``used`` the server's names (its root's among them). Raises TooManyDisks."""
    taken = {strip_dev(name) for name in used if name}
    return "/dev/" + _free(taken, _bus({}, None, system_metadata), ATTACH_DEVICES)
