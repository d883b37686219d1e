"""live_migrate: os-migrateLive as Nova's conductor and computes do it, on KubeVirt (docs/operators.md "Moves").

The server keeps task ``migrating`` throughout; its migration's status says which step comes next (a
restarted controller carries on where it was):

- ``accepted``: the destination is claimed in Placement as Nova's conductor claims it (the server's
  allocation moves to the migration's consumer, the server claims its flavor on another node, the named
  host only when given); without Placement, a Ready node other than the server's. The conductor's and the
  computes' checks are recorded (events) → ``queued``, the destination on the migration;
- ``queued``: a VirtualMachineInstanceMigration of the server's VMI with ``addedNodeSelector`` on the
  destination's kubernetes.io/hostname (KubeVirt v1.9) → ``preparing``; a cluster that refuses it (a VMI
  not LiveMigratable) fails the migration;
- ``preparing``: once KubeVirt runs the transfer → ``running`` (event compute_live_migration);
- ``running``: ``Succeeded`` → the VMI on the destination: the migration's allocation (the source's)
  given back, the VM pinned to the destination (its next start lands there), Neutron's bindings follow,
  the server's host and node moved, migration ``completed``; ``Failed`` (or the object gone: aborted) →
  the allocation moved back onto the server, the server ACTIVE on its source, migration ``error``.
"""

from __future__ import annotations

import logging
from typing import Any

from openkeel_compute.compute import live_migration
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.compute.instances import instance_actions, instance_faults, store
from openkeel_compute.controller.claims import NoValidHost
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.kube import ClusterError
from openkeel_compute.controller.steps import placing, ports, vm_edits
from openkeel_compute.controller.steps.base import DONE, Context, Failed, Outcome, ServerRow, Wait
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import events, sysmeta
from openkeel_compute.model.states import task_states

LOG = logging.getLogger(__name__)
KIND = "VirtualMachineInstanceMigration"
HOSTNAME = "kubernetes.io/hostname"


def migration_name(migration: str) -> str:
    return f"live-{migration}"


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    migration = row.payload["migration"]
    with reader(ctx.engine) as conn:
        record = live_migration.open_migration(conn, migration)
        aborted = live_migration.abort_requested(conn, uuid, migration)
    if record is None or record["status"] not in live_migration.OPEN or \
            server.get("task_state") != task_states.MIGRATING:
        return DONE  # over (deleted, reset, ended by another pass)
    status = record["status"]
    if aborted:
        ended = _abort(ctx, row, server, migration, status)
        if ended is not None:
            return ended
    if status == "accepted":
        ended = _claim(ctx, row, server, migration)
        if ended is not None:
            return ended
        with reader(ctx.engine) as conn:
            record = live_migration.open_migration(conn, migration) or record
        status = record["status"]
    dest = record["dest_compute"]
    name = migration_name(migration)
    job = ctx.cluster.get(KIND, name, namespace)
    if status == "queued":
        vm = ctx.cluster.look(namespace, uuid)[0]
        if vm is not None and vm_edits.pinned_node(vm) not in (None, dest):
            # KubeVirt live-updates the VMI's affinity from the VM's: the target pod may go to the destination
            vm_edits.pin(ctx, namespace, uuid, vm, dest)
        vmi = ctx.cluster.vmi(namespace, uuid)
        if job is None and _vmi_pin(vmi) not in (None, dest):
            raise Wait("waiting for KubeVirt to carry the VM's node affinity to its VMI")
        if job is None:
            try:
                ctx.cluster.create({
                    "apiVersion": "kubevirt.io/v1", "kind": KIND,
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {"openkeel.io/server": uuid, "openkeel.io/migration": migration}},
                    "spec": {"vmiName": server_vm_name(uuid), "addedNodeSelector": {HOSTNAME: dest}}})
            except ClusterError as exc:
                code = getattr(getattr(exc, "status", None), "code", None)
                if code is not None and 400 <= code < 500 and code not in (409, 429):
                    return _failed(ctx, row, server, migration, _message(exc))
                raise
        with transaction(ctx.engine) as conn:
            live_migration.move_migration(conn, migration, "preparing", expected="queued")
        raise Wait("waiting for KubeVirt to prepare the migration's target")
    phase = ((job or {}).get("status") or {}).get("phase")
    if job is None or phase == "Failed":
        reason = _failure_reason(ctx, namespace, uuid) if job is not None else "the migration was aborted"
        return _failed(ctx, row, server, migration, reason)
    if status == "preparing":
        if phase not in ("Running", "Succeeded"):
            raise Wait(f"waiting for KubeVirt's migration (phase {phase})")
        with transaction(ctx.engine) as conn:
            if live_migration.move_migration(conn, migration, "running", expected="preparing"):
                _event(conn, row, events.LIVE_MIGRATION, host=server.get("host"), done=False)
        status = "running"
    if phase != "Succeeded":
        raise Wait(f"waiting for KubeVirt's migration (phase {phase})")
    vmi = ctx.cluster.vmi(namespace, uuid)
    node = ((vmi or {}).get("status") or {}).get("nodeName") or dest
    vm = ctx.cluster.look(namespace, uuid)[0]
    if vm is not None and vm_edits.pinned_node(vm) != node:
        vm_edits.pin(ctx, namespace, uuid, vm, node)  # a later start of the VM lands where it runs now
    ports.follow(ctx, server, node)
    ctx.allocations.confirm(migration)  # the source's allocation, held by the migration, given back
    with transaction(ctx.engine) as conn:
        if live_migration.completed(conn, uuid, migration, node):
            _end_event(conn, uuid, host=server.get("host"))
            _event(conn, row, events.POST_LIVE_MIGRATION_DEST, host=node)
    return DONE


