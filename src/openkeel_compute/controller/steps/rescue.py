"""rescue and unrescue: the VM boots a rescue image with the server's disk beside it, then its own again
(docs/servers.md, "Rescue").

rescue (task ``rescuing``): the guest is stopped; once its VMI is gone the rescue Secret (cloud-init user
data with the rescue password) is written and the VM patched into its rescue form (kubevirt/rescue.py: the
rescue image imported into a DataVolume of its own and booted first, the server's root disk second, or
every disk kept for a stable device rescue), the password erased from the outbox row, and the VM started.
The step ends the task RESCUED once the VM in its rescue form runs (the observation leaves ``rescuing``
alone). A rescue image that cannot be
imported puts the VM back as it was and ends as Nova's compute ends a rescue its driver could not do
(ERROR, "cannot be rescued"), with nothing of the rescue left in the cluster.

unrescue (task ``unrescuing``): the rescue guest is stopped, the VM's disks put back as they were before
the rescue, the rescue DataVolume and Secret deleted, the VM started; the observation ends the task ACTIVE
once it runs.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import update

from openkeel_compute.compute.instances import cas, instance_faults
from openkeel_compute.controller import tasks
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps import placing, vm_edits
from openkeel_compute.controller.steps.base import (
    DONE,
    Context,
    Failed,
    Outcome,
    ServerRow,
    Waiting,
    vmi_phase,
)
from openkeel_compute.db.api import transaction
from openkeel_compute.db.models import OUTBOX, utcnow
from openkeel_compute.images.errors import ImageNotFound
from openkeel_compute.kubevirt import rescue as shape
from openkeel_compute.kubevirt.names import server_image_token_secret
from openkeel_compute.kubevirt.server import USER_DATA_KEY, GiB, image_token_secret
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import states
from openkeel_compute.model.states import task_states

IMPORT_FAILED = "the rescue image could not be imported"


def _secret(namespace: str, uuid: str, labels: dict[str, str], password: str) -> dict[str, Any]:
    import base64

    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": shape.rescue_secret(uuid), "namespace": namespace, "labels": dict(labels)},
            "data": {USER_DATA_KEY: base64.b64encode(shape.user_data(password)).decode()}}


def _generated() -> str:
    import secrets
    import string

    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(12))


def _size_gib(ctx: Context, row: ServerRow) -> int:
    """The rescue disk's size: the image's virtual size (else its size) as the image service reports it,
    else what the API read (its min_disk or the server's root disk)."""
    images = ctx.objects.images
    image_id = str(row.payload["image_ref"])
    if images is not None:
        try:
            sizes = images.sizes(image_id)
        except Exception:  # noqa: BLE001 - the size the API read is used instead
            sizes = {}
        for field in ("virtual_size", "size"):
            if sizes.get(field):
                return max(1, math.ceil(int(sizes[field]) / GiB))
    return max(1, int(row.payload.get("size_gib") or 1))


def _image_url(ctx: Context, image_id: str) -> str:
    import urllib.parse

    images = ctx.objects.images
    endpoint = images.endpoint() if images is not None else ctx.objects.options.image_endpoint
    return endpoint.rstrip("/") + "/v2/images/" + urllib.parse.quote(image_id, safe="") + "/file"


def _forget_password(ctx: Context, row: ServerRow) -> None:
    """The rescue password is in the guest's Secret now: the outbox row no longer keeps it."""
    payload = {k: v for k, v in row.payload.items() if k != "password"}
    with transaction(ctx.engine) as conn:
        conn.execute(update(OUTBOX).where(OUTBOX.c.id == row.id).values(payload=payload))


def rescue(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    if server.get("task_state") != task_states.RESCUING:
        return DONE  # ended (the rescue guest ran, or the image failed) or another task took over
    placing.make_again(ctx, server)  # a VM gone from the cluster: made again from the record first
    vm, vmi, dvs = ctx.cluster.look(namespace, uuid)
    if vm is None:
        return Waiting("waiting for the server's virtual machine to be made again")
    if not shape.is_rescued(vm):
        gone = _image_gone(ctx, row, server)
        if gone is not None:
            return gone
        vm_edits.stop(ctx, namespace, uuid, vmi)  # waits until no VMI is left
        labels = dict((vm.get("metadata") or {}).get("labels") or {})
        if "password" in row.payload:  # an empty one: a generated password, as Nova's compute gives the guest
            ctx.cluster.apply(_secret(namespace, uuid, labels, str(row.payload["password"] or _generated())))
        token = ctx.objects.token()
        if token is not None:
            ctx.cluster.apply(image_token_secret(uuid, namespace, token, str(server["project_id"])))
        stable = row.payload.get("stable")  # Nova's hw_rescue_device and hw_rescue_bus, as the image has them
        vm_edits.patch(ctx, namespace, uuid, shape.rescue_patch(
            vm, uuid, image_url=_image_url(ctx, str(row.payload["image_ref"])),
            header_secret=server_image_token_secret(uuid) if token is not None else None,
            size_gib=_size_gib(ctx, row), labels=labels, storage_class=ctx.objects.options.storage_class,
            stable=shape.stable_device({"hw_rescue_device": stable[0], "hw_rescue_bus": stable[1]})
            if stable else None))
        vm, vmi, dvs = ctx.cluster.look(namespace, uuid)
        if vm is None:
            return Waiting("waiting for the server's virtual machine")
    if "password" in row.payload:  # in the guest's Secret now (also after a restart between the two)
        _forget_password(ctx, row)
    failed = next((dv for dv in dvs if (dv.get("metadata") or {}).get("name") == shape.rescue_volume(uuid)
                   and (dv.get("status") or {}).get("phase") == "Failed"), None)
    if failed is not None:
        return _import_failed(ctx, server, namespace, vm, vmi)
    vm_edits.start_if_stopped(ctx, namespace, uuid, vm, vmi)
    if vmi_phase(vmi) != "Running":
        return Waiting("waiting for the rescue guest to run", after=0.5)
    # Nova's compute: RESCUED, the guest's power state, launched_at now; the task's event done. The step
    # ends the task itself (not the observation): its row is over when the API may ask for an unrescue.
    with transaction(ctx.engine) as conn:
        if cas.save_state(conn, uuid, expected_task_state=task_states.RESCUING, vm_state=states.RESCUED,
                          task_state=None, power_state=states.power_state.RUNNING, launched_at=utcnow()):
            tasks.finish(conn, tasks.of(conn, uuid), None, ((vmi or {}).get("status") or {}).get("nodeName")
                         or server.get("host"))
    return DONE


def _image_gone(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome | None:
    """The image to boot is gone from the image service: the task reverted with Nova's fault, the server as
    it was (Nova's compute reads the image before it touches the guest). None: the image is there."""
    images = ctx.objects.images
    if images is None:
        return None
    image_id = str(row.payload["image_ref"])
    try:
        images.sizes(image_id)
    except ImageNotFound:
        fault = Fault(404, f"Image {image_id} could not be found.", "ImageNotFound")
        with transaction(ctx.engine) as conn:
            tasks.end_in_fault(conn, server, fault, expected=[task_states.RESCUING], host=server.get("host"))
        _forget_password(ctx, row)
        return Failed(fault.message, fault)
    return None


def _import_failed(ctx: Context, server: dict[str, Any], namespace: str, vm: dict[str, Any],
                   vmi: dict[str, Any] | None) -> Outcome:
    """The rescue image cannot be imported: the VM as it was, nothing of the rescue left, and the server
    in ERROR with the fault Nova's compute records for a rescue its driver could not do."""
    uuid = str(server["uuid"])
    _put_back(ctx, namespace, uuid, vm, vmi)
    message = f"Instance {uuid} cannot be rescued: Driver Error: {IMPORT_FAILED}"
    fault = Fault(400, message, f"KubeVirt: DataVolume {shape.rescue_volume(uuid)} Failed")
    with transaction(ctx.engine) as conn:
        if not cas.save_state(conn, uuid, expected_task_state=task_states.RESCUING, vm_state=states.ERROR,
                              task_state=None):
            return DONE
        instance_faults.add_fault(conn, uuid, code=fault.code, message=message, details=fault.details,
                                  host=server.get("host"))
        tasks.finish(conn, tasks.of(conn, uuid), fault)
    return Failed(message, fault)


def _put_back(ctx: Context, namespace: str, uuid: str, vm: dict[str, Any], vmi: dict[str, Any] | None) -> None:
    """The VM's own disks again (it must be stopped first), and the rescue's DataVolume and Secret gone."""
    if shape.is_rescued(vm):
        vm_edits.stop(ctx, namespace, uuid, vmi)
        vm_edits.patch(ctx, namespace, uuid, shape.unrescue_patch(vm))
    ctx.cluster.delete(ObjectKey("DataVolume", namespace, shape.rescue_volume(uuid)))
    ctx.cluster.delete(ObjectKey("Secret", namespace, shape.rescue_secret(uuid)))


def unrescue(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    if server.get("task_state") != task_states.UNRESCUING:
        return DONE
    placing.make_again(ctx, server)  # gone from the cluster: made again as the record has it, not rescued
    vm, vmi, _dvs = ctx.cluster.look(namespace, uuid)
    if vm is None:
        return Waiting("waiting for the server's virtual machine to be made again")
    # every time (a controller killed after the patch back would otherwise leave the rescue disk and Secret)
    _put_back(ctx, namespace, uuid, vm, vmi)
    vm, vmi, _dvs = ctx.cluster.look(namespace, uuid)
    if vm is None:
        return Waiting("waiting for the server's virtual machine")
    vm_edits.start_if_stopped(ctx, namespace, uuid, vm, vmi)
    return DONE  # the observation ends the task once the server's own guest runs


def give_up(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """A rescue whose attempts are spent ends as Nova's compute ends a rescue its driver raised on: ERROR,
    "cannot be rescued"."""
    message = f"Instance {row.server_uuid} cannot be rescued: Driver Error: {reason}"
    fault = Fault(400, message, reason)
    with transaction(ctx.engine) as conn:
        tasks.end_in_fault(conn, server, fault, expected=[task_states.RESCUING], vm_state=states.ERROR,
                           host=server.get("host"))
    return Failed(message, fault)
