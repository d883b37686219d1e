"""POST /servers/{server_id}/action: createImage and createBackup (docs/servers.md, "Snapshots and backups").

As Nova's API: the server (404), the policy (403), the name (stripped), the caller's ``metadata_items``
quota before 2.39 (403 "Image metadata limit exceeded"), the state (409; the lock does not refuse them);
then the image is made in the image service (``queued``, Nova's properties: compute/snapshot_image.py), the
task set (createImage ``image_snapshot_pending``, createBackup ``image_backup``) with the instance action,
and the controller asked to capture and upload the root disk (controller/steps/snapshot.py). The answer is
the image id from 2.45, a Location before (createBackup: none when ``rotation`` is 0). When the task cannot
be set after all (another request won the race), the image is deleted again and the 409 answered.

createBackup of a volume-backed server is Nova's 400 (after the state's 409). createImage of a
volume-backed server is done here, synchronously, as Nova's API does it (``_snapshot_volume_backed``): no
task state, no controller, no notification; each volume snapshotted in Cinder (forced: the volume is in
use) with the caller's token, then an image without data whose ``block_device_mapping`` names the
snapshots (compute/volume_snapshot.py). The guest is not quiesced: the API cannot reach it, so the
snapshot is crash-consistent (an image with ``os_require_quiesce`` is refused, 400).
"""

from __future__ import annotations

import logging

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import volume_common, wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    image_service,
    make_image,
    policy_target,
    read_server,
)
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import block_device_rows, block_devices, preconditions, quotas, volume_snapshot
from openkeel_compute.compute.instances import cas, instance_actions, store, updates
from openkeel_compute.images import errors as image_errors
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states
from openkeel_compute.policies import server_actions as rules
from openkeel_compute.volume import errors as volume_errors

LOG = logging.getLogger(__name__)


def _check_quota(req, conn, metadata: dict) -> None:
    if not metadata or req.version >= (2, 39):
        return
    try:
        quotas.check_metadata_and_files(conn, common.services(req).conf, req.context.project_id,
                                        req.context.user_id, metadata, None)
    except quotas.OverQuota:
        raise faults.Forbidden("Image metadata limit exceeded") from None


def _image_url(req, image_id: str) -> str:
    try:
        base = image_service(req).link_base(req.context, req.environ)
    except image_errors.ImageError:  # no catalogue entry: the configured default
        base = ""
    return f"{base.rstrip('/')}/images/{image_id}"


def _start(req, server_id: str, rule: str, action: str, operation_name: str, name: str, image_type: str,
           extra: dict, payload: dict) -> str:
    """Nova's handler and compute API in order: the server, the policy, the quota, the volume-backed
    check, the state; then the image and the task. The image's id."""
    actor = actor_of(req)
    pre = preconditions.precondition(action)
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rule, policy_target(row, user=False))
        _check_quota(req, conn, extra if image_type == "snapshot" else
                     {k: v for k, v in extra.items() if k != "backup_type"})
        row["system_metadata"] = store.metadata_of(conn, row["uuid"], system=True)
        if image_type == "backup":  # compute API's backup: the state first, then the volume-backed refusal
            pre.check(row, is_admin=actor.is_admin)
        if block_devices.volume_backed(block_device_rows.of(conn, row["uuid"])):
            if image_type == "backup":
                raise faults.BadRequest("Backup is not supported for volume-backed instances.")
            common.can(req, rules.SERVERS % "create_image:allow_volume_backed", policy_target(row, user=False))
            volume_backed = True
        else:
            pre.check(row, is_admin=actor.is_admin)  # check_instance_state, before the image is made
            volume_backed = False
    if volume_backed:
        return _snapshot_volume_backed(req, server_id, row, pre, actor, name, extra)
    image = make_image(req, row, name, image_type, extra)
    try:
        with common.write(req) as conn:
            row = read_server(conn, req, server_id)
            cas.begin_action(conn, row, pre, actor)
            updates.outbox(conn, row["uuid"], operation_name, actor, task_state=pre.next_task_state,
                           image_id=image["id"], **payload)
    except BaseException:
        # Nova deletes the image it made when the task cannot be set (the server deleted or busy meanwhile)
        try:
            image_service(req).delete(req.context, image["id"], req.environ)
        except image_errors.ImageError as exc:
            LOG.warning("Error while trying to clean up image %s: %s", image["id"], exc)
        raise
    return str(image["id"])


