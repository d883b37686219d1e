"""The block device mappings of a boot, read and checked as Nova 34.0.0 reads and checks them.

A boot names its block devices in one of two syntaxes (never both): ``block_device_mapping_v2``
(source image/volume/snapshot/blank, destination local/volume, boot_index, ...) or the legacy
``block_device_mapping`` (volume_id/snapshot_id/virtual_name and a device name). Both end as the
same mappings (dicts with Nova's BlockDeviceDict fields), in Nova's steps:

1. ``from_api`` / ``legacy_checked``: the format checks of the request (a missing or extra device
   uuid, an image mapped to the local disk, a volume type where none can be, device names);
2. ``transform``: the root device's name kept for the image, the legacy mappings converted
   (the one named vda is the root), several servers refused with an existing volume, the flavor's
   ephemeral and swap disks added;
3. ``validate``: the boot sequence, the volume types, each image, volume and snapshot named (with
   the reads of ``Lookups``), sizes, disk buses, the ephemeral and swap sizes and the number of
   local disks (``[DEFAULT] max_local_block_devices``).

Every refusal is ``Refused`` with Nova's words (400 unless said otherwise). Nothing here calls a
service itself: the caller hands the volumes, snapshots and types read from Cinder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

GiB = 1024 ** 3
ROOT_DEVICE_NAME = "vda"  # Nova's default when nothing names the root device
DISK_BUSES = ("fdc", "ide", "sata", "scsi", "usb", "virtio", "xen", "lxc", "uml")

LEGACY_FIELDS = frozenset({"device_name", "delete_on_termination", "virtual_name", "snapshot_id", "volume_id",
                           "volume_size", "no_device", "connection_info"})
NEW_FIELDS = frozenset({"source_type", "destination_type", "guest_format", "device_type", "disk_bus", "boot_index",
                        "device_name", "delete_on_termination", "snapshot_id", "volume_id", "volume_size",
                        "image_id", "no_device", "connection_info", "tag", "volume_type", "encrypted",
                        "encryption_secret_uuid", "encryption_format", "encryption_options"})
_DB_ONLY = frozenset({"id", "instance_uuid", "attachment_id", "uuid", "created_at", "updated_at", "deleted_at",
                      "deleted"})
_TRUE = {"1", "t", "true", "on", "y", "yes"}
_EPHEMERAL = re.compile(r"^ephemeral(\d|[1-9]\d+)$")
_DEV = re.compile("^/dev/")


class Refused(Exception):
    """Nova refuses the block devices: ``message`` is its answer, ``code`` the status."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def invalid_format(details: str) -> Refused:
    return Refused(f"Block Device Mapping is Invalid: {details}")


BOOT_SEQUENCE = ("Block Device Mapping is Invalid: Boot sequence for the instance and image/block device mapping "
                 "combination is not valid.")


def strip_dev(name: str | None) -> str | None:
    return _DEV.sub("", name) if name else name


