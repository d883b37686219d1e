"""The observation: every live server's objects read back into Nova's states.

Each pass reads every live server in three statements (rows, metadata, system metadata), compares each
with the cluster (the watch cache when it is in step, else three lists), turns the objects into Nova's
states (``kubevirt.vmstatus.observe``, pure) and writes what changed, ``batch_size`` servers per
transaction, each write a compare-and-swap on the task it read (an API action asked meanwhile wins). A
build ends ACTIVE or ERROR (with a fault), a delete ends with the row soft-deleted once nothing of the
server is left in the cluster; the task's event is finished when the task ends. With ``[controller]
keep_pod_address`` the VM's template asks the network plugin for the address its guest has.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from openkeel_compute.compute.instances import (
    cas,
    deletion,
    instance_actions,
    instance_faults,
    instance_sysmeta,
    listing,
    paging,
)
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.controller import tasks
from openkeel_compute.controller.kube import ClusterError
from openkeel_compute.controller.steps import attachments, placing
from openkeel_compute.controller.steps.base import Context
from openkeel_compute.controller.watch import ObjectView, Snapshot
from openkeel_compute.db import models
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import image_token_secret, pod_address_annotation
from openkeel_compute.kubevirt.vmstatus import (
    IMPORT_FAILED_DETAILS,
    Observation,
    download_fault,
    import_failure_message,
    observe,
)
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model.states import task_states
from openkeel_compute.placement.errors import PlacementError, PlacementUnavailable

LOG = logging.getLogger(__name__)
_READ_CHUNK = 500  # servers whose metadata one statement reads
#: seconds a node found deleted is taken as deleted before it is asked about again (it may be registered anew)
_GONE_NODE_RECHECK = 60.0
_FRESH_ONE_BY_ONE = 10  # servers of a pass read from the cluster one by one before it is listed instead
#: who Nova's power sync acts as: a periodic task's admin context, with no user and no project
POWER_SYNC = Actor(None, None)  # type: ignore[arg-type]
# The guest's name of the first disk on each bus, as Nova's libvirt driver names it; KubeVirt's default bus is virtio.
_DISK_PREFIX = {"virtio": "vd", "scsi": "sd", "sata": "sd", "usb": "sd", "ide": "hd", "xen": "xvd"}
# A build's steps as the cluster's objects show them, in the order it goes through them.
_BUILD_STEPS: dict[tuple[str, str | None], int] = {(states.BUILDING, task): i for i, task in enumerate((
    task_states.SCHEDULING, None, task_states.NETWORKING, task_states.BLOCK_DEVICE_MAPPING, task_states.SPAWNING))}
_BUILD_STEPS[(states.ACTIVE, None)] = len(_BUILD_STEPS)

Write = Callable[[Connection], None]
#: Nova's [scheduler] max_attempts default, for a build failure's fault when no Placement gives alternates
NOVA_MAX_ATTEMPTS = 3


def root_device_name(system_metadata: dict[str, str]) -> str:
    """The root disk's device name in the guest, from the image's hw_disk_bus (the server keeps it)."""
    return f"/dev/{_DISK_PREFIX.get(system_metadata.get('image_hw_disk_bus') or 'virtio', 'vd')}a"


def build_moves_on(server: dict[str, Any], seen: Observation) -> bool:
    """A build seen to reach a later step, or ACTIVE, with no fault: the watches never show a step the
    build has not reached, so this needs no fresh read (a thousand builds under way would list the
    whole cluster on every pass). Whatever else changes state is concluded from a fresh read."""
    if server.get("vm_state") != states.BUILDING or seen.fault is not None or seen.deleted:
        return False
    now = _BUILD_STEPS.get((states.BUILDING, server.get("task_state")))
    later = _BUILD_STEPS.get((seen.vm_state, seen.task_state))
    return now is not None and later is not None and later > now


def _made(server: dict[str, Any]) -> bool:
    """Whether the server's VM may be in the cluster while the watches do not show it yet: not for a build
    whose objects the controller has not recorded making (no ``vm_name``: its create row has not run, or
    ran in this pass or the one before, which ``placed`` covers). Such a build is observed as the cache
    shows it (no VM: still scheduling, or timed out), with no read of the cluster: a thousand builds
    waiting for their rows would otherwise list the whole cluster on every pass."""
    return bool(server.get("vm_name")) or server.get("vm_state") != states.BUILDING \
        or server.get("task_state") == task_states.DELETING


def quiet_key(server: dict[str, Any], namespace: str, snapshot: Snapshot) -> tuple[Any, ...] | None:
    """Everything a settled server's observation depends on: its row's state, task, update time and
    system metadata, and the resource versions of its VM, VMI and DataVolumes. None when the observation
    also depends on the time (a build, a start that may time out or stay unschedulable, any task under
    way) or there is no VM: such a server is observed on every pass."""
    if server.get("vm_state") == states.BUILDING or server.get("task_state") is not None:
        return None
    vm, vmi, dvs = snapshot.look(namespace, server["uuid"])
    if vm is None:
        return None
    vmi_status = (vmi or {}).get("status") or {}
    if vmi_status.get("phase") == "Failed" and vmi_status.get("reason") == "NodeUnresponsive":
        return None  # it also depends on whether its node still exists, which no object of its own shows
    return (server.get("vm_state"), server.get("power_state"), server.get("updated_at"),
            server.get("launched_at"), server.get("host"), server.get("progress"),
            tuple(sorted((server.get("system_metadata") or {}).items())),
            vm["metadata"].get("resourceVersion"), vmi and vmi["metadata"].get("resourceVersion"),
            tuple(sorted(dv["metadata"].get("resourceVersion") or "" for dv in dvs)))


def live_servers(engine: Any) -> list[dict[str, Any]]:
    """Every live server with its metadata and system metadata, in three statements (bounded IN lists)."""
    with reader(engine) as conn:
        rows = listing.live_rows(conn)
        metadata: dict[str, dict[str, str]] = {}
        system: dict[str, dict[str, str]] = {}
        for start in range(0, len(rows), _READ_CHUNK):
            uuids = [r["uuid"] for r in rows[start:start + _READ_CHUNK]]
            metadata.update(paging.metadata_by_instance(conn, uuids))
            system.update(paging.metadata_by_instance(conn, uuids, system=True))
    for row in rows:
        row["metadata"] = metadata.get(row["uuid"], {})
        row["system_metadata"] = system.get(row["uuid"], {})
    return rows


class Observer:
    """What the observation keeps from pass to pass: the servers whose last observation changed nothing
    (skipped while nothing they depend on changes), the nodes found deleted, the image tokens written."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._quiet: dict[str, tuple[Any, ...]] = {}  # uuid -> quiet_key of its last observation
        self._nodes_seen: dict[str, bool] = {}  # node name -> it exists, asked once per pass
        self._nodes_gone: dict[str, float] = {}  # node name -> when it was found deleted (not asked again soon)
        self._tokens: dict[str, str] = {}  # namespace/name of an image token Secret -> the content last written
        self._fresh: Snapshot | None = None  # the cluster as listed during this pass, once needed
        self._fresh_reads = 0  # servers read one by one during this pass

    def observe_all(self, ctx: Context, snapshot_of: Callable[[], Snapshot], problems: dict[str, str],
                    placed: set[str]) -> None:
        """Every live server against the cluster (``snapshot_of``: the watch cache's view, or lists).
        ``placed``: servers whose objects this pass or the one before created: while the watches do not
        show them yet they are observed on a later pass (each would cost a read of the cluster to find
        what is known); after that a VM still missing is read from the cluster (one removed meanwhile)."""
        servers = live_servers(ctx.engine)
        if not servers:
            return
        try:
            snapshot = snapshot_of()
        except ClusterError as exc:  # the cluster is away: states stay as last seen
            for server in servers:
                problems.setdefault(server["uuid"], f"observe: {exc}")
            return
        writes: list[Write] = []
        quiet, self._quiet = self._quiet, {}
        if not snapshot.cached:
            placed = set()
        try:
            for server in servers:
                namespace = ctx.namespace_of(server)
                if server["uuid"] in placed and snapshot.look(namespace, server["uuid"])[0] is None:
                    continue
                key = quiet_key(server, namespace, snapshot)
                if key is not None and quiet.get(server["uuid"]) == key:
                    self._quiet[server["uuid"]] = key  # nothing it depends on changed: it would change nothing
                    continue
                try:
                    self.observe_one(ctx, server, snapshot, writes, key)
                except (ClusterError, PlacementError) as exc:
                    problems.setdefault(server["uuid"], f"observe: {exc}")
                if len(writes) >= ctx.settings.batch_size:
                    _write(ctx, writes)
            _write(ctx, writes)
        finally:
            self._fresh, self._fresh_reads = None, 0
            self._nodes_seen.clear()

    def _look_fresh(self, ctx: Context, namespace: str, uuid: str) -> ObjectView:
        """A server's objects read from the cluster, not the watches. The first few of a pass are read
        server by server; then the cluster is listed once for the rest of the pass (three lists cost what
        a few servers' reads cost, and a pass over a thousand servers may find hundreds changed)."""
        if self._fresh is None and self._fresh_reads < _FRESH_ONE_BY_ONE:
            self._fresh_reads += 1
            return ctx.cluster.look(namespace, uuid)
        if self._fresh is None:
            self._fresh = ctx.cluster.snapshot()
        return self._fresh.look(namespace, uuid)

    def _observe(self, ctx: Context, server: dict[str, Any], view: ObjectView) -> Observation:
        vm, vmi, dvs = view
        s = ctx.settings
        return observe(server, vm, vmi, dvs, ctx.now(), server["created_at"], s.build_timeout, s.network_name,
                       s.unschedulable_grace, self._node_gone(ctx, vmi))

    def observe_one(self, ctx: Context, server: dict[str, Any], snapshot: Snapshot | None,
                    writes: list[Write] | None = None, key: tuple[Any, ...] | None = None) -> Observation:
        """One server (its row as ``live_servers`` reads one) against ``snapshot``, or the cluster when
        None; the state change goes into ``writes`` (written now when None). ``key``: what the
        observation depends on (``quiet_key``), kept when it changes nothing so that the next pass skips
        the server while the key stays the same."""
        uuid, namespace = server["uuid"], ctx.namespace_of(server)
        view = (snapshot or ctx.cluster).look(namespace, uuid)
        cached = snapshot is not None and snapshot.cached
        if view[0] is None and cached and _made(server):
            view = self._look_fresh(ctx, namespace, uuid)  # a watch may lag our own create: ask
        server["vmi_uid"] = server["system_metadata"].get(sysmeta.REPLACED_VMI)
        vm, _vmi, dvs = view
        if vm is not None and server.get("vm_state") == states.BUILDING \
                and server.get("task_state") != task_states.DELETING \
                and not (vm.get("metadata") or {}).get("deletionTimestamp") and any(
                (dv.get("status") or {}).get("phase") != "Succeeded" for dv in dvs):
            # a build still under way: a deleted server's token Secret is never written again
            self._refresh_image_token(ctx, namespace, uuid, str(server["project_id"]))
        seen = self._observe(ctx, server, view)
        if cached and (seen.deleted or (seen.vm_state, seen.task_state) != (
                server.get("vm_state"), server.get("task_state"))) and not build_moves_on(server, seen):
            # a change of state is concluded only from a fresh read: the watches may still show an object
            # as it was (the VMI a hard reboot replaced, say, which would read as a guest that shut down)
            view = self._look_fresh(ctx, namespace, uuid)
            seen = self._observe(ctx, server, view)
        if (ctx.claims is not None and server.get("vm_state") == states.BUILDING and seen.vm_state == states.ERROR
                and view[0] is not None and seen.fault is not None
                and (seen.fault.details or "").startswith("KubeVirt: Unschedulable")
                and placing.try_alternate(ctx, server, namespace)):
            return seen  # building again, on another node
        if (server.get("vm_state") == states.BUILDING and seen.vm_state == states.ERROR and view[0] is not None
                and seen.fault is not None and (seen.fault.details or "").startswith(IMPORT_FAILED_DETAILS)):
            seen = self._download_failed(ctx, server, namespace, view, seen)
            if seen.vm_state != states.ERROR:
                return seen  # building again, on another node
        if seen.deleted:
            self._deleted(ctx, server, namespace, writes)
            return seen
        if ctx.network is not None and server["system_metadata"].get(sysmeta.REQUESTED_NETWORKS) in ("auto", "requested"):
            seen = seen._replace(addresses=None)  # a server's addresses are its ports' (steps/ports.py)
        if seen.vm_state == states.ACTIVE and server.get("vm_state") == states.BUILDING \
                and server["system_metadata"].get(sysmeta.VIF_WAIT):
            # its ports are not plugged yet (steps/vif_wait.py): BUILD, spawning, as Nova's guest waits paused
            seen = seen._replace(vm_state=states.BUILDING, task_state=task_states.SPAWNING, launched=False)
        elif server.get("task_state") == task_states.REBUILD_SPAWNING and server["system_metadata"].get(sysmeta.VIF_WAIT):
            # a rebuild's guest waiting for its ports plugged again (steps/rebuild.py): the task goes on
            seen = seen._replace(vm_state=server["vm_state"], task_state=task_states.REBUILD_SPAWNING)
        self._changed(ctx, server, seen, writes, key)
        if ctx.settings.keep_pod_address and view[0] is not None and seen.addresses:
            _keep_address(ctx, namespace, uuid, view[0], seen.addresses)
        return seen

    def _download_failed(self, ctx: Context, server: dict[str, Any], namespace: str, view: ObjectView,
                         seen: Observation) -> Observation:
        """A build whose image could not be imported (CDI's importer failed and was restarted, or gave up) is
        Nova's build whose image could not be downloaded: Nova's compute reschedules it, so it is tried again
        on an alternate node while one is left (its disk imported again); then it ends in ERROR with the
        fault Nova's conductor gives it, the claim given back and the VM deleted with its disks."""
        failing = [dv["metadata"]["name"] for dv in view[2] if import_failure_message([dv]) is not None]
        if ctx.claims is not None and placing.try_alternate(ctx, server, namespace, reimport=failing):
            return seen._replace(vm_state=states.BUILDING, task_state=task_states.SPAWNING, fault=None)
        # without Placement there is one choice of host, as a Nova whose scheduler finds no alternate
        max_attempts = ctx.claims.max_attempts if ctx.claims is not None else NOVA_MAX_ATTEMPTS
        fault = download_fault(str(server["uuid"]), str(server.get("image_ref") or ""),
                               import_failure_message(view[2]) or "", seen.fault.details if seen.fault else "",
                               len(placing.tried_nodes(ctx, server)) or 1, max_attempts)
        LOG.warning("server %s: its image could not be imported: %s", server["uuid"], fault.details)
        # nothing of a failed build stays in the cluster (Nova destroys the guest it could not spawn)
        ctx.cluster.delete_server(namespace, str(server["uuid"]))
        return seen._replace(fault=fault, host=None)

    def _deleted(self, ctx: Context, server: dict[str, Any], namespace: str, writes: list[Write] | None) -> None:
        uuid = server["uuid"]
        if ctx.cluster.leftovers(namespace, uuid):  # observe only sees the VM and disks; Secrets and the
            # preference must be gone too: whatever is left (a Secret written while the delete ran, say)
            # is asked to go again
            ctx.cluster.delete_server(namespace, uuid)
            return
        if ctx.network is not None:  # the namespace's Multus networks no VM names any more
            attachments.collect(ctx, namespace)
        if ctx.claims is not None:  # given back first: a failure leaves the server for the next pass
            try:
                ctx.claims.release(uuid)
            except PlacementUnavailable as exc:
                # As Nova's compute service: the delete completes; the allocations Placement still
                # holds belong to no server now and the audit gives them back once it answers.
                LOG.warning("server %s: deleted, its allocations not given back yet: %s", uuid, exc.message)

        def gone(conn: Connection) -> None:  # deleted, then its event ends (delete.end shows it deleted)
            deletion.soft_delete(conn, uuid)
            tasks.finish(conn, server, None, server.get("host"))

        _queue(ctx, writes, gone)

    def _changed(self, ctx: Context, server: dict[str, Any], seen: Observation, writes: list[Write] | None,
                 key: tuple[Any, ...] | None) -> None:
        uuid = server["uuid"]
        changes: dict[str, Any] = {"vm_state": seen.vm_state, "task_state": seen.task_state,
                                   "power_state": seen.power_state}
        if seen.addresses is not None and seen.addresses != json.loads(server.get("network_info") or "{}"):
            # written only when they change: a server never given an address keeps none (no "{}")
            changes["network_info"] = json.dumps(seen.addresses)
        if seen.progress is not None:
            changes["progress"] = seen.progress
        if seen.host is not None:
            changes["host"] = changes["node"] = seen.host
            if not server.get("availability_zone"):
                # scheduled: the server is in its host's zone, the default one (the list filter sees it)
                changes["availability_zone"] = ctx.settings.options.default_availability_zone
        if seen.launched and server.get("launched_at") is None:
            changes["launched_at"] = models.utcnow()
        if seen.launched and not server.get("root_device_name"):
            changes["root_device_name"] = root_device_name(server.get("system_metadata") or {})
        current = {k: server.get(k) for k in changes}
        # A fault belongs to the change into the failed state, once: a server that stays in ERROR (its VM
        # still gone, say) does not collect one fault per pass.
        transition = (server.get("vm_state"), server.get("task_state")) != (seen.vm_state, seen.task_state)
        fault = seen.fault if transition else None
        old_vmi = server["system_metadata"].get(sysmeta.REPLACED_VMI)
        ends_task = seen.task_state is None and seen.vm_state != states.BUILDING
        open_event = bool(server["system_metadata"].get(sysmeta.TASK_EVENT))
        if current == changes and not (ends_task and (open_event or old_vmi)):
            if key is not None:
                self._quiet[uuid] = key
            return  # nothing changed: only read

        def save(conn: Connection) -> None:
            if not cas.save_state(conn, uuid, expected_task_state=[server.get("task_state")], **changes):
                return  # an API action moved the task meanwhile: it wins, the next pass looks again
            if fault is not None:
                instance_faults.add_fault(conn, uuid, code=fault.code, message=fault.message,
                                          details=fault.details or None, host=seen.host)
            if seen.stopped_by_sync:
                # Nova's power sync stops a guest it finds off through the stop API: a "stop" action
                # (no user, no project) whose compute_stop_instance event ran on the server's host
                action_id = instance_actions.start_action(conn, uuid, "stop", POWER_SYNC)
                event_id = instance_actions.start_event(conn, action_id, events.STOP, seen.host or server.get("host"))
                instance_actions.finish_event(conn, event_id, "Success")
            if ends_task:
                tasks.finish(conn, server, fault, seen.host or server.get("host"))
                if old_vmi:
                    instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.REPLACED_VMI, None)

        _queue(ctx, writes, save)
        if ctx.claims is not None and server.get("vm_state") == states.BUILDING and seen.vm_state == states.ERROR:
            # a failed build holds nothing and is on no node, as Nova leaves it
            ctx.claims.release(uuid)

            def unplaced(conn: Connection) -> None:
                cas.save_state(conn, uuid, host=None, node=None)

            _queue(ctx, writes, unplaced)

    def _node_gone(self, ctx: Context, vmi: dict[str, Any] | None) -> bool:
        """Whether the VMI failed on a node that was deleted since. Asked only of VMIs the node controller
        failed as NodeUnresponsive (a VMI whose pod went with its node fails without a reason and needs
        no asking): a node that stopped answering keeps its servers as they were until it is deleted."""
        status = (vmi or {}).get("status") or {}
        node = status.get("nodeName")
        if not node or status.get("phase") != "Failed" or status.get("reason") != "NodeUnresponsive":
            return False
        found_gone = self._nodes_gone.get(node)
        if found_gone is not None and self.clock() - found_gone < _GONE_NODE_RECHECK:
            return True  # the servers of a deleted node stay there until started or deleted: not asked each pass
        if node not in self._nodes_seen:
            self._nodes_seen[node] = ctx.cluster.node_exists(node)
            if self._nodes_seen[node]:
                self._nodes_gone.pop(node, None)
            else:
                self._nodes_gone[node] = self.clock()
        return not self._nodes_seen[node]

    def _refresh_image_token(self, ctx: Context, namespace: str, uuid: str, project_id: str) -> None:
        """Rewrite the image token Secret while the import runs: CDI reads it again at each retry, and a
        service token expires. keystoneauth hands out the same token until it nears its expiry."""
        try:
            token = ctx.objects.token()
        except Exception as exc:  # noqa: BLE001 - identity service away: the Secret keeps the last token
            LOG.warning("server %s: no service token to renew the image import's: %s", uuid, exc)
            return
        if token is not None:
            ctx.cluster.apply_if_changed(image_token_secret(uuid, namespace, token, project_id), self._tokens)


