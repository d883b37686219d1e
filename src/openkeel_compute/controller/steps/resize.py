"""resize: a cold resize as Nova's compute service does it, on KubeVirt instancetypes (docs/servers.md).

Tried pass after pass; the server's task_state says which step comes next (a restarted controller
carries on where it was), and a step waits while the cluster has not got there yet:

A cold migration (``migrate``) is this same resize to the server's own flavor (payload ``cold``): its claim
never stays on the server's node (``host``: only that node), and without Placement the node is one the
cluster can use (placing.another_node); the VM is pinned there and started again.

- ``resize_prep``: the VM's matchers and the ControllerRevisions its status names are kept in the
  controller's working state of the server (compute/working_state.py: what a revert needs), the new flavor is claimed in Placement
  (resize_allocations.py) → ``resize_migrating`` (migration ``migrating``);
- ``resize_migrating``: the VM is stopped; once it has no VMI → ``resize_migrated`` (``post-migrating``);
- ``resize_migrated``: the server's own instancetype and preference of the new flavor are applied in its
  namespace (owned by its VM), then one JSON patch (``test`` the matchers read, then replace them)
  points the VM at them; the root disk's claim grows if the new flavor's disk
  is larger; the VM is pinned to the claimed node and started again if it ran before → ``resize_finish``;
- ``resize_finish``: once ``status.instancetypeRef`` names the new instancetype (and the VMI runs,
  when it ran before) → vm_state ``resized`` (VERIFY_RESIZE), migration ``finished``.

The resize's events are kept under ``model.sysmeta.RESIZE_STEP_EVENT`` (not the task event: sysmeta.py
says why). confirm.py and revert.py end the resize.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy import Connection

from openkeel_compute.compute import resize, working_state
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.compute.instances import cas, instance_actions, instance_faults, store
from openkeel_compute.controller.claims import NO_VALID_HOST, NoValidHost
from openkeel_compute.controller.steps import placing, ports, vm_edits
from openkeel_compute.controller.steps.base import DONE, Context, Failed, Outcome, ServerRow, Wait, vmi_phase
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model.states import task_states
from openkeel_compute.placement.errors import PlacementUnavailable

LOG = logging.getLogger(__name__)
# the statuses of a resize not yet over
OPEN = ("pre-migrating", "migrating", "post-migrating", "finished", "confirming", "reverting")
# the statuses of a live migration not yet over (compute/live_migration.py): closed the same way on delete
LIVE_OPEN = ("accepted", "queued", "preparing", "running")


class Moot(Exception):
    """Raised in a transaction whose server another task took meanwhile: rolled back, nothing recorded."""


def start_event(conn: Connection, row: ServerRow, name: str, *, done: bool = False, host: str | None = None) -> None:
    """Start event ``name`` in the request's action: finished at once with ``done``, else the step's."""
    action_id = instance_actions.action_for_request(conn, row.server_uuid, row.request_id)
    if action_id is None:
        return
    event_id = instance_actions.start_event(conn, action_id, name, host=host)
    if done:
        instance_actions.finish_event(conn, event_id, "Success", host=host)
    else:
        resize.set_sysmeta(conn, row.server_uuid, sysmeta.RESIZE_STEP_EVENT, str(event_id))


def end_event(conn: Connection, uuid: str, *, result: str = "Success", host: str | None = None,
              message: str | None = None) -> None:
    """Finish the running resize step's event."""
    value = resize.sysmeta(conn, uuid, sysmeta.RESIZE_STEP_EVENT)
    if value:
        instance_actions.finish_event(conn, int(value), result, host=host, traceback=message, details=message)
        resize.set_sysmeta(conn, uuid, sysmeta.RESIZE_STEP_EVENT, None)


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    migration = row.payload["migration"]
    task = server.get("task_state")
    vm, vmi, _dvs = ctx.cluster.look(namespace, uuid)
    if task == task_states.RESIZE_PREP:
        if vm is None:  # gone from the cluster (a resize is asked of a server that ran): made again first
            placing.make_again(ctx, server)
            raise Wait("the server's VirtualMachine was made again from its record")
        try:
            ended = _prepare(ctx, row, server, vm, migration)
        except Moot:
            return DONE
        if ended is not None:
            return ended
        task = task_states.RESIZE_MIGRATING
    if task == task_states.RESIZE_MIGRATING:
        vm_edits.stop(ctx, namespace, uuid, vmi)
        with transaction(ctx.engine) as conn:
            if not cas.save_state(conn, uuid, expected_task_state=task_states.RESIZE_MIGRATING,
                                  task_state=task_states.RESIZE_MIGRATED,
                                  power_state=states.power_state.SHUTDOWN):
                return DONE
            resize.move_migration(conn, migration, "post-migrating")
            end_event(conn, uuid, host=server.get("host"))
        task = task_states.RESIZE_MIGRATED
    copy = store.flavors_of(server)
    if task == task_states.RESIZE_MIGRATED:
        if vm is None:
            raise Wait("the server has no VirtualMachine")
        wanted = vm_edits.new_matchers(ctx, server, copy.new or copy.cur, vm)
        vm_edits.patch(ctx, namespace, uuid, vm_edits.matcher_patch(
            vm, {k: v for k, v in wanted.items() if (vm.get("spec") or {}).get(k) != v}))
        vm_edits.grow_root_disk(ctx, namespace, uuid, copy.old or copy.cur, copy.new or copy.cur)
        vm_edits.set_flavor_disks(ctx, namespace, uuid, server, ctx.cluster.look(namespace, uuid)[0] or vm,
                                  copy.new or copy.cur)
        dest = vm_edits.resize_nodes(server).get("dest")
        if dest:
            vm_edits.pin(ctx, namespace, uuid, vm, dest)
        with transaction(ctx.engine) as conn:
            # Nova's finish_resize: the new flavor the server's, resize_finish, then finish_resize.start
            if not resize.finishing(conn, uuid):
                return DONE
            start_event(conn, row, events.FINISH_RESIZE, host=server.get("host"))
        if row.payload.get("old_vm_state") != states.STOPPED:
            ctx.cluster.subresource(namespace, server_vm_name(uuid), "start")
        raise Wait("waiting for the VM on its new instancetype")
    if task != task_states.RESIZE_FINISH:
        return DONE  # no longer this resize's to finish
    return _finish(ctx, row, server, vm, vmi, copy)


