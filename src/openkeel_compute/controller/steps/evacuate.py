"""evacuate: the server of a failed node rebuilt on another one, as Nova's conductor and compute do it.

The API left the server in task ``rebuilding`` with an ``evacuation`` migration ``accepted`` (compute/
evacuation.py). Pass after pass, the migration's status and the server's task say what comes next:

- ``accepted``: a target is chosen as Nova's scheduler does (another node than the source, the named one
  if any, one the server's group allows: anti-affinity refuses a node holding a member, affinity keeps to
  the members' node) and its resources are claimed in Placement **beside** the source's, in the server's
  consumer (the source's part stays until the source comes back, as Nova's). The conductor's event
  ``rebuild_server`` is recorded, the migration becomes ``pre-migrating`` towards the target, and the
  compute's ``compute_rebuild_instance`` starts there. No node fits: the server ends in ERROR with Nova's
  "No valid host was found.", the migration ``error``.
- ``rebuilding``: the VM is stopped and its launcher pods left on the source are force-deleted (a failed
  node's kubelet never confirms they stopped: ``kubectl delete pod --force --grace-period=0``, what
  KubeVirt asks of an operator whose node died; the operator told Nova the node is down). Once the VM has
  no VMI it is made again from the server's record, pinned to the target: a new root disk imported from
  the server's image (the old one is not trusted: Nova rebuilds the disk of a host without shared
  storage), a volume-backed root kept (it is Cinder's), the ports bound to the target →
  ``rebuild_block_device_mapping``.
- ``rebuild_block_device_mapping``: the VM starts on the target; once its VMI runs there the server is
  ACTIVE, or, when it ends stopped (it was SHUTOFF, or 2.95's target state), SHUTOFF once the new disk is
  imported; its host and node are the target from then on (as Nova's ``finish_evacuation``), the
  migration is ``done``, the event finished.

When the source's compute service is up again, controller/compute_services.py gives its part of the
allocation back and completes the migration (Nova's compute does it when it starts).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from openkeel_compute.compute import compute_services, evacuation, server_groups
from openkeel_compute.compute.instances import cas, instance_actions, instance_faults
from openkeel_compute.controller import tasks
from openkeel_compute.controller.claims import NoValidHost
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps import placing, ports, vm_edits
from openkeel_compute.controller.steps.base import (
    DONE,
    FINAL_PHASES,
    Context,
    Failed,
    Outcome,
    ServerRow,
    Wait,
    vmi_phase,
)
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import rebuild_root_volume
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model.states import task_states

LOG = logging.getLogger(__name__)
CREATED_BY = "kubevirt.io/created-by"
_TASKS = (task_states.REBUILDING, task_states.REBUILD_BLOCK_DEVICE_MAPPING)


def _root(row: ServerRow) -> str:
    return rebuild_root_volume(row.server_uuid, row.request_id or str(row.id))


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    with reader(ctx.engine) as conn:
        migration = evacuation.migration(conn, row.payload["migration"])
    if migration is None or server.get("task_state") not in _TASKS:
        return DONE  # deleted or reset meanwhile: that task wins
    if migration["status"] == "accepted":
        ended = _claim(ctx, row, server, migration)
        if ended is not None:
            return ended
        with reader(ctx.engine) as conn:
            migration = evacuation.migration(conn, row.payload["migration"]) or migration
    if migration["status"] != "pre-migrating":
        return DONE
    dest = str(migration["dest_compute"])
    if server.get("task_state") == task_states.REBUILDING:
        _off_the_source(ctx, server, namespace, str(migration["source_compute"] or ""), dest)
        _make_on(ctx, row, server, namespace, dest)
        with transaction(ctx.engine) as conn:
            if not cas.save_state(conn, uuid, expected_task_state=task_states.REBUILDING,
                                  task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING):
                return DONE
        server.update(task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING)
    return _finish(ctx, row, server, namespace, dest)


def _ends_stopped(row: ServerRow) -> bool:
    """Nova: a SHUTOFF server is stopped again after its rebuild, and from 2.95 (target state stopped)
    every one is, except one in ERROR (spawned, ACTIVE)."""
    old = row.payload.get("old_vm_state")
    return old != states.ERROR and (old == states.STOPPED or row.payload.get("target_state") == states.STOPPED)


# --- the target ---------------------------------------------------------------------------------------

def _claim(ctx: Context, row: ServerRow, server: dict[str, Any], migration: dict[str, Any]) -> Outcome | None:
    uuid, source = row.server_uuid, server.get("node") or server.get("host")
    wanted = row.payload.get("host")
    with reader(ctx.engine) as conn:
        rule = server_groups.placement_rule(conn, uuid)
        known = compute_services.hosts(conn)
    group, hints = placing.group_filter(ctx, uuid), placing.hint_filter(ctx, server)

    def usable(node: str) -> bool:
        if node == source or node not in known or (wanted and node != wanted):
            return False
        return (group is None or group(node)) and (hints is None or hints(node))

    try:
        if ctx.claims is None:
            raise NoValidHost("Placement is not configured")
        node, refused = None, False
        if group is None and rule is not None:  # a soft policy weighs: a node it prefers first, then any
            node, refused = ctx.claims.add_on(server, lambda n: usable(n) and server_groups.allowed(*rule, n))
        if node is None:
            node, refused = ctx.claims.add_on(server, usable)
        if node is None:
            policy = f" that the {rule[0]} policy of the server's group allows" if group is not None and rule else ""
            where = f"{wanted}" if wanted else f"a node other than {source}"
            raise NoValidHost(f"No allocation candidates on {where}{policy}", filtered=refused)
    except NoValidHost as exc:
        return _no_valid_host(ctx, row, server, migration, exc)
    with transaction(ctx.engine) as conn:
        if not evacuation.move(conn, migration["uuid"], "pre-migrating", expected="accepted", dest_compute=node,
                               dest_node=node, dest_host=evacuation.host_ip(conn, node)):
            return DONE
        action_id = instance_actions.action_for_request(conn, uuid, row.request_id)
        if action_id is not None:
            event = instance_actions.start_event(conn, action_id, events.REBUILD_SERVER, host=None)
            instance_actions.finish_event(conn, event, "Success", host=None)
            tasks.keep(conn, row.id, uuid, instance_actions.start_event(conn, action_id, events.REBUILD, host=node))
    LOG.info("server %s: evacuated from %s to %s", uuid, source, node)
    return None


def _no_valid_host(ctx: Context, row: ServerRow, server: dict[str, Any], migration: dict[str, Any],
                   exc: NoValidHost) -> Outcome:
    """Nova's conductor when the scheduler finds no host: the server in ERROR with the fault, the
    migration in error, the conductor's event failed; nothing was claimed."""
    uuid = row.server_uuid
    with transaction(ctx.engine) as conn:
        if not cas.save_state(conn, uuid, expected_task_state=task_states.REBUILDING, vm_state=states.ERROR,
                              task_state=None):
            return DONE
        evacuation.move(conn, migration["uuid"], "error")
        instance_faults.add_fault(conn, uuid, code=exc.fault.code, message=exc.fault.message,
                                  details=exc.fault.details, host=server.get("host"))
        action_id = instance_actions.action_for_request(conn, uuid, row.request_id)
        if action_id is not None:
            event = instance_actions.start_event(conn, action_id, events.REBUILD_SERVER, host=None)
            instance_actions.finish_event(conn, event, "Error", host=None, traceback=str(exc),
                                          details=exc.fault.message)
    return Failed(f"evacuation not possible: {exc}", exc.fault)


