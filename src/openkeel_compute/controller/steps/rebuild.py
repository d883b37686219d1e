"""rebuild: a new root disk from the new image (docs/servers.md, "Rebuild").

Pass after pass, the server's task says where it is: ``rebuilding``: the VM is stopped; once its VMI is
gone the VM is applied with a new root DataVolume from the new image and the old disk deleted
(``rebuild_block_device_mapping``, event ``compute_rebuild_instance``); then the VM starts again
(``rebuild_spawning``, which the observation ends ACTIVE once it runs), or, for a server rebuilt while
SHUTOFF, it stays stopped and the task ends here once the new disk is imported, as Nova does. With Neutron
ports, the guest started again waits in ``rebuild_spawning`` for network-vif-plugged of each port the
network info shows unplugged (a network-vif-unplugged came while the guest was stopped, or it was never
plugged), as Nova's spawn waits for the ports its network info shows inactive (``vif_plugging_timeout``;
fatal: ERROR with "Virtual Interface creation failed"). A volume-backed server keeps its root volume (no
new disk is imported: the VM is recreated on the volume's claim); from 2.93 Cinder first writes the new
image into that volume (steps/reimage.py)."""

from __future__ import annotations

import logging
from typing import Any

from openkeel_compute.compute.instances import cas, instance_actions, instance_faults
from openkeel_compute.controller import tasks
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps import ports, power, reimage, vif_wait, vm_edits, volumes
from openkeel_compute.controller.steps.base import (
    DONE,
    FINAL_PHASES,
    Context,
    Failed,
    Outcome,
    ServerRow,
    Waiting,
)
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import rebuild_root_volume
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model.states import task_states

LOG = logging.getLogger(__name__)


def _root(row: ServerRow) -> str:
    return rebuild_root_volume(row.server_uuid, row.request_id or str(row.id))


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    task = server.get("task_state")
    if task == task_states.REBUILDING:
        _start_event(ctx, row, server)
        vm, vmi, dvs = ctx.cluster.look(namespace, uuid)
        if vmi is not None and ((vmi.get("status") or {}).get("phase")) not in FINAL_PHASES:
            ctx.cluster.subresource(namespace, server_vm_name(uuid), "stop")
            return Waiting("waiting for the server's virtual machine to stop before its root disk is replaced")
        reimaged = bool(row.payload.get("reimage_volume"))
        if reimaged:  # 2.93: Cinder writes the image into the root volume first (steps/reimage.py)
            outcome = reimage.run(ctx, row, server)
            if outcome is not None:
                return outcome
            refused = volumes.prepare(ctx, server)  # exported again on its new attachment, its claim made again
            if refused is not None:
                return reimage.fail(ctx, row, server, refused)
        _replace_root_disk(ctx, row, server, namespace, vm, dvs)
        if reimaged:
            _complete_root(ctx, server)
        with transaction(ctx.engine) as conn:
            if not cas.save_state(conn, uuid, expected_task_state=task_states.REBUILDING,
                                  task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING):
                return DONE  # deleted or reset meanwhile: that task wins
        task = task_states.REBUILD_BLOCK_DEVICE_MAPPING
    if task == task_states.REBUILD_SPAWNING and server["system_metadata"].get(sysmeta.VIF_WAIT):
        return vif_wait.check(ctx, row, server, _plug_failed, bind=False)
    if task != task_states.REBUILD_BLOCK_DEVICE_MAPPING:
        return DONE  # no longer this rebuild's to finish
    if row.payload.get("old_vm_state") == states.STOPPED:
        return _end_stopped(ctx, row, server, namespace)
    ctx.cluster.subresource(namespace, server_vm_name(uuid), "start")
    unplugged = [vif for vif in ports.info_of(server) or [] if not vif.get("active")] \
        if ports.wanted(ctx, server) else []
    with transaction(ctx.engine) as conn:
        cas.save_state(conn, uuid, expected_task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING,
                       task_state=task_states.REBUILD_SPAWNING)
    if unplugged:  # Nova's spawn waits for network-vif-plugged of the ports its network info shows unplugged
        return vif_wait.begin(ctx, server, unplugged)
    return DONE