def _prepare(ctx: Context, row: ServerRow, server: dict[str, Any], vm: dict[str, Any],
             migration: str) -> Outcome | None:
    """The resize's claim and bookkeeping, ``resize_prep`` → ``resize_migrating``. None when the resize
    moved on; else how the row ends (Failed: no node may take the new flavor; DONE: another task won)."""
    uuid = row.server_uuid
    spec = vm.get("spec") or {}
    before = {field: {"matcher": spec.get(field),
                      "revision": (vm_edits.status_ref(vm, field).get("controllerRevisionRef") or {}).get("name")}
              for field in vm_edits.MATCHERS}
    copy = store.flavors_of(server)
    image = image_from_system_metadata({k: v for k, v in (server.get("system_metadata") or {}).items()
                                        if k.startswith(sysmeta.IMAGE_PREFIX)})
    cold, named = bool(row.payload.get("cold")), row.payload.get("host")
    try:
        new_flavor = copy.new or copy.cur
        if (server.get("system_metadata") or {}).get(sysmeta.BOOT_FROM_VOLUME) == "True":
            new_flavor = dict(new_flavor, root_gb=0)  # the root disk is a volume: not claimed (Nova's is_bfv)
        provider = ctx.allocations.resize(uuid, migration, new_flavor,
                                          image_properties=image.get("properties"),
                                          zone=server.get("availability_zone"), cold=cold, node=named,
                                          usable=placing.move_filter(ctx, server, copy.new or copy.cur))
        dest = None
        if provider:
            dest = ctx.claims.node_of(provider) if ctx.claims is not None else ctx.allocations.node_of(provider)
        elif cold:  # nothing claimed in Placement (none configured): another node the cluster can use
            dest = placing.another_node(ctx, server, named)
    except NoValidHost as exc:
        return _no_valid_host(ctx, row, server, migration, exc)
    with transaction(ctx.engine) as conn:
        host = server.get("host")
        for name in events.BEFORE_RESIZE:  # done with the server still resize_prep (their notifications show it)
            start_event(conn, row, name, done=True, host=host)
        if not cas.save_state(conn, uuid, expected_task_state=task_states.RESIZE_PREP,
                              task_state=task_states.RESIZE_MIGRATING):
            raise Moot  # deleted or reset meanwhile: nothing recorded
        working_state.put(conn, uuid, sysmeta.RESIZE_FROM, json.dumps(before, sort_keys=True))
        if dest:
            nodes = json.dumps({"source": server.get("node"), "dest": dest}, sort_keys=True)
            working_state.put(conn, uuid, sysmeta.RESIZE_NODES, nodes)
            # the later steps of this same pass read it from here (a stopped server goes on at once)
            server.setdefault("working_state", {})[sysmeta.RESIZE_NODES] = nodes
        resize.move_migration(conn, migration, "migrating", **(
            {"dest_compute": dest, "dest_node": dest} if cold and dest else {}))
        start_event(conn, row, events.RESIZE, host=host)
    return None