# --- the cluster ----------------------------------------------------------------------------------------

def _off_the_source(ctx: Context, server: dict[str, Any], namespace: str, source: str, dest: str) -> None:
    """The VM stopped and its launcher pods that are not on the target gone (forced: their node cannot
    confirm it); waits (``Wait``) while the VM still has a VMI."""
    uuid = server["uuid"]
    _vm, vmi, _dvs = ctx.cluster.look(namespace, uuid)
    if vmi is None:
        return
    if vmi_phase(vmi) not in FINAL_PHASES:
        ctx.cluster.subresource(namespace, server_vm_name(uuid), "stop")
    force_delete_launchers(ctx, namespace, uuid, vmi, lambda node: (node or source) != dest)
    raise Wait("waiting for the server's virtual machine to leave its failed node")


def force_delete_launchers(ctx: Context, namespace: str, uuid: str, vmi: dict[str, Any],
                           failed: Callable[[str | None], bool]) -> list[str]:
    """``kubectl delete pod --force --grace-period=0`` of the VMI's launcher pods whose node (None: not
    scheduled) is ``failed``: their kubelet cannot confirm they stopped, so a graceful delete would leave
    them Terminating (and the VMI with them) until the node comes back. Returns the pods deleted."""
    uid = (vmi.get("metadata") or {}).get("uid")
    forced = []
    for pod in ctx.cluster.pods(namespace, {CREATED_BY: uid}) if uid else []:
        node = (pod.get("spec") or {}).get("nodeName")
        if failed(node):
            LOG.info("server %s: launcher pod %s on %s deleted (forced)", uuid, pod["metadata"]["name"], node)
            ctx.cluster.force_delete_pod(namespace, pod["metadata"]["name"])
            forced.append(pod["metadata"]["name"])
    return forced


