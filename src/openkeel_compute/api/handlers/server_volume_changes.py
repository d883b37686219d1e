"""POST, PUT and DELETE /servers/{server_id}/os-volume_attachments[/{volume_id}]: attach, update (2.85
``delete_on_termination``; swap, which only Cinder asks for while it migrates a volume) and detach, as
Nova 34.0.0's API answers them, in its order and with its messages.

The API does what Nova's API and conductor do before they cast to the compute service: the state and
lock checks, the volume read from Cinder as the caller, the already-attached rule, the device name
(the next free name of the image's disk bus, ``/dev/vdX`` on virtio, as Nova's libvirt driver picks it: a
requested name is not honoured; compute/device_names.py), the
block device row, the zone rule (``[cinder] cross_az_attach``), the multiattach rules, then Cinder's
attachment (reserved, without a connector) or ``os-begin_detaching``; the instance action
(``attach_volume``, ``detach_volume``, ``swap_volume``) and an outbox row the controller carries out
(controller/steps/volume_attach.py). All of it in one transaction: a refusal writes nothing, and what
was asked of Cinder before a failed commit is given back (the attachment deleted, the detach rolled
back).
"""

from __future__ import annotations

import logging

from oslo_utils import strutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import volume_common, wsgi_path_params
from openkeel_compute.api.handlers.server_common import actor_of, read_server
from openkeel_compute.api.schemas import volume_attachments as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import block_device_rows, device_names, preconditions
from openkeel_compute.compute.instances import instance_actions, instance_sysmeta, updates
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states, sysmeta
from openkeel_compute.policies import server_subresources as rules
from openkeel_compute.volume import errors as volume_errors

LOG = logging.getLogger(__name__)
ROOT_DEVICE = "/dev/vda"
BUS_KEY = "image_hw_disk_bus"  # the image property, kept in system metadata
MULTIATTACH_OLD = "Multiattach volumes are only supported starting with compute API version 2.60."


def _require_cinder(req) -> None:
    if not volume_common.enabled(req):
        raise faults.BadRequest(volume_common.NOT_AVAILABLE)


def _shelved_check(req, row: dict, method: str) -> None:
    """Before 2.20 a shelved server's volumes cannot change (Nova's _check_request_version)."""
    if row["vm_state"] in (states.SHELVED, states.SHELVED_OFFLOADED) and req.version < (2, 20):
        raise faults.Conflict(f"Cannot '{method}' instance {row['uuid']} while it is in vm_state {row['vm_state']}")


def _get_volume(req, volume_id: str, *, missing=faults.NotFound) -> dict:
    try:
        return volume_common.calls(req).get_volume(volume_id)
    except volume_errors.VolumeNotFound as exc:
        raise missing(exc.message) from None
    except volume_errors.VolumeError as exc:
        raise volume_common.answer(exc) from None


def next_device(row: dict, used: list[str | None], bus: str | None) -> str:
    """The attached volume's name (compute/device_names.py) on the image's disk bus ``bus``; none left is
    Nova's 403."""
    try:
        return device_names.next_name([row.get("root_device_name") or ROOT_DEVICE, *used],
                                      {BUS_KEY: bus} if bus else {})
    except device_names.TooManyDisks as exc:
        raise faults.Forbidden(str(exc)) from None


def _already_attached(conn, row: dict, volume: dict) -> None:
    """Nova's _check_volume_already_attached."""
    bdms = block_device_rows.by_volume(conn, volume["id"])
    if not bdms:
        return
    if not volume.get("multiattach"):
        servers = " ".join(b["instance_uuid"] for b in bdms)
        raise faults.BadRequest(f"Invalid volume: volume {volume['id']} is already attached to instances: {servers}")
    if any(b["instance_uuid"] == row["uuid"] for b in bdms):
        raise faults.BadRequest(f"Invalid volume: volume {volume['id']} already attached")


def _zone_check(req, row: dict, volume: dict) -> None:
    """Nova's check_availability_zone with ``[cinder] cross_az_attach = false``."""
    conf = common.services(req).conf
    if conf.cinder.cross_az_attach:
        return
    zone = row.get("availability_zone") or conf.default_availability_zone
    if zone != volume.get("availability_zone"):
        raise faults.BadRequest(
            f"Invalid volume: Instance {row['uuid']} and volume {volume['id']} are not in the same "
            f"availability_zone. Instance is in {zone}. Volume is in {volume.get('availability_zone')}")


@operation(body={"2.0-2.48": schema.create, "2.49-2.78": schema.create_v249, "2.79-": schema.create_v279},
           expected=(400, 403, 404, 409))
