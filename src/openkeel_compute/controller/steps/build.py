"""create: a new server's objects, then its start.

The project's namespace if missing, the server's Secrets, its VirtualMachine and its own instancetype and
preference (copies of its flavor's in its namespace, owned by the VM: the VM never depends on the
catalogue's objects, which may not be synced yet, or not be in this namespace) by server-side apply,
then KubeVirt's ``start``. With ``[neutron]`` the server's ports are
created or bound after the claim (steps/ports.py) and each of their networks is made a Multus network
of the namespace (steps/attachments.py) before the VM, whose interfaces are the ports; Neutron refusing
them ends the build in Nova's "Failed to allocate the network(s), not rescheduling." and gives back
the ports made, Neutron away is tried again until the attempts are spent. Volumes the boot makes (source
image, snapshot or blank) are made in Cinder and waited for first (steps/boot_volumes.py). Started, the
build waits for
its ports to be plugged (steps/vif_wait.py). With Placement the
resources are claimed first (the builds of a pass together, ``claim_together``); no node with room ends
the build in ERROR with Nova's fault and nothing made. A build the cluster cannot be given (a zero-disk
flavor and an image of no known size, a flavor and image Nova refuses together) ends at once in ERROR
with "Build of instance <uuid> aborted: <reason>", before anything is claimed; so does one whose
attempts are spent (``give_up``, called by the server loop). A build that already left BUILD (timed
out) makes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from openkeel_compute.compute.instances import cas
from openkeel_compute.controller import tasks
from openkeel_compute.controller.steps import (
    attachments,
    boot_volumes,
    placing,
    ports,
    vif_wait,
    vm_edits,
    volumes,
)
from openkeel_compute.controller.steps.base import (
    DONE,
    Context,
    Failed,
    Outcome,
    ServerRow,
    Waiting,
    read_servers,
)
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt import vmstatus
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model.states import task_states
from openkeel_compute.network.errors import NeutronUnavailable
from openkeel_compute.notifications import server_events

LOG = logging.getLogger(__name__)


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    if server["vm_state"] != states.BUILDING:
        return DONE  # the build ended meanwhile (ERROR after instance_build_timeout): no VM for it now
    refused = volumes.build_refusal(ctx, server)
    if refused:  # volumes the cluster cannot be given: ended before anything is claimed
        return give_up(ctx, row, server, refused)
    if server["system_metadata"].get(sysmeta.VIF_WAIT):  # started: waiting for its ports to be plugged
        return vif_wait.check(ctx, row, server, give_up)
    made = boot_volumes.make(ctx, server)  # volumes the boot makes (image, snapshot, blank): made and reserved
    if isinstance(made, Waiting):
        return made
    if made:
        return give_up(ctx, row, server, made)
    try:
        objects = ctx.objects(server)  # what the cluster cannot be given ends the build before anything is claimed
    except ValueError as exc:  # the image has no size, the flavor and image refused together, ...
        return give_up(ctx, row, server, str(exc))
    if ctx.claims is not None:
        where = (server.get("host"), server.get("node"))
        fault = placing.claim(ctx, server)
        if fault is not None:  # no node has room: the build failed, nothing was made
            return Failed(fault.message + fault.details, fault)
        if (server.get("host"), server.get("node")) != where:
            objects = ctx.objects(server)  # pinned to the node claimed (the pass's claims usually chose it)
    with_ports = ports.wanted(ctx, server)
    # placed (the build's own work starts), networking and, with no ports to allocate between them,
    # block_device_mapping: the stages with nothing done in between are written together
    first = [(task_states.SCHEDULING, None), (None, task_states.NETWORKING)]
    if not with_ports:
        first.append((task_states.NETWORKING, task_states.BLOCK_DEVICE_MAPPING))
    if not _stages(ctx, row, server, first):
        return DONE
    namespace, name = ctx.namespace_of(server), server_vm_name(row.server_uuid)
    ctx.ensure_namespace(namespace, str(server["project_id"]))
    if with_ports:  # Neutron: the ports bound to the claimed node, their networks on Multus
        try:
            info = ports.allocate(ctx, server)
        except ports.AllocationFailed as exc:
            LOG.warning("server %s: its networks cannot be allocated: %s", row.server_uuid, exc)
            return give_up(ctx, row, server, ports.NETWORK_FAILED)
        except NeutronUnavailable as exc:  # tried again; once the attempts are spent, Nova's fault
            LOG.warning("server %s: Neutron: %s", row.server_uuid, exc.message)
            return Failed(ports.NETWORK_FAILED)
        attachments.ensure(ctx, namespace, ports.networks_of(ctx, info))
        _stages(ctx, row, server, [(task_states.NETWORKING, task_states.BLOCK_DEVICE_MAPPING)])
    refused = volumes.name_devices(ctx, server) or volumes.prepare(ctx, server)  # named, exported, claimed
    if refused:
        return give_up(ctx, row, server, refused)
    if with_ports or server.get("block_devices"):
        objects = ctx.objects(server)  # with the ports' interfaces and the volumes' claims made just now
    vm_edits.apply_server(ctx, objects, None)
    ctx.pass_state.placed.append((row.server_uuid, namespace, name))  # written with the rows done
    ctx.cluster.subresource(namespace, name, "start")
    # the guest is being spawned: its root disk made from the image, then booted (the observation follows it);
    # the stage is written with the pass's rows done (servers.py), one transaction for the pass's builds
    if server.get("task_state") != task_states.SPAWNING:
        ctx.pass_state.spawning.append(row.server_uuid)
        server["task_state"] = task_states.SPAWNING
    volumes.complete(ctx, server)
    if with_ports:
        return vif_wait.begin(ctx, server, ports.info_of(server) or [])
    return DONE


def _stages(ctx: Context, row: ServerRow, server: dict[str, Any], stages: list[tuple[str | None, str | None]]) -> bool:
    """The build moves on through its next stages as Nova's compute records them (visible as the task
    state): placed (``expected`` scheduling: no task, the server in its zone, ``create.start`` sent),
    networking, block_device_mapping (spawning: see ``run``). One transaction for them all, or one each
    when every state change is notified (each ``instance.update`` shows its own stage). A stage already
    passed (a build tried again) is not written again. False when the server left the build (deleted)."""
    if len(stages) > 1 and server_events.sends_updates():
        return all(_stages(ctx, row, server, [stage]) for stage in stages)
    order = vmstatus.BUILD_STAGES
    with transaction(ctx.engine) as conn:
        for expected, task in stages:
            current = server.get("task_state")
            if current in order and order.index(current) > order.index(expected):
                continue  # passed by an earlier attempt
            changes: dict[str, Any] = {"task_state": task}
            if expected == task_states.SCHEDULING and not server.get("availability_zone"):
                changes["availability_zone"] = ctx.settings.options.default_availability_zone
            if not cas.save_state(conn, row.server_uuid, expected_task_state=expected,
                                  vm_state=states.BUILDING, **changes):
                return False
            if expected == task_states.SCHEDULING:  # Nova's compute has the build now: create.start
                tasks.notify_start(conn, row.server_uuid, row.request_id, events.BUILD, server.get("host"))
            server.update(changes)
    return True


def give_up(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """End the build in ERROR with Nova's fault "Build of instance <uuid> aborted: <reason>" (a condition the
    controller cannot meet, or its attempts spent): the resources claimed for it are given back, and the
    VM made, if any, goes with the server's delete, as Nova leaves a failed build's guest."""
    uuid = row.server_uuid
    fault = Fault(500, f"Build of instance {uuid} aborted: {reason}", reason)
    with transaction(ctx.engine) as conn:
        ended = tasks.end_in_fault(conn, server, fault, expected=[server.get("task_state")], vm_state=states.ERROR)
        if ended and ctx.claims is not None:
            cas.save_state(conn, uuid, host=None, node=None)
    if ended and ports.wanted(ctx, server):  # Nova's build abort lets the network go at once
        try:
            ports.deallocate(ctx, uuid)
        except Exception as exc:  # noqa: BLE001 - the server's delete lets them go then
            LOG.warning("server %s: its build failed, its ports not let go yet: %s", uuid, exc)
    if ended and ctx.claims is not None:
        try:
            ctx.claims.release(uuid)
        except Exception as exc:  # noqa: BLE001 - the audit gives back what no live build holds
            LOG.warning("server %s: its build failed, its allocations not given back yet: %s", uuid, exc)
    return Failed(fault.message, fault)


def claim_together(ctx: Context, rows: list[ServerRow]) -> None:
    """The builds of a pass claimed together (``Claims.claim_many``: one POST /allocations), their host
    and node written in one transaction; what it leaves is claimed one by one by ``run``. ``rows``: the
    create rows that are their server's first of the pass (a create behind another row may not run now)."""
    if ctx.claims is None or len(rows) < 2:
        return
    servers = [s for s in read_servers(ctx.engine, [row.server_uuid for row in rows]).values()
               if s["vm_state"] == states.BUILDING]
    made = ctx.claims.claim_many(servers)
    if made:
        with transaction(ctx.engine) as conn:
            for uuid, node in made.items():
                cas.save_state(conn, uuid, host=node, node=node)
