"""The root volume of a volume-backed server written anew by Cinder, before its rebuild goes on (2.93's
``reimage_boot_volume``), as Nova's compute does it (``_rebuild_volume_backed_instance``).

Once the server's VM is stopped, the task still ``rebuilding`` (the rebuild's ``compute_rebuild_instance``
event started, so ``instance.rebuild.start`` is sent before):

- the root volume kept ``reserved`` for the server: a new Cinder attachment (no connector) is made and
  recorded in the mapping, then the old one deleted, with its PersistentVolume and the volume's claim
  (nothing may use the volume while Cinder writes it);
- Cinder asked to write the new image into it (``os-reimage`` with ``reimage_reserved``, 3.68);
- the step waits (no sleep: it answers ``Waiting``) for Cinder's ``volume-reimaged`` event of that volume
  (POST /os-server-external-events, tagged with the volume id), at most ``[DEFAULT] reimage_timeout_per_gb``
  seconds per GiB of the image (its size rounded up). ``completed``: the rebuild goes on (steps/rebuild.py
  exports the volume again on the new attachment, the claim is made again under its name and the VM
  recreated on it). Any other status, the time up, or a Cinder refusal: the server ends in ERROR with
  Nova's fault "Build of instance <uuid> aborted: Failed to rebuild volume backed instance." (an image
  gone: "... aborted: Image <id> not found."), the event "Error"; the mapping names the attachment Cinder
  has, so a delete gives it back. Events of the same name that name another volume, or none, are dropped,
  as Nova drops an event nobody waits for.

The progress is kept in the working state (``REIMAGE``): a controller that restarts carries on without
making a second attachment or asking Cinder twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from typing import Any

from openkeel_compute.compute import block_device_rows, external_events, working_state
from openkeel_compute.controller import tasks
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps.base import Context, Failed, Outcome, ServerRow, Waiting
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt import volumes as kube_volumes
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states

LOG = logging.getLogger(__name__)
REIMAGED = "volume-reimaged"
POLL = 0.5  # seconds between two looks at the events while waiting
FAILED = "Failed to rebuild volume backed instance."
GiB = 1024 ** 3


def root_of(server: dict[str, Any]) -> dict[str, Any] | None:
    """The server's root volume mapping, None when its root disk is not a volume."""
    return next((b for b in server.get("block_devices") or () if b.get("boot_index") == 0
                 and b.get("destination_type") == "volume" and b.get("volume_id")), None)


def _state(ctx: Context, uuid: str) -> dict[str, Any] | None:
    with reader(ctx.engine) as conn:
        text = working_state.of(conn, uuid).get(sysmeta.REIMAGE)
    return json.loads(text) if text else None


def _save(ctx: Context, uuid: str, state: dict[str, Any] | None) -> None:
    with transaction(ctx.engine) as conn:
        working_state.put(conn, uuid, sysmeta.REIMAGE, json.dumps(state) if state is not None else None)


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome | None:
    """One turn of the re-image (the VM stopped): None once Cinder wrote the image, else what the step
    answers (Waiting, or Failed with the server in ERROR)."""
    uuid, root = row.server_uuid, root_of(server)
    if root is None or ctx.volumes is None:
        return fail(ctx, row, server, FAILED)
    volume_id = str(root["volume_id"])
    state = _state(ctx, uuid)
    if state is None:
        state = {"old": root.get("attachment_id")}
        with transaction(ctx.engine) as conn:  # the rebuild's event was started by its step (rebuild.py)
            working_state.put(conn, uuid, sysmeta.REIMAGE, json.dumps(state))
    if "until" not in state:
        return _ask(ctx, row, server, root, state)
    return _wait(ctx, row, server, volume_id, state)


