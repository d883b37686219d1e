"""POST /servers/{server_id}/action: createImage and createBackup (docs/servers.md, "Snapshots and backups").

As Nova's API: the server (404), the policy (403), the name (stripped), the caller's ``metadata_items``
quota before 2.39 (403 "Image metadata limit exceeded"), the state (409; the lock does not refuse them);
then the image is made in the image service (``queued``, Nova's properties: compute/snapshot_image.py), the
task set (createImage ``image_snapshot_pending``, createBackup ``image_backup``) with the instance action,
and the controller asked to capture and upload the root disk (controller/steps/snapshot.py). The answer is
the image id from 2.45, a Location before (createBackup: none when ``rotation`` is 0). When the task cannot
be set after all (another request won the race), the image is deleted again and the 409 answered.

createBackup of a volume-backed server is Nova's 400. createImage of a volume-backed server (Cinder
snapshots and an image with ``block_device_mapping``) is not done yet: it ends as Nova's compute ends an
action its driver lacks (compute/unsupported.py), as before.
"""

from __future__ import annotations

import logging
import uuid as uuidlib

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    image_service,
    make_image,
    policy_target,
    read_server,
)
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import block_device_rows, block_devices, preconditions, quotas, unsupported
from openkeel_compute.compute.instances import cas, store, updates
from openkeel_compute.compute.unsupported import Ending
from openkeel_compute.images import errors as image_errors
from openkeel_compute.model import operations as ops
from openkeel_compute.policies import server_actions as rules

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
           extra: dict, payload: dict) -> str | None:
    """Nova's handler and compute API in order: the server, the policy, the quota, the volume-backed
    check, the state; then the image and the task. The image's id (None: ended as unsupported)."""
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
    if volume_backed:  # Cinder snapshots: not yet (module docstring)
        with common.write(req) as conn:
            row = read_server(conn, req, server_id)
            unsupported.fail(conn, row, pre, actor, Ending("compute_snapshot_instance"))
        return None
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


@operation(body={"2.0": schema.create_image_v20, "2.1-": schema.create_image}, success=202,
           expected=(400, 403, 404, 409))
@wsgi_path_params
def create_image(req, server_id):
    entity = req.body["createImage"]
    name = entity["name"].strip()
    metadata = entity.get("metadata") or {}
    image_id = _start(req, server_id, rules.SERVERS % "create_image", "createImage", ops.SNAPSHOT, name,
                      "snapshot", metadata, {})
    if image_id is None:  # as Nova's, an id whose image is deleted again when the driver fails
        image_id = str(uuidlib.uuid4())
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
