"""attach-volume, detach-volume and swap-volume: the compute side of os-volume_attachments on KubeVirt.

- ``attach``: Nova's compute ``attach_volume``: the attachment the API reserved is given the node's
  connector (Cinder exports the volume), its ``connection_info`` becomes a PersistentVolume and claim
  (kubevirt/volumes.py), the VM's template gets a hotpluggable volume on the claim and its disk (serial =
  the volume id) by a JSON patch that tests the VM's resourceVersion. KubeVirt's declarative hotplug puts
  it into the running VMI; the step waits until the VMI's ``volumeStatus`` says ``Ready`` (a stopped
  server gets it at its next start), then completes the attachment (the volume ``in-use``). A failure
  (Cinder refusing, a volume type without a Kubernetes source) undoes it as Nova's compute does: what was
  made on the cluster goes, the attachment is deleted (the volume ``available``), the mapping too, and
  the ``compute_attach_volume`` event fails with an instance fault;
- ``detach``: the volume and disk out of the VM's template, wait until the VMI's ``volumeStatus`` no
  longer names it, then the claim and PersistentVolume deleted, the Cinder attachment deleted and the
  mapping soft-deleted (``delete_on_termination`` is for the server's delete, as in Nova);
- ``swap``: Cinder's volume migration asks Nova to swap; KubeVirt cannot copy a running disk onto
  another claim, so the step ends it as Nova's compute ends a swap its driver cannot do: the old volume's
  detach rolled back, the new attachment deleted, the ``compute_swap_volume`` event failed with a fault.

Each records its instance-action event (``compute_attach_volume``, ...) in the request's action when it
ends.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from openkeel_compute.compute import block_device_rows
from openkeel_compute.compute.instances import instance_actions, instance_faults
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps.base import DONE, Context, Outcome, ServerRow, Wait, vmi_phase
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt import volumes as kube_volumes
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import events
from openkeel_compute.notifications import server_events

LOG = logging.getLogger(__name__)
SWAP_REFUSED = "KubeVirt servers cannot swap a volume (Cinder's volume migration of an attached volume)"


def _bdm(server: dict[str, Any], bdm_uuid: str) -> dict[str, Any] | None:
    return next((b for b in server.get("block_devices") or () if b["uuid"] == bdm_uuid), None)


_NOTIFIED = {events.ATTACH_VOLUME: "attach", events.DETACH_VOLUME: "detach", events.SWAP_VOLUME: "swap"}


def _record(ctx: Context, row: ServerRow, server: dict[str, Any], event: str, error: str | None = None,
            volumes: dict[str, str] | None = None) -> None:
    """The step's event in the request's action, finished, and its notifications (``.start`` then ``.end``
    or ``.error``); with ``error`` an instance fault beside it."""
    host = server.get("host")
    with transaction(ctx.engine) as conn:
        action_id = instance_actions.action_for_request(conn, row.server_uuid, row.request_id)
        if action_id is not None:
            server_events.volume_event(conn, action_id, _NOTIFIED[event], ("start", "error" if error else "end"),
                                       host, volumes or {"volume_id": str(row.payload.get("volume_id"))}, error)
            event_id = instance_actions.start_event(conn, action_id, event, host=host)
            if error is None:
                instance_actions.finish_event(conn, event_id, "Success")
            else:
                instance_actions.finish_event(conn, event_id, "Error", traceback=error, details=error)
        if error is not None:
            instance_faults.add_fault(conn, row.server_uuid, code=500, message=error, details=error, host=host)


def _vm(ctx: Context, server: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    namespace, name = ctx.namespace_of(server), server_vm_name(str(server["uuid"]))
    return namespace, name, ctx.cluster.get("VirtualMachine", name, namespace)


def _entry(ctx: Context, namespace: str, server: dict[str, Any], name: str) -> tuple[str | None, dict | None]:
    """(the VMI's phase, the volumeStatus entry of volume ``name``)."""
    vmi = ctx.cluster.vmi(namespace, str(server["uuid"]))
    entries = ((vmi or {}).get("status") or {}).get("volumeStatus") or ()
    return vmi_phase(vmi), next((e for e in entries if e.get("name") == name), None)


def attach(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    from openkeel_compute.controller.gateway import server_labels
    from openkeel_compute.controller.steps.volumes import connector
    from openkeel_compute.volume import errors as volume_errors

    bdm = _bdm(server, str(row.payload.get("bdm_uuid")))
    if bdm is None or ctx.volumes is None:
        return DONE  # detached or deleted meanwhile (or no Cinder: nothing can be exported)
    namespace, name, vm = _vm(ctx, server)
    disk = kube_volumes.claim_name(str(bdm["volume_id"]))
    if vm is None:
        return _attach_failed(ctx, row, server, bdm, "the server has no virtual machine on the cluster")
    info = bdm.get("connection_info")
    if isinstance(info, str):
        info = json.loads(info)
    if not info:
        try:
            attachment = ctx.volumes.admin().attachment_update(bdm["attachment_id"], connector(server),
                                                               mountpoint=bdm.get("device_name"))
        except volume_errors.CinderUnavailable as exc:
            raise Wait(f"Cinder is away: {exc.message}", after=1.0) from None
        except volume_errors.VolumeError as exc:
            return _attach_failed(ctx, row, server, bdm, exc.message)
        info = attachment.get("connection_info") or {}
        with transaction(ctx.engine) as conn:
            block_device_rows.save_connection(conn, bdm["uuid"], info)
    try:
        pv, pvc = kube_volumes.storage_objects(namespace, server_labels(str(server["uuid"])), str(bdm["volume_id"]),
                                               str(bdm["attachment_id"]), int(bdm.get("volume_size") or 1), info)
    except kube_volumes.VolumeRefused as exc:
        return _attach_failed(ctx, row, server, bdm, str(exc))
    ctx.cluster.apply(pv)
    ctx.cluster.apply(pvc)
    tspec = vm["spec"]["template"]["spec"]
    if not any(v.get("name") == disk for v in tspec.get("volumes") or ()):
        volume, disk_spec = kube_volumes.hotplug_disk(bdm)
        ctx.cluster.patch("VirtualMachine", namespace, name, [
            {"op": "test", "path": "/metadata/resourceVersion", "value": vm["metadata"]["resourceVersion"]},
            *_add("/spec/template/spec/volumes", tspec.get("volumes"), volume),
            *_add("/spec/template/spec/domain/devices/disks", tspec["domain"]["devices"].get("disks"), disk_spec)])
    phase, entry = _entry(ctx, namespace, server, disk)
    if phase == "Running" and (entry or {}).get("phase") != "Ready":
        raise Wait(f"waiting for volume {bdm['volume_id']} to be hotplugged", after=0.2)
    try:
        ctx.volumes.admin().attachment_complete(bdm["attachment_id"])
    except volume_errors.CinderUnavailable as exc:
        raise Wait(f"Cinder is away: {exc.message}", after=1.0) from None
    except volume_errors.VolumeError as exc:
        LOG.warning("server %s: attachment of volume %s not completed: %s", row.server_uuid, bdm["volume_id"],
                    exc.message)
    _record(ctx, row, server, events.ATTACH_VOLUME)
    return DONE


def _add(path: str, current: list | None, value: dict[str, Any]) -> list[dict[str, Any]]:
    if current is None:
        return [{"op": "add", "path": path, "value": [value]}]
    return [{"op": "add", "path": path + "/-", "value": value}]


def _remove_from_vm(ctx: Context, namespace: str, name: str, vm: dict[str, Any] | None, disk: str) -> None:
    if vm is None:
        return
    tspec = vm["spec"]["template"]["spec"]
    ops: list[dict[str, Any]] = []
    for path, items in (("/spec/template/spec/volumes", tspec.get("volumes") or []),
                        ("/spec/template/spec/domain/devices/disks", tspec["domain"]["devices"].get("disks") or [])):
        for index in reversed([i for i, item in enumerate(items) if item.get("name") == disk]):
            ops.append({"op": "remove", "path": f"{path}/{index}"})
    if ops:
        ctx.cluster.patch("VirtualMachine", namespace, name, [
            {"op": "test", "path": "/metadata/resourceVersion", "value": vm["metadata"]["resourceVersion"]}, *ops])


def _delete_storage(ctx: Context, namespace: str, bdm: dict[str, Any]) -> None:
    ctx.cluster.delete(ObjectKey("PersistentVolumeClaim", namespace, kube_volumes.claim_name(str(bdm["volume_id"]))))
    if bdm.get("attachment_id"):
        ctx.cluster.delete(ObjectKey("PersistentVolume", None, kube_volumes.pv_name(str(bdm["attachment_id"]))))


def _attach_failed(ctx: Context, row: ServerRow, server: dict[str, Any], bdm: dict[str, Any], reason: str) -> Outcome:
    """Nova's compute after a failed attach: nothing of it left anywhere, the event failed with a fault."""
    from openkeel_compute.volume import errors as volume_errors

    LOG.warning("server %s: volume %s not attached: %s", row.server_uuid, bdm["volume_id"], reason)
    namespace, name, vm = _vm(ctx, server)
    _remove_from_vm(ctx, namespace, name, vm, kube_volumes.claim_name(str(bdm["volume_id"])))
    _delete_storage(ctx, namespace, bdm)
    try:
        ctx.volumes.admin().attachment_delete(bdm["attachment_id"])
    except volume_errors.VolumeError as exc:
        LOG.warning("server %s: the attachment of volume %s not deleted: %s", row.server_uuid, bdm["volume_id"],
                    exc.message)
    with transaction(ctx.engine) as conn:
        block_device_rows.delete_one(conn, bdm["uuid"])
    _record(ctx, row, server, events.ATTACH_VOLUME, reason)
    return DONE


def detach(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    from openkeel_compute.volume import errors as volume_errors

    bdm = _bdm(server, str(row.payload.get("bdm_uuid")))
    if bdm is None:
        return DONE
    namespace, name, vm = _vm(ctx, server)
    disk = kube_volumes.claim_name(str(bdm["volume_id"]))
    _remove_from_vm(ctx, namespace, name, vm, disk)
    phase, entry = _entry(ctx, namespace, server, disk)
    if phase is not None and entry is not None:
        raise Wait(f"waiting for volume {bdm['volume_id']} to be unplugged", after=0.2)
    _delete_storage(ctx, namespace, bdm)
    if ctx.cluster.get("PersistentVolumeClaim", disk, namespace) is not None:
        raise Wait(f"waiting for the claim of volume {bdm['volume_id']} to go", after=0.2)
    if bdm.get("attachment_id"):  # deleted again once its claim is gone (a bound one is protected)
        ctx.cluster.delete(ObjectKey("PersistentVolume", None, kube_volumes.pv_name(str(bdm["attachment_id"]))))
    if bdm.get("attachment_id") and ctx.volumes is not None:
        try:
            ctx.volumes.admin().attachment_delete(bdm["attachment_id"])
        except volume_errors.CinderUnavailable as exc:
            raise Wait(f"Cinder is away: {exc.message}", after=1.0) from None
        except volume_errors.VolumeError as exc:
            LOG.warning("server %s: the attachment of volume %s not deleted: %s", row.server_uuid,
                        bdm["volume_id"], exc.message)
    with transaction(ctx.engine) as conn:
        block_device_rows.delete_one(conn, bdm["uuid"])
    _record(ctx, row, server, events.DETACH_VOLUME)
    return DONE


def swap(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    from openkeel_compute.volume import errors as volume_errors

    if ctx.volumes is not None:
        calls = ctx.volumes.admin()
        try:
            calls.roll_detaching(str(row.payload.get("volume_id")))
            if row.payload.get("new_attachment_id"):
                calls.attachment_delete(str(row.payload["new_attachment_id"]))
        except volume_errors.CinderUnavailable as exc:
            raise Wait(f"Cinder is away: {exc.message}", after=1.0) from None
        except volume_errors.VolumeError as exc:
            LOG.warning("server %s: the refused swap not rolled back in Cinder: %s", row.server_uuid, exc.message)
    _record(ctx, row, server, events.SWAP_VOLUME, f"NotImplementedError: {SWAP_REFUSED}",
            {"old_volume_id": str(row.payload.get("volume_id")), "new_volume_id": str(row.payload.get("new_volume_id"))})
    return DONE