def _abort(ctx: Context, row: ServerRow, server: dict[str, Any], migration: str, status: str) -> Outcome | None:
    """An abort asked for (DELETE .../migrations/{id}): KubeVirt's cancel is the migration object's deletion.
    None: it completed before the cancel reached it (ended as a success)."""
    namespace = ctx.namespace_of(server)
    job = ctx.cluster.get(KIND, migration_name(migration), namespace)
    phase = ((job or {}).get("status") or {}).get("phase")
    if phase == "Succeeded":
        return None
    if job is not None and phase != "Failed":
        if not (job.get("metadata") or {}).get("deletionTimestamp"):
            ctx.cluster.delete(ObjectKey(KIND, namespace, migration_name(migration)))
        raise Wait("waiting for KubeVirt to cancel the migration")
    return _failed(ctx, row, server, migration, "Live migration has been aborted", claimed=status != "accepted",
                   status="cancelled")


def _claim(ctx: Context, row: ServerRow, server: dict[str, Any], migration: str) -> Outcome | None:
    """The destination claimed and recorded (None), or the migration's end when no node may take it."""
    uuid = row.server_uuid
    named = row.payload.get("host")
    flavor = store.flavors_of(server).cur
    if (server.get("system_metadata") or {}).get(sysmeta.BOOT_FROM_VOLUME) == "True":
        flavor = dict(flavor, root_gb=0)  # the root disk is a volume: not claimed (Nova's is_bfv)
    image = image_from_system_metadata({k: v for k, v in (server.get("system_metadata") or {}).items()
                                        if k.startswith(sysmeta.IMAGE_PREFIX)})
    try:
        if named == server.get("host"):
            raise NoValidHost("the requested host is the server's own", filtered=True)
        provider = ctx.allocations.resize(uuid, migration, flavor, image_properties=image.get("properties"),
                                          zone=server.get("availability_zone"), cold=True, node=named,
                                          usable=placing.move_filter(ctx, server))
        if provider:
            dest = ctx.claims.node_of(provider) if ctx.claims is not None else ctx.allocations.node_of(provider)
        else:
            dest = placing.another_node(ctx, server, named)
    except NoValidHost as exc:
        return _failed(ctx, row, server, migration, exc.fault, claimed=False)
    with transaction(ctx.engine) as conn:
        if not live_migration.move_migration(conn, migration, "queued", expected="accepted", dest_compute=dest,
                                             dest_node=dest):
            return DONE
        host = server.get("host")
        conductor = row.payload.get("conductor_event") or events.LIVE_MIGRATE
        for name in (conductor, *events.BEFORE_LIVE_MIGRATION[1:]):
            _event(conn, row, name, host=dest if name in (events.CHECK_LIVE_DEST, events.PRE_LIVE_MIGRATION) else host)
    return None


