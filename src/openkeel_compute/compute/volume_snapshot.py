"""The image of a volume-backed server's snapshot (Nova's compute API ``snapshot_volume_backed``).

The image holds no data: it is the server's image record (compute/snapshot_image.py, without the
``instance_uuid``/``user_id``/``image_type`` properties Nova's API does not give it here), of size 0
(activated at once with ``disk_format raw``/``container_format bare``, as Nova's image API activates an
empty image), with ``root_device_name`` and, when the server has block devices, ``block_device_mapping``
(JSON, Nova's BlockDeviceDict of each: every local device as it is, then each volume as a mapping from
the Cinder snapshot just taken of it) and ``bdm_v2`` ``True``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

#: Nova's BlockDeviceDict fields (bdm_new_fields) less ``connection_info``: what an image's mapping keeps.
IMAGE_MAPPING_FIELDS = ("source_type", "destination_type", "guest_format", "device_type", "disk_bus", "boot_index",
                        "device_name", "delete_on_termination", "snapshot_id", "volume_id", "volume_size",
                        "image_id", "no_device", "tag", "volume_type", "encrypted", "encryption_secret_uuid",
                        "encryption_format", "encryption_options")
_FROM_TEMPLATE = ("disk_bus", "device_type", "boot_index", "delete_on_termination", "volume_size", "device_name")
QUIESCE_REQUIRED = "image_os_require_quiesce"
GUEST_AGENT = "image_hw_qemu_guest_agent"


def prepend_dev(name: str) -> str:
    return name if name.startswith("/dev/") else "/dev/" + name


def image_mapping(bdm: Mapping[str, Any]) -> dict[str, Any]:
    """One block device as an image's ``block_device_mapping`` item (Nova's get_image_mapping)."""
    mapping: dict[str, Any] = {name: bdm.get(name) for name in IMAGE_MAPPING_FIELDS}
    if mapping["device_name"]:
        mapping["device_name"] = prepend_dev(mapping["device_name"])
    mapping["delete_on_termination"] = bool(mapping["delete_on_termination"])
    return mapping


def snapshot_mapping(snapshot_id: str, bdm: Mapping[str, Any]) -> dict[str, Any]:
    """A volume's snapshot as a mapping (Nova's snapshot_from_bdm): a volume made from it at boot."""
    return image_mapping({"source_type": "snapshot", "destination_type": "volume", "snapshot_id": snapshot_id,
                          **{key: bdm.get(key) for key in _FROM_TEMPLATE}})


def split(bdms: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """(the mappings of the devices kept as they are, the volumes to snapshot); ``no_device`` ones left out."""
    kept, volumes = [], []
    for bdm in bdms:
        if bdm.get("no_device"):
            continue
        if bdm.get("destination_type") == "volume":
            volumes.append(bdm)
        else:
            kept.append(image_mapping(bdm))
    return kept, volumes


def over_snapshot_quota(limits: Mapping[str, Any], wanted: int) -> bool:
    """Nova's best-effort check of Cinder's absolute limits before any snapshot is taken."""
    used, most = int(limits.get("totalSnapshotsUsed") or 0), int(limits.get("maxTotalSnapshots", -1))
    return most > -1 and wanted + used > most


def quiesce_refusal(system_metadata: Mapping[str, str], server_uuid: str) -> str | None:
    """Why an ACTIVE server's snapshot is refused for want of a quiesce (None: taken unquiesced).

    The API cannot reach the guest, so it never quiesces (Nova's compute API skips a quiesce the compute
    cannot do); only an image asking ``os_require_quiesce`` makes that an error, worded as Nova's
    libvirt driver words it: no guest agent, or a quiesce the host cannot do."""
    if str(system_metadata.get(QUIESCE_REQUIRED, "")).lower() not in ("1", "t", "true", "on", "y", "yes"):
        return None
    if str(system_metadata.get(GUEST_AGENT, "")).lower() not in ("1", "t", "true", "on", "y", "yes"):
        return "QEMU guest agent is not enabled"
    return f"Quiescing is not supported in instance {server_uuid}"


def finish_image(body: dict[str, Any], root_device_name: str | None, mapping: list[dict[str, Any]]) -> dict[str, Any]:
    """The image record of the snapshot: no data, the mapping and root device name as properties."""
    image = {k: v for k, v in body.items() if k not in ("disk_format", "container_format", "block_device_mapping",
                                                         "bdm_v2", "root_device_name")}
    if root_device_name:
        image["root_device_name"] = root_device_name
    if mapping:
        image["block_device_mapping"] = json.dumps(mapping)
        image["bdm_v2"] = "True"
    image["disk_format"], image["container_format"] = "raw", "bare"  # Nova's image API activates it empty
    return image
