"""createImage and createBackup: the root disk captured by KubeVirt and uploaded to the image service.

The API made the image (``queued`` in Glance, with Nova's properties) and set the task; pass after pass,
the server's task says where the capture is (docs/servers.md, "Snapshots and backups"):

- ``image_snapshot_pending`` (createImage) becomes ``image_snapshot`` as Nova's compute takes the request;
- ``image_snapshot`` / ``image_backup``: a **VirtualMachineSnapshot** of the server's VM
  (``snap-<image id>``, owned by the VM). Where the guest runs with its agent connected, KubeVirt
  freezes the guest's filesystems for the copy (indication ``GuestAgent``); where it runs without an
  agent, the step pauses the guest first (Nova's libvirt cold snapshot suspends it too) and unpauses it
  once the copy is ready; a guest that is off is copied as it is. Once the snapshot is ready to use:
  ``image_pending_upload``;
- ``image_pending_upload``: a **VirtualMachineExport** of the snapshot (``export-<image id>``) with a token
  Secret, both owned by the snapshot; once it is Ready: ``image_uploading``;
- ``image_uploading``: the image gets ``disk_format raw`` / ``container_format bare`` (the export's raw
  format), the root volume's bytes are streamed from the export's link into ``PUT /v2/images/{id}/file``
  (Glance shows ``saving``, then ``active``), the snapshot is deleted (its export, Secret and content go
  with it), the task ends, and a backup's rotation deletes the oldest backups beyond ``rotation``.

The upload runs inside the step (the controller's pass waits for it): images are streamed, not held.
A step that keeps failing ends as Nova's compute ends a snapshot that raised: the image deleted, the
task cleared, a fault recorded, the event failed, the server in its vm_state (``give_up``).
"""

from __future__ import annotations

import base64
import logging
import secrets
from typing import Any

import httpx2
from sqlalchemy import select

from openkeel_compute.compute.instances import cas
from openkeel_compute.controller import export_link, tasks
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.gateway import server_labels
from openkeel_compute.controller.steps.base import (
    DONE,
    Context,
    Failed,
    Outcome,
    ServerRow,
    Waiting,
    vmi_phase,
)
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.db.models import OUTBOX
from openkeel_compute.images import errors as image_errors
from openkeel_compute.kubevirt.mapping import ROOT_DISK
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states
from openkeel_compute.model.states import task_states

LOG = logging.getLogger(__name__)
SNAPSHOT_API = "snapshot.kubevirt.io/v1beta1"
EXPORT_API = "export.kubevirt.io/v1"
EXPORT_TTL = "2h"  # an export forgotten by a controller that died ends by itself


def names(image_id: str) -> tuple[str, str, str]:
    """(the VirtualMachineSnapshot, the VirtualMachineExport, the export's token Secret) of an image."""
    return f"snap-{image_id}", f"export-{image_id}", f"export-token-{image_id}"


def _first_task(row: ServerRow) -> str:
    return task_states.IMAGE_BACKUP if row.operation == ops.BACKUP else task_states.IMAGE_SNAPSHOT


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    image_id = str(row.payload["image_id"])
    task = server.get("task_state")
    if task == task_states.IMAGE_SNAPSHOT_PENDING:
        with transaction(ctx.engine) as conn:
            if not cas.save_state(conn, uuid, expected_task_state=task, task_state=task_states.IMAGE_SNAPSHOT):
                return DONE
        task = task_states.IMAGE_SNAPSHOT
    if task == _first_task(row):
        outcome = _capture(ctx, row, server, namespace, image_id)
        if outcome is not None:
            return outcome
        task = _advance(ctx, uuid, task, task_states.IMAGE_PENDING_UPLOAD)
    if task == task_states.IMAGE_PENDING_UPLOAD:
        outcome = _export(ctx, namespace, image_id, server)
        if outcome is not None:
            return outcome
        task = _advance(ctx, uuid, task, task_states.IMAGE_UPLOADING)
    if task != task_states.IMAGE_UPLOADING:
        return DONE  # no longer this capture's (deleted, reset): the snapshot objects go with the VM
    return _upload(ctx, row, server, namespace, image_id)