def _failed(ctx: Context, row: ServerRow, server: dict[str, Any], migration: str, why: str | Fault, *,
            claimed: bool = True, status: str = "error") -> Outcome:
    """Nova's rollback: the allocation back onto the server, the server as it was on its source, no task;
    the migration in error; the running event (or the conductor's, before a claim) failed; the fault
    recorded (Nova's set_vm_state_and_notify; an ACTIVE server does not show it)."""
    uuid = row.server_uuid
    fault = why if isinstance(why, Fault) else Fault(500, why[:255], why)
    message = fault.message
    if claimed:
        namespace = ctx.namespace_of(server)
        vm = ctx.cluster.look(namespace, uuid)[0]
        home = server.get("node") or server.get("host")
        if vm is not None and home and vm_edits.pinned_node(vm) not in (None, home):
            vm_edits.pin(ctx, namespace, uuid, vm, home)  # the guest stays on its source: so does the VM's pin
        ctx.allocations.revert(uuid, migration)
    with transaction(ctx.engine) as conn:
        if not live_migration.failed(conn, uuid, migration, status):
            return DONE
        instance_faults.add_fault(conn, uuid, code=fault.code, message=fault.message, details=fault.details)
        if claimed:
            if not _end_event(conn, uuid, result="Error", message=message, host=server.get("host")):
                _event(conn, row, events.LIVE_MIGRATION, host=server.get("host"), result="Error", message=message)
            _event(conn, row, events.ROLLBACK_LIVE_MIGRATION, host=server.get("host"))
        else:
            _event(conn, row, row.payload.get("conductor_event") or events.LIVE_MIGRATE, result="Error",
                   message=message)
    LOG.info("server %s: live migration %s failed: %s", uuid, migration, message)
    return Failed(f"live migration failed: {message}", fault)


def _event(conn: Any, row: ServerRow, name: str, *, host: str | None = None, done: bool = True,
           result: str = "Success", message: str | None = None) -> None:
    action_id = instance_actions.action_for_request(conn, row.server_uuid, row.request_id)
    if action_id is None:
        return
    event_id = instance_actions.start_event(conn, action_id, name, host=host)
    if done:
        instance_actions.finish_event(conn, event_id, result, host=host, traceback=message, details=message)
    else:
        live_migration.set_step_event(conn, row.server_uuid, event_id)


def _end_event(conn: Any, uuid: str, *, result: str = "Success", host: str | None = None,
               message: str | None = None) -> bool:
    event_id = live_migration.step_event(conn, uuid)
    if event_id is None:
        return False
    instance_actions.finish_event(conn, event_id, result, host=host, traceback=message, details=message)
    live_migration.set_step_event(conn, uuid, None)
    return True


def _vmi_pin(vmi: dict[str, Any] | None) -> str | None:
    return vm_edits.pinned_node({"spec": {"template": {"spec": (vmi or {}).get("spec") or {}}}})


def _failure_reason(ctx: Context, namespace: str, uuid: str) -> str:
    state = ((ctx.cluster.vmi(namespace, uuid) or {}).get("status") or {}).get("migrationState") or {}
    return str(state.get("failureReason") or "KubeVirt's migration failed")


def _message(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    return str(getattr(status, "message", None) or exc)

