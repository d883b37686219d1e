"""revert-resize (task ``resize_reverting``): the VM stopped, its matchers patched back to the old names
*with* their revision names (the old flavor and its instancetype may have been deleted meanwhile: the
revision is all KubeVirt needs), the old flavor's disks back, the VM back on its node and started if the
server ran before the resize → ``active`` / ``stopped``; the migration's allocation back on the server, and
the server's own instancetype and preference of the new flavor deleted. With Neutron ports, their bindings
follow the server back, and a running server waits for network-vif-plugged of each port Neutron then shows
not ACTIVE (steps/vif_wait.py ``after_rebinding``), as Nova's ``finish_revert_migration`` does; a plug that
never comes with ``vif_plugging_is_fatal`` ends the revert in ERROR ("Virtual Interface creation failed")."""

from __future__ import annotations

import json
import logging
from typing import Any

from openkeel_compute.compute import resize, working_state
from openkeel_compute.compute.instances import cas, store
from openkeel_compute.controller import tasks
from openkeel_compute.controller.steps import ports, vif_wait, vm_edits
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
from openkeel_compute.controller.steps.resize import end_event, start_event
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model.states import task_states

LOG = logging.getLogger(__name__)
_BACK = "waiting for KubeVirt to take the old instancetype back"


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    if server.get("task_state") != task_states.RESIZE_REVERTING:
        return DONE
    with reader(ctx.engine) as conn:
        before = json.loads(working_state.get(conn, uuid, sysmeta.RESIZE_FROM) or "{}")
        old_vm_state = resize.sysmeta(conn, uuid, sysmeta.OLD_VM_STATE)
        started = resize.sysmeta(conn, uuid, sysmeta.RESIZE_STEP_EVENT)
    if not started:
        with transaction(ctx.engine) as conn:
            start_event(conn, row, events.REVERT_RESIZE, done=True, host=server.get("host"))
            start_event(conn, row, events.FINISH_REVERT_RESIZE, host=server.get("host"))
    vm, vmi, _dvs = ctx.cluster.look(namespace, uuid)
    nodes = vm_edits.resize_nodes(server)
    source, dest = nodes.get("source"), nodes.get("dest")
    moved = bool(source and source != dest)
    # The resize moved the server and its old node was deleted since: it reverts where it runs, as a
    # resize allowed to stay on its node would have (pinned to the gone node it would never run again).
    home = dest if moved and not ctx.cluster.node_exists(str(source)) else source
    if vm is None:
        _make_again_at_the_old_size(ctx, server, namespace, home if moved else None)
        raise Wait("the server's VirtualMachine was made again from its record at its old size")
    old_it = (before.get("instancetype") or {}).get("matcher")
    if old_it and ((vm.get("spec") or {}).get("instancetype") or {}).get("name") != old_it.get("name"):
        _put_back(ctx, server, namespace, vm, vmi, before, home if moved else None)
        raise Wait(_BACK)
    if old_it and vm_edits.status_ref(vm, "instancetype").get("name") != old_it.get("name"):
        raise Wait(_BACK)
    if moved and home == source and vm_edits.pinned_node(vm) != home:
        # a cold migration (the same flavor: no matcher to put back) still runs on its new node
        _put_back(ctx, server, namespace, vm, vmi, before, home)
        raise Wait("waiting for the VM to be back on its node")
    running = old_vm_state != states.STOPPED
    if moved and home != source and vmi is None:  # the old node went after the VM was pinned to it
        vm_edits.pin(ctx, namespace, uuid, vm, str(home))
        vm = ctx.cluster.look(namespace, uuid)[0] or vm
    if running and vmi_phase(vmi) != "Running":
        vm_edits.start_if_stopped(ctx, namespace, uuid, vm, vmi)
        raise Wait("waiting for the server's virtual machine to run")
    if not running and vmi_phase(vmi) not in (None, *FINAL_PHASES):
        vm_edits.stop(ctx, namespace, uuid, vmi)
    node = ((vmi or {}).get("status") or {}).get("nodeName") if running else home
    power = states.power_state.RUNNING if running else states.power_state.SHUTDOWN
    ports.follow(ctx, server, node)  # Neutron's bindings back on the node the server runs on
    if running:  # the guest waits for its ports plugged again, as Nova's finish_revert_migration
        plugged = vif_wait.after_rebinding(ctx, row, server, give_up)
        if plugged is not DONE:
            return plugged
    ctx.allocations.revert(uuid, row.payload["migration"], in_place=home != source)
    with transaction(ctx.engine) as conn:
        if resize.reverted(conn, uuid, row.payload["migration"], power_state=power):
            working_state.put(conn, uuid, sysmeta.RESIZE_FROM, None)
            working_state.put(conn, uuid, sysmeta.RESIZE_NODES, None)
            if node and node != server.get("node"):
                cas.save_state(conn, uuid, host=node, node=node)
            end_event(conn, uuid, host=node or server.get("host"))
    vm_edits.drop_unused_sizing(ctx, namespace, uuid, vm)  # the new size's own objects
    return DONE


