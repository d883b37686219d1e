"""The block devices of a boot (block_device_mapping_v2 or the legacy block_device_mapping), checked
as Nova 34.0.0's API checks them, in its order, and kept for the controller (block_device_mapping).

- ``parse``: with the other request checks, the format of each mapping (compute/block_devices.py)
  and the ``create:attach_volume`` policy when there are any;
- ``boot_image``: the image metadata of a boot without imageRef, from the boot device (the volume's
  ``volume_image_metadata``, the snapshot's volume's, or the image's), with Nova's refusals (not
  bootable, cannot be read);
- ``prepare``: Nova's transformation (legacy mappings converted, the flavor's ephemeral and swap
  disks added) and its refusals (the root device's name taken, volumes for several servers);
- ``check``: in the transaction that writes the servers, after the quota: each existing volume read
  (not found, another zone with ``[cinder] cross_az_attach = false``), the mappings validated, then
  each volume reserved for its server as Nova's API reserves it (a Cinder attachment without a
  connector); ``release`` gives the reservations back when the boot fails after them.

Volumes need Cinder ([cinder] auth_type or endpoint_template): without it a mapping that names or
makes a volume is refused (NOT_AVAILABLE) and servers boot from images only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import volume_common
from openkeel_compute.api.handlers.server_common import fetch_image
from openkeel_compute.compute import block_devices
from openkeel_compute.policies import servers as rules
from openkeel_compute.volume import errors as volume_errors

LOG = logging.getLogger(__name__)


def _bad(exc: block_devices.Refused) -> faults.Fault:
    return faults.Fault(exc.message, exc.code)


def parse(req, server: Mapping[str, Any], target: dict) -> tuple[list[dict[str, Any]], bool]:
    """(the mappings, legacy) of the body, in Nova's order: the format, then the attach policy."""
    try:
        bdms, legacy = block_devices.parse(server)
    except block_devices.Refused as exc:
        raise _bad(exc) from None
    if bdms:
        common.can(req, rules.SERVERS % "create:attach_volume", target)
    return bdms, legacy


def image_ref(server: Mapping[str, Any], bdms: list) -> str:
    """imageRef; none is needed when block devices are given (Nova's _image_from_req_data)."""
    found = server.get("imageRef")
    if found:
        return found
    if bdms:
        return ""
    raise faults.BadRequest("Missing imageRef attribute")


def require_cinder(req, bdms: list, legacy: bool) -> None:
    if block_devices.needs_cinder(bdms, legacy) and not volume_common.enabled(req):
        raise faults.BadRequest(volume_common.NOT_AVAILABLE)


def _cinder_fault(exc: volume_errors.VolumeError) -> faults.Fault:
    return volume_common.answer(exc)


def boot_image(req, bdms: list[dict[str, Any]], legacy: bool) -> dict[str, Any]:
    """The image metadata of a boot without imageRef (Nova's get_bdm_image_metadata); {} when no
    boot device names an image, a volume or a snapshot."""
    source = block_devices.boot_source(bdms, legacy)
    if source is None:
        return {}
    volume_id = source.get("volume_id")
    try:
        if source.get("snapshot_id"):
            volume_id = volume_common.calls(req).get_snapshot(source["snapshot_id"])["volume_id"]
        if source.get("image_id"):
            try:
                return fetch_image(req, source["image_id"])
            except faults.Fault:
                raise faults.BadRequest(f"Block Device Mapping is Invalid: failed to get image "
                                        f"{source['image_id']}.") from None
        try:
            volume = volume_common.calls(req).get_volume(volume_id)
        except volume_errors.CinderUnavailable:
            raise
        except volume_errors.VolumeError:
            raise faults.BadRequest(f"Block Device Mapping is Invalid: failed to get volume {volume_id}.") from None
    except volume_errors.VolumeError as exc:
        raise _cinder_fault(exc) from None
    if not _bootable(volume):
        raise faults.BadRequest(f"Block Device {volume_id} is not bootable.")
    return block_devices.image_meta_of_volume(volume)


def _bootable(volume: Mapping[str, Any]) -> bool:
    value = volume.get("bootable", True)
    return value if isinstance(value, bool) else str(value).lower() in ("true", "1", "yes", "on", "t", "y")