def _finish(ctx: Context, row: ServerRow, server: dict[str, Any], vm: dict[str, Any] | None,
            vmi: dict[str, Any] | None, copy: Any) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    if vm is None:
        raise Wait("the server has no VirtualMachine")
    wanted = vm_edits.wanted_matchers(ctx, server, copy.new or copy.cur)
    if vm_edits.status_ref(vm, "instancetype").get("name") != (wanted["instancetype"] or {}).get("name"):
        raise Wait("waiting for KubeVirt to record the new instancetype")
    running = row.payload.get("old_vm_state") != states.STOPPED
    if running and vmi_phase(vmi) != "Running":
        vm_edits.start_if_stopped(ctx, namespace, uuid, vm, vmi)
        raise Wait("waiting for the server's virtual machine to run")
    node = ((vmi or {}).get("status") or {}).get("nodeName") if running else vm_edits.resize_nodes(server).get("dest")
    power = states.power_state.RUNNING if running else states.power_state.SHUTDOWN
    ports.follow(ctx, server, node)  # Neutron's bindings on the node the server now runs on
    with transaction(ctx.engine) as conn:
        if resize.finish(conn, uuid, row.payload["migration"], power_state=power, host=node):
            end_event(conn, uuid, host=node or server.get("host"))
    return DONE


def _no_valid_host(ctx: Context, row: ServerRow, server: dict[str, Any], migration: str,
                   exc: NoValidHost) -> Outcome:
    """No node may take the new flavor: the resize ends as Nova's conductor ends it, the server back in
    its state with its flavor, the migration in error, the fault recorded."""
    uuid = server["uuid"]
    cold = bool(row.payload.get("cold"))
    with transaction(ctx.engine) as conn:
        if not resize.failed(conn, uuid, migration, expected_task_state=task_states.RESIZE_PREP):
            return DONE
        instance_faults.add_fault(conn, uuid, code=exc.fault.code, message=exc.fault.message, details=exc.fault.details)
        if cold:  # Nova's conductor: both events fail with the reason it raises again
            for name in (events.CONDUCTOR_MIGRATE, events.COLD_MIGRATE):
                start_event(conn, row, name)
                end_event(conn, uuid, result="Error", message=NO_VALID_HOST + "No valid host found for cold migrate")
        else:
            start_event(conn, row, events.CONDUCTOR_MIGRATE)
            end_event(conn, uuid, result="Error", message=exc.fault.message)
    return Failed(f"{'migration' if cold else 'resize'} not possible: {exc}", exc.fault)


def close_on_delete(ctx: Context, uuid: str) -> None:
    """A server deleted with a resize (or a live migration) open: a finished one is confirmed (as Nova confirms a resize before
    it deletes the server), one under way ends in error; the migration's allocation is given back.

    The allocation goes before the migration is closed, in its transaction: a controller killed between
    the two finds the migration still open when it deletes again (the give-back is idempotent); closed
    first, the migration's allocation stayed in Placement for good."""
    with transaction(ctx.engine) as conn:
        open_ = resize.migration_of(conn, uuid, OPEN)
        if open_ is None:  # a live migration's statuses: an evacuation still "accepted" is the heartbeat's
            live = resize.migration_of(conn, uuid, LIVE_OPEN)
            open_ = live if live is not None and live.get("migration_type") == "live-migration" else None
        if open_ is None:
            return
        try:
            ctx.allocations.confirm(open_["uuid"])
        except PlacementUnavailable as exc:  # the migration is over: the audit gives them back later
            LOG.warning("server %s: migration %s's allocations not given back yet: %s", uuid, open_["uuid"],
                        exc.message)
        done = open_["status"] in ("finished", "confirming")
        resize.move_migration(conn, open_["uuid"], "confirmed" if done else "error", expected=open_["status"])