def _advance(ctx: Context, uuid: str, expected: str, task: str) -> str | None:
    with transaction(ctx.engine) as conn:
        return task if cas.save_state(conn, uuid, expected_task_state=expected, task_state=task) else None


def _agent(vmi: dict[str, Any] | None) -> bool:
    return any(c.get("type") == "AgentConnected" and c.get("status") == "True"
               for c in ((vmi or {}).get("status") or {}).get("conditions") or ())


def _paused(vmi: dict[str, Any] | None) -> bool:
    return any(c.get("type") == "Paused" and c.get("status") == "True"
               for c in ((vmi or {}).get("status") or {}).get("conditions") or ())


def _capture(ctx: Context, row: ServerRow, server: dict[str, Any], namespace: str, image_id: str
             ) -> Outcome | None:
    """The VirtualMachineSnapshot made and ready (None), or how the step waits or fails."""
    snap_name = names(image_id)[0]
    vm_name = server_vm_name(row.server_uuid)
    vmi = ctx.cluster.vmi(namespace, row.server_uuid)
    running = vmi_phase(vmi) == "Running"
    # a guest without its agent is paused for the copy (unless its user paused it: then it stays paused)
    we_pause = running and not _agent(vmi) and server.get("vm_state") == states.ACTIVE
    snap = ctx.cluster.get("VirtualMachineSnapshot", snap_name, namespace)
    if snap is None:
        vm = ctx.cluster.get("VirtualMachine", vm_name, namespace)
        if vm is None:
            return _fail(ctx, row, server, f"Instance {row.server_uuid} could not be found.",
                         "KubeVirt: the server's VirtualMachine is not in the cluster")
        if we_pause and not _paused(vmi):
            ctx.cluster.subresource(namespace, vm_name, "pause")
            return Waiting("waiting for the guest (no guest agent) to pause before its disk is copied")
        ctx.cluster.create({
            "apiVersion": SNAPSHOT_API, "kind": "VirtualMachineSnapshot",
            "metadata": {"name": snap_name, "namespace": namespace, "labels": server_labels(row.server_uuid),
                         "ownerReferences": [_owner(vm)]},
            "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": vm_name}}})
        return Waiting("waiting for the VirtualMachineSnapshot to be ready to use")
    status = snap.get("status") or {}
    if status.get("phase") == "Failed":
        failure = next((c.get("message") for c in status.get("conditions") or () if c.get("type") == "Failure"),
                       "") or "the VirtualMachineSnapshot failed"
        return _fail(ctx, row, server, f"Snapshot of instance {row.server_uuid} failed: {failure}",
                     f"KubeVirt: VirtualMachineSnapshot {snap_name} Failed: {failure}")
    if not status.get("readyToUse"):
        return Waiting("waiting for the VirtualMachineSnapshot to be ready to use")
    if we_pause and _paused(vmi):
        ctx.cluster.subresource(namespace, vm_name, "unpause")
    LOG.info("server %s: disk captured for image %s (%s)", row.server_uuid, image_id,
             ", ".join(status.get("indications") or ()) or "guest off")
    return None


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj.get("apiVersion") or "kubevirt.io/v1", "kind": obj.get("kind") or "VirtualMachine",
            "name": meta["name"], "uid": meta["uid"], "blockOwnerDeletion": False}