def _start_event(ctx: Context, row: ServerRow, server: dict[str, Any]) -> None:
    """The rebuild's compute event, started once (kept as the task's), before the guest is stopped: Nova's
    compute sends rebuild.start with the server still ``rebuilding``, then does the work."""
    if (server["system_metadata"].get(sysmeta.TASK_EVENT) or "").split(":", 1)[0] == str(row.id):
        return
    with transaction(ctx.engine) as conn:
        action_id = instance_actions.action_for_request(conn, row.server_uuid, row.request_id)
        if action_id is not None:
            value = instance_actions.start_event(conn, action_id, events.REBUILD)
            tasks.keep(conn, row.id, row.server_uuid, value)
            server["system_metadata"][sysmeta.TASK_EVENT] = f"{row.id}:{value}"


def _plug_failed(ctx: Context, row: ServerRow, server: dict[str, Any], _reason: str) -> Failed:
    """A port never plugged again with ``vif_plugging_is_fatal``: the rebuild ends in ERROR with Nova's
    VirtualInterfaceCreateException, as its compute ends a rebuild whose spawn raised."""
    return power.give_up_in_error(ctx, row, {**server, "task_state": task_states.REBUILD_SPAWNING},
                                  vif_wait.VIF_CREATE_FAILED)


def _end_stopped(ctx: Context, row: ServerRow, server: dict[str, Any], namespace: str) -> Outcome:
    """Done once the new disk is there, as Nova's rebuild of a stopped server ends after the spawn: the
    disk is imported, the guest is off."""
    uuid, root = row.server_uuid, _root(row)
    _vm, _vmi, dvs = ctx.cluster.look(namespace, uuid)
    phase = "Succeeded" if reimage.root_of(server) is not None else next((((dv.get("status") or {}).get("phase")) for dv in dvs
                  if (dv.get("metadata") or {}).get("name") == root), None)
    expected = task_states.REBUILD_BLOCK_DEVICE_MAPPING
    if phase == "Failed":
        message = f"Rebuild of instance {uuid} failed: the new root disk could not be imported"
        fault = Fault(500, message, f"KubeVirt: DataVolume {root} Failed")
        with transaction(ctx.engine) as conn:
            if not cas.save_state(conn, uuid, expected_task_state=expected, vm_state=states.ERROR,
                                  task_state=None):
                return DONE  # another task took over
            instance_faults.add_fault(conn, uuid, code=fault.code, message=message, details=fault.details,
                                      host=server.get("host"))
            tasks.finish(conn, tasks.of(conn, uuid), Fault(500, message, ""))
        return Failed(message, fault)
    if phase != "Succeeded":
        return Waiting("waiting for the new root disk to be imported")
    with transaction(ctx.engine) as conn:
        if cas.save_state(conn, uuid, expected_task_state=expected, vm_state=states.STOPPED, task_state=None,
                          power_state=states.power_state.SHUTDOWN):
            tasks.finish(conn, tasks.of(conn, uuid), None)
    return DONE


def _complete_root(ctx: Context, server: dict[str, Any]) -> None:
    """The root volume's new attachment completed: Cinder shows it ``in-use`` by the server again."""
    from openkeel_compute.volume import errors as volume_errors

    root = reimage.root_of(server)
    if root is None or ctx.volumes is None:
        return
    try:
        ctx.volumes.admin().attachment_complete(str(root["attachment_id"]))
    except volume_errors.VolumeError as exc:
        LOG.warning("server %s: attachment of volume %s not completed: %s", server["uuid"], root["volume_id"],
                    exc.message)


def _replace_root_disk(ctx: Context, row: ServerRow, server: dict[str, Any], namespace: str,
                       vm: dict[str, Any] | None, dvs: list[dict[str, Any]]) -> None:
    uuid, root = row.server_uuid, _root(row)
    objects = ctx.objects(server, root_volume=root)
    ctx.cluster.ensure_namespace(namespace, str(server["project_id"]))
    vm_edits.apply_server(ctx, objects, vm)
    for dv in dvs:
        name = (dv.get("metadata") or {}).get("name")
        if name and name != root:
            ctx.cluster.delete(ObjectKey("DataVolume", namespace, name))
    wanted = {s["metadata"]["name"] for s in objects.secrets}
    for secret in ctx.cluster.secrets_of(namespace, uuid):
        if secret not in wanted:  # a key pair the rebuild removed
            ctx.cluster.delete(ObjectKey("Secret", namespace, secret))