def _make_again_at_the_old_size(ctx: Context, server: dict[str, Any], namespace: str, home: str | None) -> None:
    """The VM gone from the cluster (removed behind our back): made again from the server's record on the
    old flavor (its own instancetype and preference of that size, its Secrets, a root disk imported again
    from its image), as a hard reboot makes it again on the current one; pinned to ``home`` when the
    resize moved it. Its matchers become the ones the revert waits for (the old revisions went with the
    old VM)."""
    uuid = server["uuid"]
    copy = store.flavors_of(server)
    LOG.warning("server %s: its virtual machine is gone from the cluster: made again from the server's record "
                "at its old size to revert the resize", uuid)
    ctx.ensure_namespace(namespace, str(server["project_id"]))
    made = vm_edits.apply_server(ctx, ctx.objects(server, flavor=copy.old or copy.cur), None)
    if home is not None:
        vm_edits.pin(ctx, namespace, uuid, made, home)
    spec = made.get("spec") or {}
    before = {field: {"matcher": spec.get(field), "revision": None} for field in vm_edits.MATCHERS}
    with transaction(ctx.engine) as conn:
        working_state.put(conn, uuid, sysmeta.RESIZE_FROM, json.dumps(before, sort_keys=True))


def give_up(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """A revert (or confirm) whose attempts are spent ends as Nova's compute ends one that raised
    (errors_out_migration, _error_out_instance_on_exception): the server in ERROR with the fault, no task,
    the migration in ``error``. The allocations stay as they are (what holds which is not known), given
    back when the server is deleted, as in Nova."""
    fault = Fault(500, reason, reason)
    with transaction(ctx.engine) as conn:
        if tasks.end_in_fault(conn, server, fault, expected=[server.get("task_state")], vm_state=states.ERROR,
                              host=server.get("host")):
            resize.move_migration(conn, row.payload["migration"], "error")
            end_event(conn, server["uuid"], result="Error", host=server.get("host"), message=reason)
            working_state.put(conn, server["uuid"], sysmeta.RESIZE_FROM, None)
            working_state.put(conn, server["uuid"], sysmeta.RESIZE_NODES, None)
    return Failed(reason, fault)


def _put_back(ctx: Context, server: dict[str, Any], namespace: str, vm: dict[str, Any], vmi: dict[str, Any] | None,
              before: dict[str, Any], home: str | None) -> None:
    """Stop the VM, then patch its matchers (with their revisions) and disks back; pin it to ``home``."""
    uuid = server["uuid"]
    vm_edits.stop(ctx, namespace, uuid, vmi)
    spec = vm.get("spec") or {}
    wanted: dict[str, dict[str, Any] | None] = {}
    for field in vm_edits.MATCHERS:
        matcher = (before.get(field) or {}).get("matcher")
        revision = (before.get(field) or {}).get("revision")
        if matcher is None:
            wanted[field] = None
            continue
        matcher = {k: v for k, v in matcher.items() if k != "revisionName"}
        if revision:
            matcher["revisionName"] = revision
        if spec.get(field) != matcher:
            wanted[field] = matcher
    vm_edits.patch(ctx, namespace, uuid, vm_edits.matcher_patch(vm, wanted))
    copy = store.flavors_of(server)
    if copy.old:
        vm_edits.set_flavor_disks(ctx, namespace, uuid, server, ctx.cluster.look(namespace, uuid)[0] or vm, copy.old)
    if home is not None:
        vm_edits.pin(ctx, namespace, uuid, ctx.cluster.look(namespace, uuid)[0] or vm, home)