def _make_on(ctx: Context, row: ServerRow, server: dict[str, Any], namespace: str, dest: str) -> None:
    """The VM made again from the server's record, pinned to ``dest``: a new root disk from the image (a
    volume-backed root stays), the old root disks deleted, the ports bound to ``dest``."""
    uuid, root = row.server_uuid, _root(row)
    placed = {**server, "host": dest, "node": dest}
    ports.follow(ctx, server, dest)
    ctx.ensure_namespace(namespace, str(server["project_id"]))
    objects = ctx.objects(placed, root_volume=root)
    vm, _vmi, dvs = ctx.cluster.look(namespace, uuid)
    vm_edits.apply_server(ctx, objects, vm)
    if (server.get("system_metadata") or {}).get(sysmeta.BOOT_FROM_VOLUME) != "True":
        for dv in dvs:
            name = (dv.get("metadata") or {}).get("name")
            if name and name != root:
                ctx.cluster.delete(ObjectKey("DataVolume", namespace, name))


def _finish(ctx: Context, row: ServerRow, server: dict[str, Any], namespace: str, dest: str) -> Outcome:
    uuid = row.server_uuid
    vm, vmi, dvs = ctx.cluster.look(namespace, uuid)
    if vm is None:
        raise Wait("the server has no VirtualMachine yet")
    if _ends_stopped(row):
        root = _root(row)
        phase = next((((dv.get("status") or {}).get("phase")) for dv in dvs
                      if (dv.get("metadata") or {}).get("name") == root), "Succeeded")
        if phase == "Failed":
            return _failed(ctx, row, f"the new root disk {root} could not be imported", dest)
        if phase != "Succeeded":
            raise Wait("waiting for the new root disk to be imported")
        vm_state, power = states.STOPPED, states.power_state.SHUTDOWN
    else:
        node = ((vmi or {}).get("status") or {}).get("nodeName")
        if vmi_phase(vmi) != "Running" or node != dest:
            if vmi_phase(vmi) == "Failed":
                return _failed(ctx, row, f"the virtual machine failed on {dest}", dest)
            vm_edits.start_if_stopped(ctx, namespace, uuid, vm, vmi)
            raise Wait(f"waiting for the server's virtual machine to run on {dest}")
        vm_state, power = states.ACTIVE, states.power_state.RUNNING
    with transaction(ctx.engine) as conn:
        if not cas.save_state(conn, uuid, expected_task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING,
                              vm_state=vm_state, task_state=None, power_state=power, host=dest, node=dest):
            return DONE
        evacuation.move(conn, row.payload["migration"], "done", expected="pre-migrating")
        tasks.finish(conn, tasks.of(conn, uuid), None, host=dest)
    return DONE


def _failed(ctx: Context, row: ServerRow, reason: str, dest: str | None) -> Outcome:
    """Nova's compute when the rebuild on the target fails: the migration ``failed``, the target's part
    of the allocation given back (``dest``: the target claimed, None when none was), the server in ERROR
    with the fault, the event failed."""
    uuid = row.server_uuid
    message = f"Evacuation of instance {uuid} failed: {reason}"
    fault = Fault(500, message, "")
    if ctx.claims is not None and dest:
        ctx.claims.drop_node(uuid, dest)
    with transaction(ctx.engine) as conn:
        if not cas.save_state(conn, uuid, expected_task_state=list(_TASKS), vm_state=states.ERROR,
                              task_state=None):
            return DONE
        evacuation.move(conn, row.payload["migration"], "failed" if dest else "error")
        instance_faults.add_fault(conn, uuid, code=500, message=message, details="", host=dest)
        tasks.finish(conn, tasks.of(conn, uuid), fault, host=dest)
    return Failed(message, fault)


def give_up(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """Attempts spent (the cluster or Placement kept failing): the evacuation ends as a failed rebuild."""
    with reader(ctx.engine) as conn:
        migration = evacuation.migration(conn, row.payload["migration"]) or {}
    dest = migration.get("dest_compute") if migration.get("status") == "pre-migrating" else None
    ended = _failed(ctx, row, reason, dest)
    return ended if isinstance(ended, Failed) else Failed(reason, Fault(500, reason, ""))