def _bool(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE


def _dict(values: Mapping[str, Any], do_not_default: Iterable[str] = ()) -> dict[str, Any]:
    """Nova's BlockDeviceDict: the fields checked and normalised, every other new field None."""
    values = dict(values)
    fields = set(values)
    invalid = fields - (NEW_FIELDS | _DB_ONLY)
    if invalid:
        raise invalid_format("Following fields are invalid: {}".format(" ".join(invalid)))
    if not values.get("no_device"):
        if "source_type" not in fields:
            raise invalid_format("Some required fields are missing")
        if "delete_on_termination" in values:
            values["delete_on_termination"] = _bool(values["delete_on_termination"])
        name = values.get("device_name")
        if name is not None:
            if not 1 <= len(str(name)) <= 255:
                raise invalid_format("Device name empty or too long.")
            if " " in str(name):
                raise invalid_format("Device name contains spaces.")
        if values.get("volume_size"):
            try:
                values["volume_size"] = int(values["volume_size"])
            except (TypeError, ValueError):
                raise invalid_format("Invalid volume_size.") from None
            if values["volume_size"] < 0:
                raise invalid_format("Invalid volume_size.")
        if values.get("boot_index"):
            try:
                values["boot_index"] = int(values["boot_index"])
            except (TypeError, ValueError):
                raise invalid_format("Boot index is invalid.") from None
    if values.get("device_name"):
        values["device_name"] = "/dev/" + str(strip_dev(values["device_name"]))
    values["delete_on_termination"] = bool(values.get("delete_on_termination"))
    out: dict[str, Any] = {field: None for field in NEW_FIELDS - set(do_not_default)}
    out.update(values)
    if out.get("boot_index") is not None:
        out["boot_index"] = int(out["boot_index"])
    return out


def from_api(mapping: Mapping[str, Any], image_uuid_specified: bool) -> dict[str, Any]:
    """One ``block_device_mapping_v2`` item as Nova's BlockDeviceDict.from_api reads it."""
    api = dict(mapping)
    if not api.get("no_device"):
        source, device_uuid = api.get("source_type"), api.get("uuid")
        destination, volume_type = api.get("destination_type"), api.get("volume_type")
        if source == "blank" and device_uuid:
            raise invalid_format("Invalid device UUID.")
        if source != "blank":
            if not device_uuid:
                raise invalid_format("Missing device UUID.")
            api[f"{source}_id"] = device_uuid
        if source == "image" and destination == "local":
            boot_index = api.get("boot_index", -1)
            boot_index = -1 if boot_index is None else int(boot_index)
            if not (image_uuid_specified and boot_index == 0):
                raise invalid_format("Mapping image to local is not supported.")
        if destination == "local" and volume_type:
            raise invalid_format("Specifying a volume_type with destination_type=local is not supported.")
        if source == "volume" and volume_type:
            raise invalid_format("Specifying volume type to existing volume is not supported.")
    api.pop("uuid", None)
    return _dict(api)


def parse(server: Mapping[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """(the mappings, legacy) of a boot body; the legacy ones are only normalised here (``transform``
    converts them once the image is known). Nova's refusal of both syntaxes together first."""
    legacy_items = server.get("block_device_mapping") or []
    v2_items = server.get("block_device_mapping_v2") or []
    if legacy_items and v2_items:
        raise Refused("Using different block_device_mapping syntaxes is not allowed in the same request.")
    if legacy_items:
        out = []
        for item in legacy_items:
            item = dict(item)
            if "delete_on_termination" in item:
                item["delete_on_termination"] = _bool(item["delete_on_termination"])
            out.append(item)
        return out, True
    image_ref = server.get("imageRef")
    return [from_api(item, image_uuid_specified=image_ref not in (None, "")) for item in v2_items], False


def _from_legacy(legacy: Mapping[str, Any]) -> dict[str, Any]:
    copied = {key: value for key, value in legacy.items() if key in (LEGACY_FIELDS & NEW_FIELDS) | _DB_ONLY}
    virtual_name = legacy.get("virtual_name")
    if virtual_name and (virtual_name == "swap" or _EPHEMERAL.match(virtual_name)):
        copied.update(source_type="blank", delete_on_termination=True, destination_type="local",
                      guest_format="swap" if virtual_name == "swap" else None)
    elif legacy.get("snapshot_id"):
        copied.update(source_type="snapshot", destination_type="volume")
    elif legacy.get("volume_id"):
        copied.update(source_type="volume", destination_type="volume")
    elif not legacy.get("no_device"):
        raise invalid_format("Unrecognized legacy format.")
    return _dict(copied, do_not_default={"boot_index", "disk_bus", "guest_format", "device_type"})


def image_mapping(image_id: str) -> dict[str, Any]:
    """The root disk of an image boot: the image on the local disk, boot index 0."""
    return _dict({"source_type": "image", "image_id": image_id, "delete_on_termination": True, "boot_index": 0,
                  "device_type": "disk", "destination_type": "local"})


def blank_mapping(size: int, guest_format: str | None = None) -> dict[str, Any]:
    return _dict({"source_type": "blank", "delete_on_termination": True, "device_type": "disk", "boot_index": -1,
                  "destination_type": "local", "guest_format": guest_format, "volume_size": size})


def from_legacy_mapping(items: Sequence[Mapping[str, Any]], image_uuid: str,
                        root_device_name: str = ROOT_DEVICE_NAME, no_root: bool = False) -> list[dict[str, Any]]:
    """Nova's conversion of legacy mappings: the volume or snapshot on the root device boots; an image
    boot without one gets the image's own root mapping first. ``no_root``: the image's own mappings
    have the root (none of these boots)."""
    converted = [_from_legacy(item) for item in items]
    if no_root:
        for bdm in converted:
            bdm["boot_index"] = -1
        return converted
    volume_backed = False
    for bdm in converted:
        if bdm["source_type"] in ("volume", "snapshot", "image") \
                and strip_dev(bdm.get("device_name")) == strip_dev(root_device_name):
            bdm["boot_index"] = 0
            volume_backed = True
        elif not bdm.get("no_device"):
            bdm["boot_index"] = -1
        else:
            bdm["boot_index"] = None
    if not volume_backed and image_uuid:
        return [image_mapping(image_uuid), *converted]
    return converted


def is_ephemeral(bdm: Mapping[str, Any]) -> bool:
    return bdm.get("source_type") == "blank" and bdm.get("destination_type") == "local" \
        and bdm.get("guest_format") != "swap"


def is_swap(bdm: Mapping[str, Any]) -> bool:
    return bdm.get("source_type") == "blank" and bdm.get("destination_type") == "local" \
        and bdm.get("guest_format") == "swap"


def root_of(bdms: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((bdm for bdm in bdms if bdm.get("boot_index", -1) == 0), None)


def volume_backed(bdms: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the root disk is a volume (no local root disk, no DISK_GB claim)."""
    root = root_of(bdms)
    return bool(root and root.get("destination_type") == "volume")


def needs_cinder(bdms: Iterable[Mapping[str, Any]], legacy: bool) -> bool:
    """Whether any mapping is a volume (existing or to be made): what only Cinder can give."""
    for bdm in bdms:
        if legacy:
            if bdm.get("volume_id") or bdm.get("snapshot_id"):
                return True
        elif bdm.get("destination_type") == "volume" or bdm.get("source_type") in ("volume", "snapshot"):
            return True
    return False


def boot_source(bdms: Sequence[Mapping[str, Any]], legacy: bool) -> Mapping[str, Any] | None:
    """The mapping the image metadata of an imageRef-less boot comes from (Nova's
    get_bdm_image_metadata): legacy, the one on device letter a; else boot index 0."""
    for bdm in bdms:
        if legacy:
            name = strip_dev(bdm.get("device_name") or "") or ""
            letter = re.sub(r"\d+", "", re.sub("^((x?v|s|h)d)", "", name))
            if letter != "a":
                continue
        elif bdm.get("boot_index") != 0:
            continue
        if bdm.get("image_id") or bdm.get("volume_id") or bdm.get("snapshot_id"):
            return bdm
    return None


def image_meta_of_volume(volume: Mapping[str, Any]) -> dict[str, Any]:
    """The image metadata of a volume-backed boot, as Nova's get_image_metadata_from_volume."""
    properties = dict(volume.get("volume_image_metadata") or {})
    meta: dict[str, Any] = {"properties": properties, "size": int(volume.get("size") or 0) * GiB}
    for attr in ("image_id", "image_name", "size", "checksum", "container_format", "disk_format", "min_ram",
                 "min_disk"):
        value = properties.pop(attr, None)
        if attr in ("min_ram", "min_disk"):
            meta[attr] = int(value or 0)
    meta["status"] = "active"
    return meta


def image_defined(image: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Nova's _get_image_defined_bdms: the image's ``block_device_mapping`` property (JSON in Glance),
    each a BlockDeviceDict when ``bdm_v2`` is true, else converted from the legacy form. (The image's
    ``mappings`` property, ephemeral and swap names of EC2 images, is not read.)"""
    properties = (image or {}).get("properties") or {}
    found = properties.get("block_device_mapping") or []
    if isinstance(found, str):
        try:
            found = json.loads(found)
        except ValueError:
            raise invalid_format("The image's block_device_mapping is not JSON.") from None
    if not isinstance(found, list):
        return []
    if _bool(properties.get("bdm_v2", False)):
        return [_dict(bdm) for bdm in found]
    return from_legacy_mapping(found, "")


def transform(bdms: list[dict[str, Any]], legacy: bool, image_ref: str, flavor: Mapping[str, Any],
              min_count: int, max_count: int, image_bdms: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """Nova's _check_and_transform_bdm; ``image_bdms``: the image's own mappings (``image_defined``),
    which the request's override by device name (and replace the image's root when they have one)."""
    if image_ref and not legacy:
        for bdm in bdms:
            if bdm.get("destination_type") == "volume" and strip_dev(bdm.get("device_name")) == ROOT_DEVICE_NAME:
                raise Refused(f"The volume cannot be assigned the same device name as the root device "
                              f"{ROOT_DEVICE_NAME}")
    root_in_image = any(bdm.get("boot_index") == 0 for bdm in image_bdms)
    if legacy:
        bdms = from_legacy_mapping(bdms, image_ref, no_root=root_in_image)
    elif not bdms and image_ref:
        bdms = [] if root_in_image else [image_mapping(image_ref)]
    elif root_in_image:
        bdms = [bdm for bdm in bdms if not (bdm.get("boot_index") == 0 and bdm.get("source_type") == "image")]
    if image_bdms:
        names = {bdm.get("device_name") for bdm in bdms if bdm.get("device_name")}
        bdms = bdms + [dict(bdm) for bdm in image_bdms if bdm.get("device_name") not in names]
    if (min_count > 1 or max_count > 1) and any(bdm.get("source_type") == "volume" for bdm in bdms):
        raise Refused("Cannot attach one or more volumes to multiple instances")
    if flavor.get("ephemeral_gb") and not any(is_ephemeral(bdm) for bdm in bdms):
        bdms.append(blank_mapping(int(flavor["ephemeral_gb"])))
    if flavor.get("swap") and not any(is_swap(bdm) for bdm in bdms):
        bdms.append(blank_mapping(int(flavor["swap"]), "swap"))
    return bdms


def validate(bdms: list[dict[str, Any]], *, flavor: Mapping[str, Any], image_ref: str,
             volumes: Mapping[str, Mapping[str, Any]], volume_types: Callable[[], list[dict]],
             image_exists: Callable[[str], bool], snapshot_size: Callable[[str], int | None],
             supports_multiattach: bool, max_local: int) -> None:
    """Nova's _validate_bdm, the volume reservation apart (the caller's, after these checks pass)."""
    indexes = sorted(bdm["boot_index"] for bdm in bdms if bdm.get("boot_index") is not None
                     and bdm["boot_index"] >= 0)
    if not indexes or any(i != v for i, v in enumerate(indexes)):
        raise Refused(BOOT_SEQUENCE)
    types: list[dict] | None = None
    for bdm in bdms:
        if bdm.get("volume_type"):
            if not types:
                types = volume_types()
            wanted = bdm["volume_type"]
            found = next((t for t in types if wanted in (t.get("id"), t.get("name"))), None)
            if found is None:
                raise Refused(f"Volume type {wanted} could not be found.")
            bdm["volume_type"] = found["name"]
        if bdm.get("image_id") is not None:
            if bdm["image_id"] != image_ref and not image_exists(bdm["image_id"]):
                raise Refused(f"Block Device Mapping is Invalid: failed to get image {bdm['image_id']}.")
            if bdm.get("source_type") == "image" and bdm.get("destination_type") == "volume" \
                    and not bdm.get("volume_size"):
                raise Refused("Images with destination_type 'volume' need to have a non-zero size specified")
        elif bdm.get("volume_id") is not None:
            volume = volumes[bdm["volume_id"]]
            if volume.get("multiattach") and not supports_multiattach:
                raise Refused("Multiattach volumes are only supported starting with compute API version 2.60.")
            bdm["volume_size"] = volume.get("size")
        elif bdm.get("snapshot_id") is not None:
            bdm["volume_size"] = bdm.get("volume_size") or snapshot_size(bdm["snapshot_id"])
        elif bdm.get("source_type") == "blank" and bdm.get("destination_type") == "volume" \
                and not bdm.get("volume_size"):
            raise Refused("Blank volumes (source: 'blank', dest: 'volume') need to have non-zero size")
        if bdm.get("disk_bus") and bdm["disk_bus"] not in DISK_BUSES:
            # Nova's InvalidBDMDiskBus misspells its message's name: its answer is the base class's
            raise Refused("Block Device Mapping is Invalid.")
    ephemeral = sum(bdm.get("volume_size") or int(flavor.get("ephemeral_gb") or 0)
                    for bdm in bdms if is_ephemeral(bdm))
    if ephemeral > int(flavor.get("ephemeral_gb") or 0):
        raise Refused("Ephemeral disks requested are larger than the instance type allows. If no size is given "
                      "in one block device mapping, flavor ephemeral size will be used.")
    swaps = [bdm for bdm in bdms if is_swap(bdm)]
    if len(swaps) > 1:
        raise invalid_format("More than one swap drive requested.")
    if swaps and (swaps[0].get("volume_size") or 0) > int(flavor.get("swap") or 0):
        raise Refused("Swap drive requested is larger than instance type allows.")
    if max_local >= 0 and sum(1 for bdm in bdms if bdm.get("destination_type") == "local") > max_local:
        raise Refused("Block Device Mapping is Invalid: You specified more local devices than the limit allows")


def check_zones(instance_zone: str | None, volumes: Iterable[Mapping[str, Any]], *, cross_az_attach: bool,
                default_zone: str) -> str | None:
    """Nova's _validate_vol_az_for_create: with cross_az_attach false, the volumes in one zone, the
    server's; a server without a zone goes to its volumes' (returned) unless that is the default."""
    volumes = list(volumes)
    if cross_az_attach or not volumes:
        return None
    zones = [str(v.get("availability_zone")) for v in volumes]
    if len(set(zones)) > 1:
        raise Refused("The availability zone between the server and its attached volumes do not match: Volumes "
                      "are in different availability zones: {}.".format(",".join(zones)))
    volume_zone = zones[0]
    if instance_zone is None:
        return volume_zone if volume_zone != default_zone else None
    if instance_zone != volume_zone:
        raise Refused("The availability zone between the server and its attached volumes do not match: Server "
                      f"and volumes are not in the same availability zone. Server is in: {instance_zone}. "
                      f"Volumes are in: {volume_zone}.")
    return None


def volume_size(flavor: Mapping[str, Any], bdm: Mapping[str, Any]) -> int | None:
    """The size kept for a mapping: a local blank disk without one takes the flavor's swap or ephemeral."""
    size = bdm.get("volume_size")
    if size is None and bdm.get("source_type") == "blank" and bdm.get("destination_type") == "local":
        size = flavor.get("swap", 0) if bdm.get("guest_format") == "swap" else flavor.get("ephemeral_gb", 0)
    return size
