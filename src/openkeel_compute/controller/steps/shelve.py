"""shelve, shelveOffload and unshelve (docs/servers.md, "Shelve").

- shelve (task ``shelving``): the guest stopped (Nova's compute powers it off first), then its root disk
  captured and uploaded into the image the API made (``<name>-shelved``) by createImage's own stages
  (steps/snapshot.py: VirtualMachineSnapshot → ``shelving_image_pending_upload``, VirtualMachineExport →
  ``shelving_image_uploading``, the bytes streamed into the image service); then SHELVED with the system
  metadata ``shelved_at``/``shelved_image_id``/``shelved_host``. With ``[DEFAULT] shelved_offload_time`` 0
  the offload follows at once in the same step (task ``shelving_offloading``), as Nova's compute does.
- offload (shelveOffload, the shelve above, the periodic task for ``shelved_offload_time`` > 0, or at once
  the shelve of a volume-backed server, task ``shelving``, which makes no image): with Neutron the server's
  ports unbound from the node first (``binding:host_id`` cleared; they stay the server's), as Nova's offload
  cleans the host's bindings; the server's objects deleted from the cluster (the VM, its disks, Secrets, its
  volumes' claims and PersistentVolumes), each Cinder volume kept reserved for the server (a new attachment
  without a connector, the old one deleted, as Nova's ``_terminate_volume_connections``), then the Placement
  claim given back, host and node cleared: SHELVED_OFFLOADED.
- unshelve (task ``unshelving``): a SHELVED server's VM is started again (task ``powering-on``, event
  ``compute_start_instance``, as Nova's conductor asks its compute to start it); a SHELVED_OFFLOADED one is
  claimed again (any node; the zone and host the request named), its Neutron ports bound to that node
  (``binding:host_id``, ``device_owner`` ``compute:<zone>``), its volumes exported to the new node (each
  attachment given the node's connector, its PersistentVolume and claim made, completed once the VM is
  applied) and its VM made from the shelved image (the build's objects, the image the shelved one; a
  volume-backed server boots from its volume, no image read) and started. The observation ends the task (ACTIVE)
  once the guest runs; the step deletes the shelved image and the ``shelved_*`` keys once it does.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from sqlalchemy import select

from openkeel_compute.compute import block_device_rows, block_devices
from openkeel_compute.compute.instances import (
    cas,
    instance_actions,
    instance_faults,
    instance_sysmeta,
    updates,
)
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.controller import tasks
from openkeel_compute.controller.claims import NoValidHost
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps import attachments, placing, ports, snapshot, vm_edits, volumes
from openkeel_compute.controller.steps.base import (
    DONE,
    FINAL_PHASES,
    Context,
    Failed,
    Outcome,
    ServerRow,
    Waiting,
    vmi_phase,
)
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.db.models import INSTANCE_SYSTEM_METADATA, INSTANCES
from openkeel_compute.images import errors as image_errors
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model import operations as ops
from openkeel_compute.model.states import power_state, task_states
from openkeel_compute.network.errors import NeutronUnavailable

LOG = logging.getLogger(__name__)
SHELVED_AT, SHELVED_IMAGE_ID, SHELVED_HOST = "shelved_at", "shelved_image_id", "shelved_host"
SHELVED_KEYS = (SHELVED_AT, SHELVED_IMAGE_ID, SHELVED_HOST)


def _advance(ctx: Context, uuid: str, expected: str, task: str) -> str | None:
    with transaction(ctx.engine) as conn:
        return task if cas.save_state(conn, uuid, expected_task_state=expected, task_state=task) else None


def shelve(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    image_id = str(row.payload["image_id"])
    task = server.get("task_state")
    if task == task_states.SHELVING:
        if vmi_phase(ctx.cluster.vmi(namespace, uuid)) not in (None, *FINAL_PHASES):
            ctx.cluster.subresource(namespace, server_vm_name(uuid), "stop")
            return Waiting("waiting for the guest to stop before it is shelved")
        outcome = snapshot.capture(ctx, row, server, namespace, image_id)
        if outcome is not None:
            return outcome
        task = _advance(ctx, uuid, task, task_states.SHELVING_IMAGE_PENDING_UPLOAD)
    if task == task_states.SHELVING_IMAGE_PENDING_UPLOAD:
        outcome = snapshot.export(ctx, namespace, image_id, server)
        if outcome is not None:
            return outcome
        task = _advance(ctx, uuid, task, task_states.SHELVING_IMAGE_UPLOADING)
    if task == task_states.SHELVING_IMAGE_UPLOADING:
        pushed = snapshot.push(ctx, namespace, image_id)
        if isinstance(pushed, Failed):
            return pushed
        if not pushed:  # the image deleted during the upload: Nova's shelve fails (ImageNotFound)
            return snapshot.fail(ctx, row, server, f"Image {image_id} could not be found.",
                                 "the shelved image was deleted during its upload")
        ctx.cluster.delete(ObjectKey("VirtualMachineSnapshot", namespace, snapshot.names(image_id)[0]))
        offload_now = ctx.settings.shelved_offload_time == 0
        with transaction(ctx.engine) as conn:
            if not cas.save_state(conn, uuid, expected_task_state=task, vm_state=states.SHELVED,
                                  power_state=power_state.SHUTDOWN,
                                  task_state=task_states.SHELVING_OFFLOADING if offload_now else None):
                return DONE
            for key, value in ((SHELVED_AT, dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat()),
                               (SHELVED_IMAGE_ID, image_id), (SHELVED_HOST, server.get("host") or "")):
                instance_sysmeta.set_system_metadata_item(conn, uuid, key, value)
            if not offload_now:
                tasks.finish(conn, tasks.of(conn, uuid), None, server.get("host"))
                return DONE
        task = task_states.SHELVING_OFFLOADING
    if task == task_states.SHELVING_OFFLOADING:
        return _offload(ctx, row, server)
    return DONE  # no longer this shelve's (deleted, reset)


def offload(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    """The server's objects out of the cluster, then its claim given back: SHELVED_OFFLOADED. A
    volume-backed server's shelve comes here at once (task ``shelving``, no image)."""
    task = server.get("task_state")
    if task != task_states.SHELVING_OFFLOADING and not (
            task == task_states.SHELVING and block_devices.volume_backed(server.get("block_devices") or ())):
        return DONE  # no longer this offload's (deleted, reset)
    return _offload(ctx, row, server)