def _ask(ctx: Context, row: ServerRow, server: dict[str, Any], root: dict[str, Any],
         state: dict[str, Any]) -> Outcome | None:
    from openkeel_compute.images.errors import ImageError, ImageNotFound
    from openkeel_compute.volume import errors as volume_errors

    uuid, volume_id, image_id = row.server_uuid, str(root["volume_id"]), str(row.payload.get("image_ref"))
    calls = ctx.volumes.admin()
    old = state.get("old")
    try:
        if root.get("attachment_id") == old:  # the volume kept reserved for the server meanwhile
            new = calls.attachment_create(volume_id, uuid)["id"]
            root.update(attachment_id=new, connection_info=None)
            with transaction(ctx.engine) as conn:
                block_device_rows.save_volume(conn, root["uuid"], attachment_id=new, connection_info=None)
        if old:
            calls.attachment_delete(old)
    except volume_errors.VolumeError as exc:
        LOG.warning("server %s: the attachments of its root volume %s not renewed: %s", uuid, volume_id,
                    exc.message)
        return fail(ctx, row, server, FAILED)
    namespace = ctx.namespace_of(server)
    if old:
        ctx.cluster.delete(ObjectKey("PersistentVolume", None, kube_volumes.pv_name(str(old))))
    ctx.cluster.delete(ObjectKey("PersistentVolumeClaim", namespace, kube_volumes.claim_name(volume_id)))
    try:
        size = (ctx.objects.images.sizes(image_id) if ctx.objects.images is not None else {}).get("size") or 0
    except ImageNotFound:
        return fail(ctx, row, server, f"Image {image_id} not found.")
    except ImageError as exc:  # the image service away, or the image hidden: its size unknown, one GiB's time
        LOG.warning("server %s: the size of image %s not read: %s", uuid, image_id, exc)
        size = 0
    seconds = ctx.volumes.conf.reimage_timeout_per_gb * max(math.ceil(float(size) / GiB), 1)
    try:
        calls.reimage(volume_id, image_id, reimage_reserved=True)
    except volume_errors.VolumeError as exc:
        LOG.warning("server %s: Cinder did not re-image volume %s: %s", uuid, volume_id, exc.message)
        return fail(ctx, row, server, FAILED)
    state.update(old=None, until=(ctx.now() + dt.timedelta(seconds=seconds)).isoformat())
    _save(ctx, uuid, state)
    return Waiting(f"waiting for Cinder's volume-reimaged event of volume {volume_id}", POLL)


def _wait(ctx: Context, row: ServerRow, server: dict[str, Any], volume_id: str,
          state: dict[str, Any]) -> Outcome | None:
    uuid = row.server_uuid
    with reader(ctx.engine) as conn:
        seen = [e for e in external_events.pending(conn, uuid, names=(REIMAGED,))]
    if seen:
        with transaction(ctx.engine) as conn:
            external_events.handled(conn, [e["id"] for e in seen])
    mine = [e for e in seen if e["tag"] == volume_id]
    if mine:
        if mine[0]["status"] != "completed":
            LOG.warning("Cinder reported failure during reimaging with %s for instance %s", REIMAGED, uuid)
            return fail(ctx, row, server, FAILED)
        _save(ctx, uuid, None)
        return None
    until = dt.datetime.fromisoformat(state["until"])
    now = ctx.now()
    if now.tzinfo is None and until.tzinfo is not None:
        until = until.replace(tzinfo=None)
    if now >= until:
        LOG.warning("server %s: timeout waiting for volume-reimaged of volume %s", uuid, volume_id)
        return fail(ctx, row, server, FAILED)
    return Waiting(f"waiting for Cinder's volume-reimaged event of volume {volume_id}", POLL)


def fail(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """Nova's BuildAbortException of the rebuild: ERROR, the fault, the event "Error", the wait forgotten."""
    uuid = row.server_uuid
    message = f"Build of instance {uuid} aborted: {reason}"
    fault = Fault(500, message, message)
    with transaction(ctx.engine) as conn:
        tasks.end_in_fault(conn, tasks.of(conn, uuid), fault, expected=[task_states.REBUILDING],
                           vm_state=states.ERROR, host=server.get("host"))
        working_state.put(conn, uuid, sysmeta.REIMAGE, None)
    return Failed(message, fault)
