"""Volumes a boot makes (``block_device_mapping_v2`` with source ``image``, ``snapshot`` or ``blank`` and
destination ``volume``), made as Nova's compute makes them before it attaches them
(nova/virt/block_device.py, ``DriverVol{Image,Snapshot,Blank}BlockDevice.attach``):

- created in Cinder with the ``[cinder]`` credential, one after the other in the mappings' order: from
  the image (``imageRef``), from the snapshot (with the snapshot's volume's type when the mapping names
  none), or blank (named ``<server uuid>-blank-vol``); ``volume_size`` and the 2.67 ``volume_type`` as
  asked, the server's zone when ``[cinder] cross_az_attach`` is false. The volume's id is recorded in
  the mapping at once (a restarted controller carries on, a delete gives back what it names);
- waited for as Nova's ``_await_block_device_map_created``: read until it is no longer ``creating`` or
  ``downloading``, at most ``[DEFAULT] block_device_allocate_retries`` + 1 reads
  ``block_device_allocate_retries_interval`` seconds apart. The controller does not sleep: the build
  step answers ``Waiting`` and is run again after the interval (the reads and the start are kept in the
  working state);
- available, it is reserved for the server (a Cinder attachment without a connector), whose id is
  recorded: from there it is a volume like a user's (steps/volumes.py exports and attaches it).

A volume that ends in another state (``error``), or is still creating after the last read, fails the
build with Nova's "Volume <id> did not finish being created even after we waited <s> seconds or <n>
attempts. And its status is <status>."; a Cinder refusal with Cinder's error as Nova words it. The
build then gives back what Nova's ``_cleanup_volumes`` gives back (each attachment deleted, each volume
marked ``delete_on_termination`` deleted) and, unlike Nova, which leaves it in Cinder when it is not
marked so, also deletes the volume that failed: nothing the failed build made stays in Cinder. (Cinder
deletes no volume still ``creating``: such a volume is then marked ``delete_on_termination`` and the
server's delete deletes it.)
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from openkeel_compute.compute import block_device_rows, working_state
from openkeel_compute.controller.steps.base import Waiting
from openkeel_compute.db.api import transaction
from openkeel_compute.model import sysmeta

LOG = logging.getLogger(__name__)
MADE = ("image", "snapshot", "blank")


def _made(server: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in server.get("block_devices") or ()
            if b.get("destination_type") == "volume" and b.get("source_type") in MADE]


def make(ctx: Any, server: dict[str, Any]) -> Waiting | str | None:
    """The boot's own volumes made and reserved: None when all are; ``Waiting`` while Cinder makes one;
    else the reason the build fails (what the build made in Cinder is given back already)."""
    from openkeel_compute.volume import errors as volume_errors

    todo = [b for b in _made(server) if not b.get("attachment_id")]
    if not todo:
        return None
    waits = json.loads((server.get("working_state") or {}).get(sysmeta.VOLUME_WAITS) or "{}")
    calls = ctx.volumes.admin()
    for bdm in todo:
        if not bdm.get("volume_id"):
            try:
                volume = _create(ctx, calls, server, bdm)
            except volume_errors.VolumeError as exc:
                LOG.warning("server %s: its %s volume not made: %s", server["uuid"], bdm["source_type"], exc.message)
                return _abort(ctx, server, exc.message, waits)
            bdm["volume_id"] = volume["id"]
            if bdm.get("volume_size") is None:
                bdm["volume_size"] = volume.get("size")
            waits[volume["id"]] = {"started": time.time(), "attempts": 0}
            with transaction(ctx.engine) as conn:
                block_device_rows.save_volume(conn, bdm["uuid"], volume_id=volume["id"],
                                              volume_size=bdm["volume_size"])
                working_state.put(conn, server["uuid"], sysmeta.VOLUME_WAITS, json.dumps(waits))
        outcome = _await(ctx, calls, server, bdm, waits)
        if outcome is not None:
            return outcome
        try:
            attachment = calls.attachment_create(bdm["volume_id"], str(server["uuid"]))
        except volume_errors.VolumeError as exc:
            return _abort(ctx, server, exc.message, waits)
        bdm["attachment_id"] = attachment["id"]
        waits.pop(bdm["volume_id"], None)
        with transaction(ctx.engine) as conn:
            block_device_rows.save_volume(conn, bdm["uuid"], attachment_id=attachment["id"])
            working_state.put(conn, server["uuid"], sysmeta.VOLUME_WAITS, json.dumps(waits) if waits else None)
    return None


def _create(ctx: Any, calls: Any, server: dict[str, Any], bdm: dict[str, Any]) -> dict[str, Any]:
    zone = None if ctx.volumes.conf.cinder.cross_az_attach else server.get("availability_zone")
    volume_type = bdm.get("volume_type")
    size = bdm.get("volume_size")
    name, snapshot_id, image_id = "", None, None
    if bdm["source_type"] == "snapshot":
        snapshot = calls.get_snapshot(bdm["snapshot_id"])
        snapshot_id = snapshot["id"]
        if not volume_type and snapshot.get("volume_id"):  # the snapshot's volume's type (Nova's choice)
            volume_type = calls.get_volume(snapshot["volume_id"]).get("volume_type")
    elif bdm["source_type"] == "image":
        image_id = bdm.get("image_id")
    else:
        name = f"{server['uuid']}-blank-vol"
    return calls.create_volume(size, name, description="", snapshot_id=snapshot_id, image_id=image_id,
                               volume_type=volume_type, availability_zone=zone)


def _await(ctx: Any, calls: Any, server: dict[str, Any], bdm: dict[str, Any], waits: dict) -> Waiting | str | None:
    """One read of the volume (Nova's loop, one turn per run of the build step)."""
    from openkeel_compute.volume import errors as volume_errors

    volume_id = bdm["volume_id"]
    wait = waits.setdefault(volume_id, {"started": time.time(), "attempts": 0})
    retries = ctx.volumes.conf.block_device_allocate_retries
    attempts = retries + 1 if retries >= 1 else 1
    try:
        status = calls.get_volume(volume_id)["status"]
    except volume_errors.VolumeError as exc:
        return _abort(ctx, server, exc.message, waits)
    wait["attempts"] += 1
    if status == "available":
        return None
    if status in ("creating", "downloading") and wait["attempts"] < attempts:
        with transaction(ctx.engine) as conn:
            working_state.put(conn, server["uuid"], sysmeta.VOLUME_WAITS, json.dumps(waits))
        return Waiting(f"volume {volume_id} is {status}", after=ctx.volumes.conf.block_device_allocate_retries_interval)
    seconds = int(time.time() - wait["started"])
    LOG.warning("server %s: volume %s finished being created but its status is %s", server["uuid"], volume_id,
                status)
    try:
        calls.delete_volume(volume_id)
        bdm["volume_id"] = None
        with transaction(ctx.engine) as conn:
            block_device_rows.save_volume(conn, bdm["uuid"], volume_id=None)
    except volume_errors.VolumeNotFound:
        bdm["volume_id"] = None
    except volume_errors.VolumeError as exc:  # Cinder deletes no volume still creating: the server's delete will
        LOG.warning("server %s: volume %s that failed not deleted: %s", server["uuid"], volume_id, exc.message)
        bdm["delete_on_termination"] = True
        with transaction(ctx.engine) as conn:
            block_device_rows.save_volume(conn, bdm["uuid"], delete_on_termination=True)
    return _abort(ctx, server, f"Volume {volume_id} did not finish being created even after we waited {seconds} "
                               f"seconds or {wait['attempts']} attempts. And its status is {status}.", waits)


def _abort(ctx: Any, server: dict[str, Any], reason: str, waits: dict) -> str:
    """Nova's ``_cleanup_volumes`` of a build that failed: every attachment deleted, every volume marked
    ``delete_on_termination`` deleted (the mappings forget them); the reason returned."""
    from openkeel_compute.volume import errors as volume_errors

    calls = ctx.volumes.admin()
    for bdm in server.get("block_devices") or ():
        if bdm.get("destination_type") != "volume" or not bdm.get("volume_id"):
            continue
        forget: dict[str, Any] = {}
        try:
            if bdm.get("attachment_id"):
                calls.attachment_delete(bdm["attachment_id"])
                forget.update(attachment_id=None, connection_info=None)
            if bdm.get("delete_on_termination"):
                try:
                    calls.delete_volume(bdm["volume_id"])
                except volume_errors.VolumeNotFound:
                    pass
                forget["volume_id"] = None
        except volume_errors.VolumeError as exc:  # the server's delete tries again
            LOG.warning("server %s: volume %s not given back after its build failed: %s", server["uuid"],
                        bdm["volume_id"], exc.message)
        if forget:
            bdm.update(forget)
            with transaction(ctx.engine) as conn:
                block_device_rows.save_volume(conn, bdm["uuid"], **forget)
    with transaction(ctx.engine) as conn:
        working_state.put(conn, server["uuid"], sysmeta.VOLUME_WAITS, None)
    return reason
