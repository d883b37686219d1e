"""POST /servers/{server_id}/action {"rescue": ...} and {"unrescue": null}, as Nova 34.0.0.

rescue's checks come in Nova's order: the body's schema, the server (404), the ``os-rescue`` policy (target:
the server's user and project), a vTPM server (400, as Nova's API answers its NotSupported), the lock and the state (ACTIVE, SHUTOFF or ERROR with no task), the rescue
image when one is named ("Requested rescue image '<ref>' is not supported" when the image service does not
have it or it is a volume snapshot's image), then the volume-backed rule: a volume-backed server can be
rescued only by a stable device rescue, from 2.87, with an image that has both ``hw_rescue_device`` and
``hw_rescue_bus`` (every node of the cluster can: KubeVirt attaches the server's volume beside the rescue
disk, so each node is a host with COMPUTE_RESCUE_BFV). Then, in one transaction, the task becomes
``rescuing``, the "rescue" action is recorded and an outbox row asks the controller to boot the rescue
image (controller/steps/rescue.py) with the password. The answer is 200 with ``adminPass``, or ``{}`` when
``[api] enable_instance_password`` is false.

unrescue: the server (404), ``os-unrescue`` (target: the project), the lock and vm_state RESCUED with no
task; the task becomes ``unrescuing``, the "unrescue" action is recorded, the controller puts the VM back.
"""

from __future__ import annotations

import math

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    generated_password,
    image_service,
    read_server,
)
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import flavor_copy, preconditions
from openkeel_compute.compute.image_meta import image_from_system_metadata, truncate_utf8
from openkeel_compute.compute.instances import cas, instance_sysmeta, store, updates
from openkeel_compute.images import errors as image_errors
from openkeel_compute.model import operations, sysmeta
from openkeel_compute.policies import server_actions as rules

GiB = 1024**3


def _unsupported(image_ref: str) -> faults.Fault:
    return faults.BadRequest(f"Requested rescue image '{image_ref}' is not supported")


def _rescue_image(req, image_ref: str) -> dict:
    """The rescue image named in the body, as Nova's API reads it: any failure to read it, or an image of a
    volume snapshot (``img_block_device_mapping``), is an unsupported rescue image."""
    try:
        image = image_service(req).show(req.context, image_ref, req.environ)
    except (image_errors.ImageNotFound, image_errors.ImageNotAuthorized, image_errors.ImageBadRequest):
        raise _unsupported(image_ref) from None
    except image_errors.ImageServiceUnavailable as exc:
        raise faults.Fault(exc.message, 503) from None
    if (image.get("properties") or {}).get("img_block_device_mapping"):
        raise _unsupported(image_ref)
    return image


def _size_gib(image: dict | None, row: dict) -> int:
    """The rescue disk's size as the API knows it (the controller asks the image service again)."""
    for field in ("virtual_size", "size"):
        if image and image.get(field):
            return max(1, math.ceil(int(image[field]) / GiB))
    if image and image.get("min_disk"):
        return int(image["min_disk"])
    return max(1, int(flavor_copy.FlavorCopy.loads(row["flavor"]).cur.get("root_gb") or 1))


@operation(body={"2.0-": schema.rescue}, expected=(400, 404, 409, 501))
@wsgi_path_params
def rescue(req, server_id):
    options = req.body["rescue"] or {}
    password = options["adminPass"] if "adminPass" in options else generated_password()
    actor = actor_of(req)
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        system = store.metadata_of(conn, row["uuid"], system=True)
    common.can(req, rules.RESCUE, {"user_id": row["user_id"], "project_id": row["project_id"]})
    own = image_from_system_metadata({k: v for k, v in system.items() if k.startswith(sysmeta.IMAGE_PREFIX)})
    specs = flavor_copy.FlavorCopy.loads(row["flavor"]).cur.get("extra_specs") or {}
    if specs.get("hw:tpm_version") or (own.get("properties") or {}).get("hw_tpm_version"):
        # Nova refuses a vTPM server before its lock and state (NotSupported, which its API makes a 400)
        raise faults.BadRequest(f"Operation 'rescue' not supported for vTPM-enabled instance ({row['uuid']}).")
    pre = preconditions.precondition("rescue")
    with common.domain_errors():
        pre.check(row, is_admin=actor.is_admin)
    rescue_ref = options.get("rescue_image_ref")
    rescue_image = _rescue_image(req, rescue_ref) if rescue_ref else None
    properties = (rescue_image or own).get("properties") or {}
    volume_backed = system.get(sysmeta.BOOT_FROM_VOLUME) == "True" or not row["image_ref"]
    stable_rescue = "hw_rescue_bus" in properties and "hw_rescue_device" in properties
    if volume_backed and not (req.version >= (2, 87) and stable_rescue):
        raise faults.BadRequest(f"Instance {row['uuid']} cannot be rescued: Cannot rescue a volume-backed instance")
    # Nova's compute boots the named image, else the image the server was first built from, else its own
    image_ref = rescue_ref or system.get(sysmeta.BASE_IMAGE_REF) or row["image_ref"]
    if not image_ref:
        raise _unsupported("")  # nothing to boot: a volume-backed server named no rescue image
    # the image the guest boots decides between a stable device rescue and the legacy one
    booted = (rescue_image if rescue_image is not None else own).get("properties") or {}
    stable = ([str(booted["hw_rescue_device"]), str(booted["hw_rescue_bus"])]
              if booted.get("hw_rescue_device") and booted.get("hw_rescue_bus") else None)
    with common.write(req) as conn:
        with common.domain_errors():
            cas.begin_action(conn, row, pre, actor)
        instance_sysmeta.set_system_metadata_item(conn, row["uuid"], sysmeta.RESCUE_IMAGE_REF, rescue_ref or "")
        name = (rescue_image or {}).get("name") if rescue_image else system.get(sysmeta.IMAGE_NAME)
        instance_sysmeta.set_system_metadata_item(conn, row["uuid"], sysmeta.RESCUE_IMAGE_NAME,
                                                  truncate_utf8(str(name or "")))
        updates.outbox(conn, row["uuid"], operations.RESCUE, actor, task_state=pre.next_task_state,
                       image_ref=image_ref, password=password, stable=stable,
                       size_gib=_size_gib(rescue_image, row), old_vm_state=row["vm_state"])
    if common.services(req).conf.api.enable_instance_password:
        return {"adminPass": password}
    return {}


@operation(body={"2.0-": schema.unrescue}, success=202, expected=(404, 409, 501))
@wsgi_path_params
def unrescue(req, server_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.UNRESCUE, {"project_id": row["project_id"]})
        pre = preconditions.precondition("unrescue")
        cas.begin_action(conn, row, pre, actor)
        updates.outbox(conn, row["uuid"], operations.UNRESCUE, actor, task_state=pre.next_task_state)
    return Response(None)