def _keep_address(ctx: Context, namespace: str, uuid: str, vm: dict[str, Any],
                  shown: dict[str, list[dict[str, Any]]]) -> None:
    """``[controller] keep_pod_address``: the VM's template asks the network plugin for the address its guest
    has, so that the next VMI (a stop and start, a reboot, a resize, a rebuild) gets it again. A merge
    patch of the template's annotations only: KubeVirt restarts nothing for it."""
    wanted = pod_address_annotation(ctx.settings.keep_pod_address,
                                    [a["addr"] for entries in shown.values() for a in entries])
    if wanted is None:
        return
    annotations = (((vm.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}
    if annotations.get(wanted[0]) != wanted[1]:
        body = {"spec": {"template": {"metadata": {"annotations": {wanted[0]: wanted[1]}}}}}
        ctx.cluster.patch("VirtualMachine", namespace, server_vm_name(uuid), body, patch="merge")


def _write(ctx: Context, writes: list[Write]) -> None:
    """The state changes observed so far, in one transaction (each still compares the task it read)."""
    if writes:
        with transaction(ctx.engine) as conn:
            for write in writes:
                write(conn)
        writes.clear()


def _queue(ctx: Context, writes: list[Write] | None, write: Write) -> None:
    if writes is None:
        _write(ctx, [write])
    else:
        writes.append(write)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