def _export(ctx: Context, namespace: str, image_id: str, server: dict[str, Any]) -> Outcome | None:
    snap_name, export_name, token_name = names(image_id)
    export = ctx.cluster.get("VirtualMachineExport", export_name, namespace)
    if export is None:
        snap = ctx.cluster.get("VirtualMachineSnapshot", snap_name, namespace)
        if snap is None:  # gone since it was ready (removed behind our back): capture again
            return Failed(f"VirtualMachineSnapshot {snap_name} is gone before its export")
        owner = {"apiVersion": SNAPSHOT_API, "kind": "VirtualMachineSnapshot", "name": snap_name,
                 "uid": snap["metadata"]["uid"], "blockOwnerDeletion": False}
        labels = server_labels(str(server["uuid"]))
        if ctx.cluster.get("Secret", token_name, namespace) is None:
            token = base64.b64encode(secrets.token_urlsafe(32).encode()).decode()
            ctx.cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": {
                "name": token_name, "namespace": namespace, "labels": labels, "ownerReferences": [owner]},
                "data": {"token": token}})
        ctx.cluster.create({
            "apiVersion": EXPORT_API, "kind": "VirtualMachineExport",
            "metadata": {"name": export_name, "namespace": namespace, "labels": labels, "ownerReferences": [owner]},
            "spec": {"source": {"apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot",
                                "name": snap_name}, "tokenSecretRef": token_name, "ttlDuration": EXPORT_TTL}})
        return Waiting("waiting for the VirtualMachineExport to be ready")
    if (export.get("status") or {}).get("phase") != "Ready":
        return Waiting("waiting for the VirtualMachineExport to be ready")
    return None


def _root_claim(ctx: Context, namespace: str, image_id: str) -> str | None:
    snap = ctx.cluster.get("VirtualMachineSnapshot", names(image_id)[0], namespace) or {}
    content_name = (snap.get("status") or {}).get("virtualMachineSnapshotContentName")
    content = ctx.cluster.get("VirtualMachineSnapshotContent", content_name, namespace) if content_name else None
    for backup in ((content or {}).get("spec") or {}).get("volumeBackups") or ():
        if backup.get("volumeName") == ROOT_DISK:
            return str(backup["persistentVolumeClaim"]["metadata"]["name"])
    return None


def _upload(ctx: Context, row: ServerRow, server: dict[str, Any], namespace: str, image_id: str) -> Outcome:
    pushed = push(ctx, namespace, image_id)
    if isinstance(pushed, Failed):
        return pushed
    return _finish(ctx, row, server, namespace, image_id, uploaded=pushed)


def push(ctx: Context, namespace: str, image_id: str) -> Failed | bool:
    """The root disk's bytes streamed from the export's link into the image: True once the image is
    ``active``, False when it was deleted meanwhile, Failed when the link gives nothing (tried again)."""
    assert ctx.objects.images is not None, "a controller that uploads images has the image service"
    glance, environ = ctx.objects.images.glance()
    try:
        image = glance.show(None, image_id, environ)
    except image_errors.ImageNotFound:  # deleted meanwhile: Nova ends the task, no fault
        return False
    if image.get("status") != "active":
        _, export_name, token_name = names(image_id)
        export = ctx.cluster.get("VirtualMachineExport", export_name, namespace) or {}
        claim = _root_claim(ctx, namespace, image_id)
        link = export_link.raw_url(export, claim) if claim else None
        secret = ctx.cluster.get("Secret", token_name, namespace) or {}
        token = base64.b64decode((secret.get("data") or {}).get("token") or "").decode()
        if link is None or not token:
            return Failed(f"VirtualMachineExport {export_name} gives no raw link of the root disk")
        glance.update_base(None, image_id, {"disk_format": "raw", "container_format": "bare"}, environ)
        try:
            with export_link.download(link[0], token, link[1]) as chunks:
                glance.upload(None, image_id, chunks, environ)
        except image_errors.ImageNotFound:
            return False
        except httpx2.HTTPError as exc:
            return Failed(f"the export's link did not give the disk: {exc}")
    return True


def _finish(ctx: Context, row: ServerRow, server: dict[str, Any], namespace: str, image_id: str, *,
            uploaded: bool = False) -> Outcome:
    ctx.cluster.delete(ObjectKey("VirtualMachineSnapshot", namespace, names(image_id)[0]))
    with transaction(ctx.engine) as conn:
        if cas.save_state(conn, row.server_uuid, expected_task_state=task_states.IMAGE_UPLOADING, task_state=None):
            tasks.finish(conn, tasks.of(conn, row.server_uuid), None, server.get("host"))
    if uploaded and row.operation == ops.BACKUP:
        rotate(ctx, row.server_uuid, str(row.payload["backup_type"]), int(row.payload["rotation"]))
    return DONE