def _offload(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    vm, vmi, dvs = ctx.cluster.look(namespace, uuid)
    try:  # its ports no longer bound to the node it leaves, before its guest goes, as Nova's shelve offload
        ports.unbind_from_node(ctx, server)
    except NeutronUnavailable as exc:
        return Waiting(f"waiting for Neutron to unbind the shelved server's ports: {exc.message}")
    if vm is not None or vmi is not None or dvs:
        ctx.cluster.delete_server(namespace, uuid)
        return Waiting("waiting for the shelved server's objects to leave the cluster")
    failed = _terminate_volume_connections(ctx, uuid)
    if failed is not None:
        return failed
    if ctx.claims is not None:  # before the state, as Nova's (a client polling for it may unshelve at once)
        ctx.claims.release(uuid)  # Placement away: tried again
    with transaction(ctx.engine) as conn:
        if cas.save_state(conn, uuid, expected_task_state=[task_states.SHELVING, task_states.SHELVING_OFFLOADING],
                          vm_state=states.SHELVED_OFFLOADED, task_state=None, host=None, node=None,
                          power_state=power_state.SHUTDOWN):
            tasks.finish(conn, tasks.of(conn, uuid), None, server.get("host"))
    return DONE


def _terminate_volume_connections(ctx: Context, uuid: str) -> Failed | None:
    """Nova's ``_terminate_volume_connections``: each volume keeps a reservation for the server (a new
    Cinder attachment without a connector, made before the old one is deleted), so that it stays the
    server's while no node has it; its connection forgotten. Cinder's refusal is tried again."""
    from openkeel_compute.volume import errors as volume_errors

    with reader(ctx.engine) as conn:
        rows = [r for r in block_device_rows.volumes_of(conn, uuid) if r["attachment_id"]]
    if not rows or ctx.volumes is None:
        return None
    calls = ctx.volumes.admin()
    for bdm in rows:
        try:
            old = calls.attachment_get(bdm["attachment_id"])
        except volume_errors.AttachmentNotFound:
            old = None
        except volume_errors.VolumeError as exc:
            return Failed(f"volume {bdm['volume_id']}: {exc.message}")
        if old is not None and old.get("status") == "reserved":
            continue  # reserved already (a pass that stopped after the swap)
        try:
            new = calls.attachment_create(bdm["volume_id"], uuid)
            with transaction(ctx.engine) as conn:
                block_device_rows.set_fields(conn, bdm["uuid"], attachment_id=new["id"], connection_info=None)
            if old is not None:
                calls.attachment_delete(old["id"])
        except volume_errors.VolumeError as exc:
            LOG.warning("server %s: volume %s not reserved for the offloaded server: %s", uuid, bdm["volume_id"],
                        exc.message)
            return Failed(f"volume {bdm['volume_id']}: {exc.message}")
    return None


def offload_due(ctx: Context, interval: float, now: dt.datetime) -> list[str]:
    """Nova's ``_poll_shelved_instances``: the SHELVED servers shelved longer than ``interval`` seconds
    are offloaded (task ``shelving_offloading``, an offload row without an instance action of its own)."""
    with reader(ctx.engine) as conn:
        rows = conn.execute(select(INSTANCES.c.uuid, INSTANCE_SYSTEM_METADATA.c.value).select_from(
            INSTANCES.join(INSTANCE_SYSTEM_METADATA, INSTANCE_SYSTEM_METADATA.c.instance_uuid == INSTANCES.c.uuid))
            .where(INSTANCES.c.deleted == 0, INSTANCES.c.vm_state == states.SHELVED,
                   INSTANCES.c.task_state.is_(None), INSTANCE_SYSTEM_METADATA.c.key == SHELVED_AT,
                   INSTANCE_SYSTEM_METADATA.c.deleted == 0)).all()
    done = []
    for uuid, shelved_at in rows:
        try:
            since = dt.datetime.fromisoformat(str(shelved_at))
        except ValueError:
            continue
        if (now.replace(tzinfo=None) - since.replace(tzinfo=None)).total_seconds() < interval:
            continue
        with transaction(ctx.engine) as conn:
            if cas.save_state(conn, uuid, expected_task_state=[None], vm_state=states.SHELVED,
                              task_state=task_states.SHELVING_OFFLOADING):
                updates.outbox(conn, uuid, ops.SHELVE_OFFLOAD, Actor(None, None))  # type: ignore[arg-type]
                done.append(uuid)
    return done


def unshelve(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    vm_state, task = server["vm_state"], server.get("task_state")
    image_id = server["system_metadata"].get(SHELVED_IMAGE_ID)
    if vm_state == states.SHELVED and task in (task_states.UNSHELVING, task_states.POWERING_ON):
        # Nova's conductor: a SHELVED server is only started (task powering-on, event compute_start_instance)
        if task == task_states.UNSHELVING:
            with transaction(ctx.engine) as conn:
                if not cas.save_state(conn, uuid, expected_task_state=task, task_state=task_states.POWERING_ON):
                    return DONE
        _start_event(ctx, row, server, events.START)
        vmi = ctx.cluster.vmi(namespace, uuid)
        if vmi_phase(vmi) != "Running":
            if vmi is None or vmi_phase(vmi) in FINAL_PHASES:
                ctx.cluster.subresource(namespace, server_vm_name(uuid), "start")
            return Waiting("waiting for the unshelved guest to run")
        _forget(ctx, uuid, image_id)  # the guest runs: the observation ends the task (ACTIVE)
        return DONE
    if task == task_states.UNSHELVING and vm_state == states.SHELVED_OFFLOADED:
        vm, vmi, _dvs = ctx.cluster.look(namespace, uuid)
        if vm is not None:
            _start_event(ctx, row, server)
        if vm is None:
            volume_backed = block_devices.volume_backed(server.get("block_devices") or ())
            if not image_id and not volume_backed:
                return _no_host(ctx, server, f"Instance {uuid} has no shelved image to unshelve from.")
            made = _boot(ctx, row, server, str(image_id) if image_id else None)
            if made is not None:
                return made
            return Waiting("waiting for the unshelved guest to run")
        if vmi_phase(vmi) != "Running":
            if vmi is None or vmi_phase(vmi) in FINAL_PHASES:
                ctx.cluster.subresource(namespace, server_vm_name(uuid), "start")
            return Waiting("waiting for the unshelved guest to run")
        _forget(ctx, uuid, image_id)  # the guest runs: the observation ends the task (ACTIVE)
        return DONE
    if vm_state == states.ACTIVE and task is None and image_id:
        _forget(ctx, uuid, image_id)  # the observation saw it run first
    return DONE  # deleted, failed or reset meanwhile: the shelved image stays, as Nova leaves it


def _start_event(ctx: Context, row: ServerRow, server: dict[str, Any], event: str = events.UNSHELVE) -> None:
    """The unshelve's event, once per row (the step's row outlives the task: the loop would start it again)."""
    if (server["system_metadata"].get(sysmeta.TASK_EVENT) or "").startswith(f"{row.id}:") or not row.request_id:
        return
    with transaction(ctx.engine) as conn:
        action_id = instance_actions.action_for_request(conn, row.server_uuid, row.request_id)
        if action_id is not None:
            event_id = instance_actions.start_event(conn, action_id, event)
            tasks.keep(conn, row.id, row.server_uuid, event_id)
            server["system_metadata"][sysmeta.TASK_EVENT] = f"{row.id}:{event_id}"


def _boot(ctx: Context, row: ServerRow, server: dict[str, Any], image_id: str | None) -> Outcome | None:
    """Claim again (the zone and host asked for) and make the VM from the shelved image (None: a
    volume-backed server, whose root is its volume); the volumes exported to the new node."""
    uuid = row.server_uuid
    wanted = dict(server, system_metadata=dict(server["system_metadata"]))
    if image_id is not None:
        wanted["image_ref"] = image_id
    if "availability_zone" in row.payload:
        wanted["availability_zone"] = row.payload["availability_zone"]
    if row.payload.get("host"):
        wanted["system_metadata"][sysmeta.REQUESTED_HOST] = row.payload["host"]
        wanted["system_metadata"].pop(sysmeta.REQUESTED_NODE, None)
    if image_id is not None:  # Nova's conductor reads the shelved image (a volume-backed one has none)
        unreadable = _read_image(ctx, row, server, image_id)
        if unreadable is not None:
            return unreadable
    if ctx.claims is not None:
        try:
            node, _alternates = ctx.claims.claim(wanted)
            node = placing.as_filters_allow(ctx, wanted, node, groups=False)  # the hints, as at the build
        except NoValidHost as exc:
            _conductor_event(ctx, row, "schedule_instances", exc.fault.message)
            return _no_host(ctx, server, exc.fault.message)
        wanted["host"] = wanted["node"] = node
        with transaction(ctx.engine) as conn:
            changes: dict[str, Any] = {"host": node, "node": node}
            if "availability_zone" in row.payload:
                changes["availability_zone"] = row.payload["availability_zone"]
            cas.save_state(conn, uuid, **changes)
    _conductor_event(ctx, row, "schedule_instances")
    _start_event(ctx, row, server)
    namespace, name = ctx.namespace_of(server), server_vm_name(uuid)
    ctx.ensure_namespace(namespace, str(server["project_id"]))
    if ports.wanted(ctx, server):  # the ports bound to the node claimed before the VM is made, as Nova's
        try:
            ports.bind_for_unshelve(ctx, wanted)
            info = ports.info_of(wanted) or []
            if info:
                attachments.ensure(ctx, namespace, ports.networks_of(ctx, info))
        except ports.AllocationFailed as exc:
            return _no_host(ctx, server, str(exc))
        except NeutronUnavailable as exc:  # tried again: the claim made is found again
            return Waiting(f"waiting for Neutron to bind the unshelved server's ports: {exc.message}")
    try:
        objects = ctx.objects(wanted)
    except ValueError as exc:
        return _no_host(ctx, server, str(exc))
    refused = volumes.prepare(ctx, wanted)  # Nova's _prep_block_device: the volumes exported to the node
    if refused:
        return _no_host(ctx, server, refused)
    if wanted.get("block_devices"):
        objects = ctx.objects(wanted)  # with the volumes' claims
    vm_edits.apply_server(ctx, objects, None)
    ctx.pass_state.placed.append((uuid, namespace, name))
    ctx.cluster.subresource(namespace, name, "start")
    volumes.complete(ctx, wanted)
    return None


def _read_image(ctx: Context, row: ServerRow, server: dict[str, Any], image_id: str) -> Failed | None:
    """Nova's conductor ``get_image_info`` before any claim: the image gone, the server in ERROR (its task
    kept), a 404 fault, the event failed, as Nova's leaves it; the image service away: tried again."""
    if ctx.objects.images is not None:
        glance, environ = ctx.objects.images.glance()
        try:
            glance.show(None, image_id, environ)
        except image_errors.ImageNotFound:
            message = f"Unshelve attempted but the image {image_id} cannot be found."
            fault = Fault(404, message, f"Image {image_id} could not be found.")
            _conductor_event(ctx, row, "get_image_info", message)
            with transaction(ctx.engine) as conn:
                if cas.save_state(conn, row.server_uuid, expected_task_state=task_states.UNSHELVING,
                                  vm_state=states.ERROR):
                    instance_faults.add_fault(conn, row.server_uuid, code=fault.code, message=message,
                                              details=fault.details)
            return Failed(message, fault)
        except image_errors.ImageError as exc:
            return Failed(f"the shelved image {image_id} could not be read: {exc.message}")
    _conductor_event(ctx, row, "get_image_info")
    return None


def _conductor_event(ctx: Context, row: ServerRow, event: str, error: str | None = None) -> None:
    """One of Nova's conductor events of an unshelve (started and finished at once; no host)."""
    if not row.request_id:
        return
    with transaction(ctx.engine) as conn:
        action_id = instance_actions.action_for_request(conn, row.server_uuid, row.request_id)
        if action_id is not None:
            event_id = instance_actions.start_event(conn, action_id, event)
            if error is None:
                instance_actions.finish_event(conn, event_id, "Success")
            else:
                instance_actions.finish_event(conn, event_id, "Error", traceback=error, details=error)


def _no_host(ctx: Context, server: dict[str, Any], message: str) -> Failed:
    """Nova's conductor when the unshelve finds no host: the task cleared, the server stays offloaded,
    the action's event failed; no fault."""
    uuid = server["uuid"]
    fault = Fault(400, message, message)
    if ctx.claims is not None:
        try:
            ctx.claims.release(uuid)
        except Exception:  # noqa: BLE001 - the audit gives back what no live server holds
            LOG.warning("server %s: its unshelve failed, its allocations not given back yet", uuid)
    with transaction(ctx.engine) as conn:
        if cas.save_state(conn, uuid, expected_task_state=task_states.UNSHELVING, task_state=None,
                          host=None, node=None):
            tasks.finish(conn, tasks.of(conn, uuid), fault, None)
    return Failed(message, fault)


def delete_image(ctx: Context, uuid: str, image_id: str | None) -> None:
    """The shelved image deleted (Nova logs what it cannot delete)."""
    if image_id and ctx.objects.images is not None:
        glance, environ = ctx.objects.images.glance()
        try:
            glance.delete(None, str(image_id), environ)
        except image_errors.ImageNotFound:
            pass
        except image_errors.ImageError as exc:
            LOG.warning("server %s: shelved image %s not deleted: %s", uuid, image_id, exc)


def _forget(ctx: Context, uuid: str, image_id: str | None) -> None:
    """The shelved image deleted and the ``shelved_*`` keys removed."""
    delete_image(ctx, uuid, image_id)
    with transaction(ctx.engine) as conn:
        for key in SHELVED_KEYS:
            instance_sysmeta.set_system_metadata_item(conn, uuid, key, None)


def on_delete(ctx: Context, server: dict[str, Any]) -> None:
    """A SHELVED or SHELVED_OFFLOADED server deleted: its shelved image deleted (what cannot be is logged)."""
    if server.get("vm_state") in (states.SHELVED, states.SHELVED_OFFLOADED):
        delete_image(ctx, server["uuid"], server["system_metadata"].get(SHELVED_IMAGE_ID))