def prepare(bdms: list[dict[str, Any]], legacy: bool, image_id: str, flavor: Mapping[str, Any], min_count: int,
            max_count: int, image: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    try:
        image_bdms = block_devices.image_defined(image) if image_id else []
        return block_devices.transform(bdms, legacy, image_id, flavor, min_count, max_count, image_bdms)
    except block_devices.Refused as exc:
        raise _bad(exc) from None


def volume_backed(bdms: list[dict[str, Any]]) -> bool:
    return block_devices.volume_backed(bdms)


def root_volume_gb(bdms: list[dict[str, Any]]) -> int | None:
    root = block_devices.root_of(bdms)
    return root.get("volume_size") if root else None


def existing_volumes(req, bdms: list[dict[str, Any]]) -> dict[str, dict]:
    """The volumes named, read as the caller (Nova's _get_volumes_for_bdms)."""
    volumes: dict[str, dict] = {}
    try:
        for bdm in bdms:
            if bdm.get("volume_id"):
                volumes[bdm["volume_id"]] = volume_common.calls(req).get_volume(bdm["volume_id"])
    except volume_errors.VolumeNotFound as exc:
        raise faults.BadRequest(exc.message) from None
    except volume_errors.VolumeError as exc:
        raise _cinder_fault(exc) from None
    return volumes


def check(req, bdms: list[dict[str, Any]], *, flavor: Mapping[str, Any], image_id: str, zone: str | None,
          volumes: Mapping[str, dict]) -> str | None:
    """The zone check, then Nova's _validate_bdm; the zone the server goes to when its volumes decide."""
    conf = common.services(req).conf
    try:
        zone_of_volumes = block_devices.check_zones(zone, volumes.values(),
                                                    cross_az_attach=conf.cinder.cross_az_attach,
                                                    default_zone=conf.default_availability_zone) \
            if volumes else None
        block_devices.validate(
            bdms, flavor=flavor, image_ref=image_id, volumes=volumes,
            volume_types=lambda: _volume_types(req), image_exists=lambda image: _image_exists(req, image),
            snapshot_size=lambda snapshot: _snapshot_size(req, snapshot),
            supports_multiattach=req.version >= (2, 60), max_local=conf.max_local_block_devices)
    except block_devices.Refused as exc:
        raise _bad(exc) from None
    return zone_of_volumes


def _volume_types(req) -> list[dict]:
    try:
        return volume_common.calls(req).volume_types()
    except volume_errors.VolumeError as exc:
        raise _cinder_fault(exc) from None


def _image_exists(req, image: str) -> bool:
    try:
        fetch_image(req, image)
    except faults.Fault:
        return False
    return True


def _snapshot_size(req, snapshot_id: str) -> int | None:
    try:
        return volume_common.calls(req).get_snapshot(snapshot_id).get("size")
    except volume_errors.CinderUnavailable as exc:
        raise _cinder_fault(exc) from None
    except volume_errors.VolumeError:
        raise faults.BadRequest(f"Block Device Mapping is Invalid: failed to get snapshot {snapshot_id}.") from None


def reserve(req, bdms: list[dict[str, Any]], instance_uuid: str, reserved: list[str]) -> list[dict[str, Any]]:
    """A copy of the mappings for one server, each existing volume reserved for it (an attachment
    without a connector, as Nova's check_attach_and_reserve_volume); the attachment ids are added to
    ``reserved`` as they are made, for ``release`` if the boot fails."""
    out = []
    for bdm in bdms:
        bdm = dict(bdm)
        if bdm.get("volume_id") and bdm.get("source_type") == "volume":
            try:
                attachment = volume_common.calls(req).attachment_create(bdm["volume_id"], instance_uuid)
            except volume_errors.InvalidInput as exc:
                raise faults.BadRequest(f"Invalid volume: {exc.message}") from None
            except volume_errors.CinderUnavailable as exc:
                raise _cinder_fault(exc) from None
            except volume_errors.VolumeError as exc:
                LOG.info("Failed validating volume %s. Error: %s", bdm["volume_id"], exc.message)
                raise faults.BadRequest(f"Block Device Mapping is Invalid: failed to get volume "
                                        f"{bdm['volume_id']}.") from None
            bdm["attachment_id"] = attachment["id"]
            reserved.append(attachment["id"])
        out.append(bdm)
    return out


def release(req, reserved: list[str]) -> None:
    """Delete the reservations of a boot that failed after them (as Nova's API cleans up)."""
    for attachment_id in reserved:
        try:
            volume_common.calls(req).attachment_delete(attachment_id)
        except volume_errors.VolumeError as exc:
            LOG.warning("Could not delete the attachment %s of a failed boot: %s", attachment_id, exc.message)