def rotate(ctx: Context, uuid: str, backup_type: str, rotation: int) -> None:
    """Nova's ``_rotate_backups``: the server's backups of this type, newest first; those beyond
    ``rotation`` deleted, the oldest first; an image that cannot be deleted is skipped."""
    assert ctx.objects.images is not None
    glance, environ = ctx.objects.images.glance()
    found = glance.list_images(None, {"image_type": "backup", "backup_type": backup_type, "instance_uuid": uuid,
                                      "sort_key": "created_at", "sort_dir": "desc"}, environ=environ)
    for image in reversed(found[rotation:]):
        try:
            glance.delete(None, image["id"], environ)
        except image_errors.ImageError as exc:
            LOG.info("server %s: backup %s not rotated out: %s", uuid, image["id"], exc)


def _fail(ctx: Context, row: ServerRow, server: dict[str, Any], message: str, details: str) -> Failed:
    """End as Nova's compute ends a snapshot that raised: the image deleted (``delete_image_on_error``),
    the task reverted, the fault recorded, the event failed; the server keeps its vm_state."""
    fault = Fault(500, message, details)
    _drop(ctx, row, server)
    with transaction(ctx.engine) as conn:
        tasks.end_in_fault(conn, server, fault, expected=[server.get("task_state")], host=server.get("host"))
    return Failed(message, fault)


def _drop(ctx: Context, row: ServerRow, server: dict[str, Any]) -> None:
    image_id = str(row.payload["image_id"])
    ctx.cluster.delete(ObjectKey("VirtualMachineSnapshot", ctx.namespace_of(server), names(image_id)[0]))
    vmi = ctx.cluster.vmi(ctx.namespace_of(server), row.server_uuid)
    if server.get("vm_state") == states.ACTIVE and _paused(vmi) and not _agent(vmi):
        ctx.cluster.subresource(ctx.namespace_of(server), server_vm_name(row.server_uuid), "unpause")
    if ctx.objects.images is not None:
        glance, environ = ctx.objects.images.glance()
        try:
            glance.delete(None, image_id, environ)
        except image_errors.ImageNotFound:
            pass
        except image_errors.ImageError as exc:  # Nova logs it and goes on
            LOG.warning("server %s: image %s not deleted after its snapshot failed: %s", row.server_uuid,
                        image_id, exc)


def on_delete(ctx: Context, uuid: str) -> None:
    """A server deleted during a capture: the images its snapshots and backups made that never became
    ``active`` are deleted, as Nova's compute deletes the image of a snapshot whose instance disappeared
    (the capture's objects go with the VM, which owns them). The image service away: logged, the delete
    goes on."""
    if ctx.objects.images is None:
        return
    with reader(ctx.engine) as conn:
        payloads = conn.execute(select(OUTBOX.c.payload).where(
            OUTBOX.c.kind == ops.SERVER, OUTBOX.c.object_id == uuid,
            OUTBOX.c.operation.in_((ops.SNAPSHOT, ops.BACKUP)))).scalars().all()
    glance, environ = ctx.objects.images.glance()
    for payload in payloads:
        image_id = str((payload or {}).get("image_id") or "")
        if not image_id:
            continue
        try:
            if glance.show(None, image_id, environ).get("status") != "active":
                glance.delete(None, image_id, environ)
        except image_errors.ImageNotFound:
            pass
        except image_errors.ImageError as exc:
            LOG.warning("server %s: image %s of an unfinished snapshot not deleted: %s", uuid, image_id, exc)


#: the capture's stages as shelve reuses them (controller/steps/shelve.py)
capture = _capture
export = _export
fail = _fail


def give_up(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """The attempts are spent (the image service or the cluster kept failing): Nova's ending of a failed
    snapshot, the last reason as the fault."""
    return _fail(ctx, row, server, reason, reason)
