"""delete, soft-delete, restore, and the reclaim of soft-deleted servers.

- delete: with ``[neutron]`` the server's ports first (those OpenKeel created deleted, the user's
  unbound: steps/ports.py), then the VirtualMachine (its disks and instance go with it), its Secrets and its own instancetypes
  and preferences; its launcher pods on a node that is not Ready force-deleted (``gracePeriodSeconds: 0``,
  as evacuate's: a dead node's kubelet never confirms they stopped, the delete would wait for it); an
  open resize ends (``resize.close_on_delete``). The observation soft-deletes the row once none of
  them is left. The table marks it ``supersedes``: the server's earlier rows are moot and done.
- local-delete: what a delete the API made itself leaves to do (Nova's local delete, the server's compute
  service down): its ports, its VM with its launcher pods force-deleted, its volumes and allocations, a
  shelved server's image; not
  ordered (its server is gone already: no row to read, no event).
- soft-delete: the VM stopped (its disks stay), then vm_state soft-delete: what Nova's compute service
  does when its driver has no soft delete of its own.
- restore: the VM started again; ACTIVE once it runs.
- reclaim (a periodic task, not an outbox row): servers soft-deleted longer than
  ``reclaim_instance_interval`` are deleted for good, as Nova's periodic task does (no instance action).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from openkeel_compute.compute import errors, soft_delete, working_state
from openkeel_compute.compute.instances import cas, store, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.controller import compute_services, tasks
from openkeel_compute.controller.steps import evacuate, ports, resize, shelve, snapshot, volumes
from openkeel_compute.controller.steps.base import (
    DONE,
    FINAL_PHASES,
    Context,
    Outcome,
    ServerRow,
    Waiting,
    vmi_phase,
)
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states

#: who deletes a server reclaimed: the controller itself
RECLAIMER = Actor("openkeel", "openkeel")


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    if ctx.network is not None:  # first: a Neutron away keeps the row (and the server) until it answers
        ports.deallocate(ctx, row.server_uuid)
    namespace = ctx.namespace_of(server)
    vmi = ctx.cluster.look(namespace, row.server_uuid)[1]
    ctx.cluster.delete_server(namespace, row.server_uuid)
    if vmi is not None:  # its launcher pods on a node that is not Ready go at once (nobody there confirms)
        ready = {n["metadata"]["name"] for n in ctx.cluster.nodes() if compute_services.ready(n)}
        evacuate.force_delete_launchers(ctx, namespace, row.server_uuid, vmi,
                                        lambda node: node is not None and node not in ready)
    resize.close_on_delete(ctx, row.server_uuid)
    volumes.on_delete(ctx, row.server_uuid, server)
    snapshot.on_delete(ctx, row.server_uuid)  # the image of a capture the delete cut short
    shelve.on_delete(ctx, server)  # a shelved server's image goes with it, as Nova's API deletes it
    with transaction(ctx.engine) as conn:  # nothing left to carry on: a resize is closed, no build to retry
        working_state.forget(conn, row.server_uuid)
    return DONE


def local(ctx: Context, row: ServerRow, _server: dict[str, Any]) -> Outcome:
    """The cluster's and the services' part of Nova's local delete: the API deleted the server at once (its
    compute service down). Its ports, its VM with its launcher pods force-deleted wherever they are (the node
    is down: nobody there confirms), an open resize closed, its volumes and allocations given back; waits
    until nothing of it is left in the cluster."""
    uuid = row.server_uuid
    with reader(ctx.engine) as conn:
        try:
            server = store.get(conn, uuid, read_deleted="yes")
        except errors.InstanceNotFound:  # archived meanwhile: the orphan sweep removes what is left
            return DONE
    if ctx.network is not None:
        ports.deallocate(ctx, uuid)
    namespace = ctx.namespace_of(server)
    vmi = ctx.cluster.look(namespace, uuid)[1]
    ctx.cluster.delete_server(namespace, uuid)
    if vmi is not None:
        evacuate.force_delete_launchers(ctx, namespace, uuid, vmi, lambda _node: True)
    resize.close_on_delete(ctx, uuid)
    volumes.on_delete(ctx, uuid, {"system_metadata": {sysmeta.HAS_BLOCK_DEVICES: "True"}})  # its rows say
    snapshot.on_delete(ctx, uuid)
    shelve.delete_image(ctx, uuid, row.payload.get("shelved_image_id"))  # a shelved server's, named by the API
    with transaction(ctx.engine) as conn:
        working_state.forget(conn, uuid)
    if ctx.claims is not None:
        ctx.claims.release(uuid)  # Placement away: raised, tried again next pass
    vm, vmi, _dvs = ctx.cluster.look(namespace, uuid)
    if vm is not None or vmi is not None or ctx.cluster.leftovers(namespace, uuid):
        return Waiting("waiting for the deleted server's objects to leave the cluster")
    return DONE


def soft(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    if server.get("task_state") != task_states.SOFT_DELETING:
        return DONE
    namespace = ctx.namespace_of(server)
    phase = vmi_phase(ctx.cluster.look(namespace, row.server_uuid)[1])
    if phase is not None and phase not in FINAL_PHASES:
        ctx.cluster.subresource(namespace, server_vm_name(row.server_uuid), "stop")
        return Waiting("waiting for the server's virtual machine to stop")
    with transaction(ctx.engine) as conn:  # its event started with the row, before the guest was stopped
        tasks.end_started(conn, row.server_uuid, task_states.SOFT_DELETING, vm_state=states.SOFT_DELETED,
                          task_state=None, power_state=states.power_state.SHUTDOWN)
    return DONE


def restore(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    if server.get("task_state") != task_states.RESTORING:
        return DONE
    namespace = ctx.namespace_of(server)
    phase = vmi_phase(ctx.cluster.look(namespace, row.server_uuid)[1])
    if phase == "Running":
        with transaction(ctx.engine) as conn:  # its event started with the row, before the guest was started
            tasks.end_started(conn, row.server_uuid, task_states.RESTORING, vm_state=states.ACTIVE, task_state=None,
                              power_state=states.power_state.RUNNING)
        return DONE
    if phase is None or phase in FINAL_PHASES:
        ctx.cluster.subresource(namespace, server_vm_name(row.server_uuid), "start")
    return Waiting("waiting for the server's virtual machine to run")


def reclaim(ctx: Context, interval: float, now: dt.datetime) -> list[str]:
    """Delete for good the servers soft-deleted longer than ``interval`` seconds; returns their uuids."""
    with reader(ctx.engine) as conn:
        due = soft_delete.due_for_reclaim(conn, interval, now)
    done = []
    for uuid in due:
        with transaction(ctx.engine) as conn:
            if cas.save_state(conn, uuid, expected_task_state=None, task_state=task_states.DELETING,
                              progress=0):
                updates.outbox(conn, uuid, ops.DELETE, RECLAIMER)
                done.append(uuid)
    return done