def _cinder_fault(exc: volume_errors.VolumeError) -> faults.Fault:
    """Nova's handler: Cinder's over-quota 403, its refusal (Invalid) 400, anything else its generic 500."""
    if isinstance(exc, volume_errors.OverQuota):
        return faults.Forbidden(exc.message)
    if isinstance(exc, volume_errors.InvalidInput):
        return faults.BadRequest(exc.message)
    if isinstance(exc, volume_errors.CinderUnavailable):
        return volume_common.answer(exc)
    return faults.Fault(f"Unexpected API Error. Please contact the administrator\n<class "
                        f"'nova.exception.{type(exc).__name__}'>", 500)


def _snapshot_volume_backed(req, server_id: str, row: dict, pre, actor, name: str, metadata: dict) -> str:
    """Nova's compute API snapshot_volume_backed, synchronous in the API: the state (no task is set, the
    lock does not refuse), Cinder's snapshot limit, the quiesce (compute/volume_snapshot.py), the
    ``createImage`` action with its event ``api_snapshot_instance`` around a forced Cinder snapshot of
    each volume, then the image with the mappings (no data)."""
    with common.read(req) as conn:
        pre.check(row, is_admin=actor.is_admin)  # (its 409 mapped by the transaction's error handling)
        kept, volumes = volume_snapshot.split(block_device_rows.of(conn, row["uuid"]))
    calls = volume_common.calls(req)
    if volumes:
        try:
            limits = calls.absolute_limits()
        except volume_errors.VolumeError as exc:
            raise _cinder_fault(exc) from None
        if volume_snapshot.over_snapshot_quota(limits, len(volumes)):
            raise faults.Forbidden("Quota exceeded for resources: snapshots")
    if row["vm_state"] == states.ACTIVE:
        refusal = volume_snapshot.quiesce_refusal(row["system_metadata"], row["uuid"])
        if refusal is not None:
            raise faults.BadRequest(refusal)
    with common.write(req) as conn:
        action_id = instance_actions.start_action(conn, row["uuid"], "createImage", actor)
        event_id = instance_actions.start_event(conn, action_id, "api_snapshot_instance", host=row["host"])
    mapping = list(kept)
    try:
        for bdm in volumes:
            volume = calls.get_volume(bdm["volume_id"])
            snapshot = calls.create_snapshot(volume["id"], True, f"snapshot for {name}", volume.get("description"))
            if bdm.get("boot_index") == 0 and not bdm.get("device_name"):  # Nova's compute named it at build
                bdm = dict(bdm, device_name=row.get("root_device_name"))
            mapping.append(volume_snapshot.snapshot_mapping(snapshot["id"], bdm))
    except volume_errors.VolumeError as exc:
        with common.write(req) as conn:
            instance_actions.finish_event(conn, event_id, "Error", traceback=f"{type(exc).__name__}: {exc.message}\n",
                                          details=type(exc).__name__)
        raise _cinder_fault(exc) from None
    with common.write(req) as conn:
        instance_actions.finish_event(conn, event_id, "Success")
    image = make_image(req, row, name, None, metadata, finish=lambda body: volume_snapshot.finish_image(
        body, row.get("root_device_name"), mapping))
    return str(image["id"])


@operation(body={"2.0": schema.create_image_v20, "2.1-": schema.create_image}, success=202,
           expected=(400, 403, 404, 409))
@wsgi_path_params
def create_image(req, server_id):
    entity = req.body["createImage"]
    name = entity["name"].strip()
    metadata = entity.get("metadata") or {}
    image_id = _start(req, server_id, rules.SERVERS % "create_image", "createImage", ops.SNAPSHOT, name,
                      "snapshot", metadata, {})
    if req.version >= (2, 45):
        return {"image_id": image_id}
    return Response(None, headers={"Location": _image_url(req, image_id)}, content_type="text/html")


@operation(body={"2.0": schema.create_backup_v20, "2.1-": schema.create_backup}, success=202,
           expected=(400, 403, 404, 409))
@wsgi_path_params
def create_backup(req, server_id):
    entity = req.body["createBackup"]
    name, backup_type, rotation = entity["name"].strip(), entity["backup_type"], int(entity["rotation"])
    metadata = dict(entity.get("metadata") or {})
    image_id = _start(req, server_id, rules.CREATE_BACKUP, "createBackup", ops.BACKUP, name, "backup",
                      dict(metadata, backup_type=backup_type), {"backup_type": backup_type, "rotation": rotation})
    if req.version >= (2, 45):
        return {"image_id": image_id}
    headers = {"Location": f"{req.application_url}/images/{image_id}"} if rotation > 0 else None
    return Response(None, headers=headers, content_type="text/html")