@wsgi_path_params
def create(req, server_id):
    actor = actor_of(req)
    wanted = req.body["volumeAttachment"]
    volume_id, tag = wanted["volumeId"], wanted.get("tag")
    delete_on_termination = strutils.bool_from_string(wanted.get("delete_on_termination", False), strict=True)
    made: list[str] = []
    try:
        with common.write(req) as conn:
            row = read_server(conn, req, server_id)
            common.can(req, rules.VOLUME_ATTACHMENTS % "create", {"project_id": row["project_id"]})
            _shelved_check(req, row, "attach_volume")
            preconditions.check("attach_volume", row, is_admin=actor.is_admin)
            _require_cinder(req)
            volume = _get_volume(req, volume_id)
            _already_attached(conn, row, volume)
            if volume.get("multiattach") and req.version >= (2, 60):  # KubeVirt: one claim, one server
                raise faults.BadRequest(f"Volume {volume_id} has 'multiattach' set, which is not supported for "
                                        "this instance.")
            device = next_device(row, [b["device_name"] for b in block_device_rows.of(conn, row["uuid"])],
                                 instance_sysmeta.system_metadata_item(conn, row["uuid"], BUS_KEY))
            _zone_check(req, row, volume)
            if volume.get("multiattach"):
                raise faults.BadRequest(MULTIATTACH_OLD)
            try:
                attachment = volume_common.calls(req).attachment_create(volume_id, row["uuid"])
            except volume_errors.VolumeError as exc:
                raise volume_common.answer(exc) from None
            made.append(attachment["id"])
            (bdm,) = block_device_rows.record(conn, row["uuid"], [{
                "source_type": "volume", "destination_type": "volume", "volume_id": volume_id,
                "device_name": device, "tag": tag, "delete_on_termination": delete_on_termination,
                "volume_size": volume.get("size"), "attachment_id": attachment["id"], "boot_index": None}])
            for key in (sysmeta.HAS_VOLUMES, sysmeta.HAS_BLOCK_DEVICES):  # the controller reads its volumes
                instance_sysmeta.set_system_metadata_item(conn, row["uuid"], key, "True")
            instance_actions.start_action(conn, row["uuid"], "attach_volume", actor)
            updates.outbox(conn, row["uuid"], ops.ATTACH_VOLUME, actor, bdm_uuid=bdm["uuid"], volume_id=volume_id)
    except BaseException:
        _give_back(req, made)
        raise
    if req.version >= (2, 101):
        return Response(None, status=202, content_type="text/html; charset=UTF-8")  # webob.Response, as Nova
    out = {"id": volume_id, "serverId": server_id, "volumeId": volume_id, "device": device}
    if req.version >= (2, 70):
        out["tag"] = tag
    if req.version >= (2, 79):
        out["delete_on_termination"] = delete_on_termination
    return {"volumeAttachment": out}


def _give_back(req, attachments: list[str]) -> None:
    for attachment_id in attachments:
        try:
            volume_common.calls(req).attachment_delete(attachment_id)
        except volume_errors.VolumeError as exc:
            LOG.warning("The attachment %s of a refused attach could not be deleted: %s", attachment_id, exc.message)


@operation(success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def delete(req, server_id, volume_id):
    actor = actor_of(req)
    detaching: list[str] = []
    try:
        with common.write(req) as conn:
            row = read_server(conn, req, server_id)
            common.can(req, rules.VOLUME_ATTACHMENTS % "delete", {"project_id": row["project_id"]})
            _shelved_check(req, row, "detach_volume")
            _require_cinder(req)
            volume = _get_volume(req, volume_id)
            bdm = block_device_rows.of_volume(conn, row["uuid"], volume_id)
            if bdm is None or bdm["destination_type"] != "volume":
                raise faults.NotFound(f"Instance {server_id} is not attached to volume {volume_id}")
            if bdm.get("boot_index") == 0:
                raise faults.BadRequest("Cannot detach a root device volume")
            preconditions.check("detach_volume", row, is_admin=actor.is_admin)
            try:
                volume_common.calls(req).begin_detaching(volume["id"])
            except volume_errors.InvalidInput as exc:
                raise faults.BadRequest(f"Invalid volume: {exc.message}") from None
            except volume_errors.VolumeError as exc:
                raise volume_common.answer(exc) from None
            detaching.append(volume["id"])
            instance_actions.start_action(conn, row["uuid"], "detach_volume", actor)
            updates.outbox(conn, row["uuid"], ops.DETACH_VOLUME, actor, bdm_uuid=bdm["uuid"], volume_id=volume_id)
    except BaseException:
        _roll_back(req, detaching)
        raise
    return Response(None)


def _roll_back(req, volume_ids: list[str]) -> None:
    for volume_id in volume_ids:
        try:
            volume_common.calls(req).roll_detaching(volume_id)
        except volume_errors.VolumeError as exc:
            LOG.warning("The detach of volume %s was refused but not rolled back in Cinder: %s", volume_id,
                        exc.message)


@operation(body={"2.0-2.84": schema.update, "2.85-": schema.update_v285}, success=202, expected=(400, 404, 409))
@wsgi_path_params
def update(req, server_id, volume_id):
    actor = actor_of(req)
    wanted = req.body["volumeAttachment"]
    only_swap = req.version < (2, 85)
    swapping = only_swap or wanted["volumeId"] != volume_id
    made: list[str] = []
    detaching: list[str] = []
    try:
        with common.write(req) as conn:
            row = read_server(conn, req, server_id)
            if swapping:
                common.can(req, rules.VOLUME_ATTACHMENTS % "swap", {})
            else:
                common.can(req, rules.VOLUME_ATTACHMENTS % "update", {"project_id": row["project_id"]})
            if not only_swap:
                _update_regular(conn, row, volume_id, wanted)
            if swapping:
                _swap(req, conn, row, volume_id, wanted["volumeId"], actor, made, detaching)
    except BaseException:
        _give_back(req, made)
        _roll_back(req, detaching)
        raise
    return Response(None)


def _update_regular(conn, row: dict, volume_id: str, wanted: dict) -> None:
    """Nova's _update_volume_regular: only ``delete_on_termination`` may change."""
    bdm = block_device_rows.of_volume(conn, row["uuid"], volume_id)
    if bdm is None:
        raise faults.NotFound(f"No volume Block Device Mapping with id {volume_id}.")
    for name, current in (("id", volume_id), ("serverId", row["uuid"]), ("device", bdm["device_name"]),
                          ("tag", bdm["tag"])):
        if name in wanted and wanted[name] != current:
            raise faults.BadRequest(f"The {name} property is not mutable")
    if "delete_on_termination" in wanted:
        block_device_rows.set_fields(conn, bdm["uuid"], delete_on_termination=strutils.bool_from_string(
            wanted["delete_on_termination"], strict=True))


def _swap(req, conn, row: dict, old_id: str, new_id: str, actor, made: list[str], detaching: list[str]) -> None:
    """Nova's _update_volume_swap and swap_volume, up to the cast: Cinder asks it while it migrates a volume."""
    _require_cinder(req)
    old = _get_volume(req, old_id)
    if not old.get("migration_status"):
        raise faults.Conflict(f"volume {old_id} is not migrating; this API should only be called by Cinder")
    new = _get_volume(req, new_id, missing=faults.BadRequest)
    preconditions.check("swap_volume", row, is_admin=actor.is_admin)
    if not any(a.get("server_id") == row["uuid"] for a in old.get("attachments") or ()):
        raise faults.BadRequest("Invalid volume: Old volume is attached to a different instance.")
    if new.get("attach_status") == "attached" or new.get("status") == "in-use":
        raise faults.BadRequest("Invalid volume: New volume must be detached in order to swap.")
    if int(new.get("size") or 0) < int(old.get("size") or 0):
        raise faults.BadRequest("Invalid volume: New volume must be the same size or larger.")
    _zone_check(req, row, new)
    calls = volume_common.calls(req)
    try:
        calls.begin_detaching(old_id)
    except volume_errors.InvalidInput as exc:
        raise faults.BadRequest(f"Invalid volume: {exc.message}") from None
    except volume_errors.VolumeError as exc:
        raise volume_common.answer(exc) from None
    detaching.append(old_id)
    if len(old.get("attachments") or ()) > 1:
        raise faults.BadRequest("Swapping multi-attach volumes with more than one read/write attachment is not "
                                "supported.")
    bdm = block_device_rows.of_volume(conn, row["uuid"], old_id)
    if bdm is None:
        raise faults.NotFound(f"No volume Block Device Mapping with id {old_id}.")
    _already_attached(conn, row, new)
    try:
        attachment = calls.attachment_create(new_id, row["uuid"])
    except volume_errors.VolumeError as exc:
        raise volume_common.answer(exc) from None
    made.append(attachment["id"])
    instance_actions.start_action(conn, row["uuid"], "swap_volume", actor)
    updates.outbox(conn, row["uuid"], ops.SWAP_VOLUME, actor, bdm_uuid=bdm["uuid"], volume_id=old_id,
                   new_volume_id=new_id, new_attachment_id=attachment["id"])
