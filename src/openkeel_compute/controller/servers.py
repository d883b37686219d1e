"""The server loop: the ``server`` outbox rows into KubeVirt objects and verbs, and KubeVirt's status back.

Decisions are pure (``verb_for``, ``kubevirt.server.compose``, ``kubevirt.vmstatus.observe``); the I/O is in
``Gateway`` (the cluster) and ``ServerLoop`` (the database). One pass:

- every pending ``server`` row, in id order: ``create`` composes the server's objects and applies them
  (server-side apply, field manager openkeel, strict field validation), then starts the VM; the power
  operations call KubeVirt's subresources; ``delete`` deletes the VM (its DataVolumes go with it), its
  Secrets and its preference. A row is done once the cluster took its request; a failure leaves it pending
  with the error, for the next pass;
- every live server is observed (VM, VMI, DataVolumes) and its row written with the compare-and-swap on
  the task_state read: a concurrent API action wins. A build ends ACTIVE or ERROR (with a fault), a delete
  ends with the row soft-deleted once nothing of the server is left in the cluster.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from lightkube import Client
from sqlalchemy import Engine, and_, select, update

from openkeel_compute.compute import flavor_copy, instances, soft_delete
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.controller import console
from openkeel_compute.controller import resize as resize_steps
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.kube import ClusterError, Retry
from openkeel_compute.controller.watch import Snapshot, WatchedObjects
from openkeel_compute.db import models
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt import mapping
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import (
    DEFAULT_SERVER_OPTIONS,
    ServerOptions,
    compose,
    image_token_secret,
    rebuild_root_volume,
)
from openkeel_compute.kubevirt.vmstatus import Fault, Observation, observe
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model import operations as ops
from openkeel_compute.model.states import task_states
from openkeel_compute.placement.errors import PlacementError, PlacementUnavailable

LOG = logging.getLogger(__name__)
FIELD_MANAGER = mapping.MANAGER
OUTBOX = models.OUTBOX
_ERROR_MAX = 2000
_READ_CHUNK = 500  # servers whose metadata one statement reads
#: seconds a node found deleted is taken as deleted before it is asked about again (it may be registered anew)
_GONE_NODE_RECHECK = 60.0
_FRESH_ONE_BY_ONE = 10  # servers of a pass read from the cluster one by one before it is listed instead
#: seconds a server may stay in BUILD before it goes to ERROR (Nova's instance_build_timeout; Nova's
#: default 0 would let a build that never starts, or whose objects the cluster keeps refusing, wait forever)
BUILD_TIMEOUT = 3600.0
# What a restarted controller needs to finish a task, kept in the server's system metadata (never shown by
# the API): the event its running task finishes ("<outbox row id>:<event id>"), and the VMI a hard reboot
# replaces (the task is done only once another VMI runs).
SYSMETA_EVENT = sysmeta.TASK_EVENT
SYSMETA_OLD_VMI = sysmeta.REPLACED_VMI
SYSMETA_TRIED = sysmeta.TRIED_NODES

# operation -> KubeVirt's subresource verb (gateway.SUBRESOURCES)
VERBS: dict[str, str] = {"start": "start", "stop": "stop", "reboot-hard": "restart", "reboot-soft": "softreboot",
                         "pause": "pause", "unpause": "unpause"}
# The instance action event each operation records (as Nova's compute service names them).
EVENTS = {ops.CREATE: events.BUILD, ops.DELETE: events.TERMINATE, ops.START: events.START, ops.STOP: events.STOP,
          ops.REBOOT_SOFT: events.REBOOT, ops.REBOOT_HARD: events.REBOOT, ops.PAUSE: events.PAUSE,
          ops.UNPAUSE: events.UNPAUSE}
#: who Nova's power sync acts as: a periodic task's admin context, with no user and no project
POWER_SYNC = instances.Actor(None, None)  # type: ignore[arg-type]


class Pending(Exception):
    """An operation waits for the server's VMI to stop or to run: its outbox row is tried again next pass."""


class RebuildPending(Pending):
    """A rebuild waits for the server's VMI to stop."""


def verb_for(operation: str) -> str | None:
    """KubeVirt's subresource verb of a power operation, or None for create, delete and unknown operations."""
    return VERBS.get(operation)


def _verb(cluster: Gateway, namespace: str, name: str, operation: str) -> None:
    cluster.subresource(namespace, name, VERBS[operation])


# The guest's name of the first disk on each bus, as Nova's libvirt driver names it; KubeVirt's default bus is virtio.
_DISK_PREFIX = {"virtio": "vd", "scsi": "sd", "sata": "sd", "usb": "sd", "ide": "hd", "xen": "xvd"}


def root_device_name(system_metadata: dict[str, str]) -> str:
    """The root disk's device name in the guest, from the image's hw_disk_bus (the server keeps it)."""
    return f"/dev/{_DISK_PREFIX.get(system_metadata.get('image_hw_disk_bus') or 'virtio', 'vd')}a"


@dataclasses.dataclass(frozen=True)
class ServerRow:
    id: int
    server_uuid: str
    operation: str
    payload: dict[str, Any]


def _pending_servers(engine: Engine, limit: int) -> list[ServerRow]:
    query = (select(OUTBOX.c.id, OUTBOX.c.object_id, OUTBOX.c.operation, OUTBOX.c.payload)
             .where(and_(OUTBOX.c.done_at.is_(None), OUTBOX.c.kind == "server")).order_by(OUTBOX.c.id).limit(limit))
    with reader(engine) as conn:
        return [ServerRow(i, o, op, p if isinstance(p, dict) else json.loads(p or "{}"))
                for i, o, op, p in conn.execute(query)]


def _finish_rows(target: Engine | Any, ids: list[int], error: str | None) -> None:
    """Rows done (``error`` None) or failed once more; ``target``: an engine, or a transaction's connection."""
    values: dict[str, Any] = ({"done_at": models.utcnow()} if error is None
                              else {"attempts": OUTBOX.c.attempts + 1, "last_error": error[:_ERROR_MAX]})
    statement = update(OUTBOX).where(OUTBOX.c.id.in_(ids), OUTBOX.c.done_at.is_(None)).values(values)
    if isinstance(target, Engine):
        with transaction(target) as conn:
            conn.execute(statement)
    else:
        target.execute(statement)


def _build_moves_on(server: dict[str, Any], seen: Observation) -> bool:
    """A build seen to reach a later step, or ACTIVE, with no fault: the watches never show a step the
    build has not reached, so this needs no fresh read (a thousand builds under way would list the
    whole cluster on every pass). Whatever else changes state is concluded from a fresh read."""
    if server.get("vm_state") != states.BUILDING or seen.fault is not None or seen.deleted:
        return False
    steps = _BUILD_STEPS
    now = steps.get((states.BUILDING, server.get("task_state")))
    later = steps.get((seen.vm_state, seen.task_state))
    return now is not None and later is not None and later > now


# A build's steps as the cluster's objects show them, in the order it goes through them.
_BUILD_STEPS = {(states.BUILDING, task): i for i, task in enumerate((
    task_states.SCHEDULING, task_states.BLOCK_DEVICE_MAPPING, task_states.NETWORKING, task_states.SPAWNING))}
_BUILD_STEPS[(states.ACTIVE, None)] = len(_BUILD_STEPS)


def _quiet_key(server: dict[str, Any], namespace: str, snapshot: Snapshot) -> tuple | None:
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


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class ServerLoop:
    def __init__(self, engine: Engine, cluster: Gateway, options: ServerOptions = DEFAULT_SERVER_OPTIONS, *,
                 build_timeout: float = BUILD_TIMEOUT, unschedulable_grace: float = 0, network_name: str = "pod-network",
                 batch_size: int = 100, now: Callable[[], dt.datetime] = _now, images: ImageAccess | None = None,
                 orphan_interval: float = 300.0, clock: Callable[[], float] = time.monotonic,
                 watch: bool = False, reclaim_interval: float = 0, claims: Any = None) -> None:
        self.engine = engine
        self.claims = claims  # controller.claims.Claims: resources claimed in Placement (None: not claimed)
        self.cluster = cluster
        self.options = options
        self.build_timeout = build_timeout
        self.unschedulable_grace = unschedulable_grace
        self.network_name = network_name
        self.batch_size = batch_size
        self.now = now
        self.reclaim_interval = reclaim_interval  # Nova's reclaim_instance_interval (0: servers are never kept)
        self.resize_confirm_window = 0.0  # Nova's resize_confirm_window (0: resizes wait for the user)
        self.allow_resize_to_same_host = False  # Nova's option: a resize claims on another node by default
        self.placement: Any = None  # the Placement client, when [placement] is configured
        self.images = images
        self.orphan_interval = orphan_interval
        self.clock = clock
        self._next_sweep = 0.0  # the first pass looks for orphans
        self._tokens: dict[str, str] = {}  # namespace/name of an image token Secret -> the content last written
        self.watched = WatchedObjects(cluster).start() if watch else None
        self._namespaces: set[str] = set()  # namespaces seen to exist this pass (asked again after a failure)
        self.rows_done = 0  # rows the last pass did: when some were, the controller looks again without waiting
        self._placed: list[tuple[str, str, str]] = []  # servers whose objects a pass created: uuid, namespace, name
        self._placed_before: set[str] = set()  # the servers whose objects the pass before created
        self._fresh: Snapshot | None = None  # the cluster as listed during this observation pass, once needed
        self._fresh_reads = 0  # servers read one by one during this observation pass
        self._nodes_seen: dict[str, bool] = {}  # node name -> it exists, asked once per observation pass
        self._nodes_gone: dict[str, float] = {}  # node name -> when it was found deleted (not asked again soon)
        self._quiet: dict[str, tuple] = {}  # uuid -> _quiet_key of its last observation, which changed nothing

    def close(self) -> None:
        if self.watched is not None:
            self.watched.stop()

    def run_once(self) -> dict[str, str]:
        """One pass: the pending rows, then every live server observed, and every ``orphan_interval`` the
        sweep of objects whose server is gone. Returns server uuid -> problem."""
        problems = self.process_outbox()
        self.observe_all(problems)
        if self.reclaim_interval > 0:
            self.reclaim()
        resize_steps.auto_confirm(self, self.resize_confirm_window)
        if self.clock() >= self._next_sweep:
            try:
                self.sweep_orphans()
            except ClusterError as exc:
                problems.setdefault("orphans", f"sweep: {exc}")
            else:
                self._next_sweep = self.clock() + self.orphan_interval
        return problems

    # -- the outbox ----------------------------------------------------------------------------------

    def process_outbox(self) -> dict[str, str]:
        """The pending rows in order. Three transactions for the whole batch (the events started, the
        rows a later delete makes moot, then the rows done with where their objects went) plus one per
        failed row; the cluster's requests in between, row by row."""
        problems: dict[str, str] = {}
        self._namespaces.clear()
        self.rows_done = 0
        self._placed_before = {uuid for uuid, _namespace, _name in self._placed}
        self._placed = []
        if self.claims is not None:
            self.claims.begin_pass()  # candidates are shared within a pass only, never kept across
        rows = _pending_servers(self.engine, self.batch_size)
        reads = [row for row in rows if row.operation == console.OPERATION]
        for row in reads:  # a read: neither waits behind the server's other rows nor holds them
            console.answer(self.engine, self.cluster, self.options.mapping.namespace_for, row.server_uuid)
        if reads:
            _finish_rows(self.engine, [row.id for row in reads], None)
            self.rows_done = len(reads)
        rows = [row for row in rows if row.operation != console.OPERATION]
        deletes: dict[str, int] = {}
        for row in rows:
            if row.operation == "delete":
                deletes.setdefault(row.server_uuid, row.id)
        # A delete follows: it removes whatever the rows before it would make, and must not wait behind a
        # row that keeps failing (a create the cluster refuses would hold the delete for ever).
        moot = [row.id for row in rows if row.id < deletes.get(row.server_uuid, 0)]
        if moot:
            _finish_rows(self.engine, moot, None)
        rows = [row for row in rows if row.id >= deletes.get(row.server_uuid, 0)]
        if not rows:
            return problems
        with transaction(self.engine) as conn:
            for row in rows:
                self._start_event(conn, row)
        if self.claims is not None:
            self._claim_creates(rows)
        done: list[int] = []
        for row in rows:
            if row.server_uuid in problems:
                _finish_rows(self.engine, [row.id], problems[row.server_uuid])
                continue  # keep a server's rows in order: none passes one that failed
            try:
                self._act(row)
            except Exception as exc:  # noqa: BLE001 - the row stays pending with the error, tried again later
                problems[row.server_uuid] = f"{row.operation}: {exc}"
                LOG.warning("server %s %s: %s", row.server_uuid, row.operation, exc)
                _finish_rows(self.engine, [row.id], problems[row.server_uuid])
            else:
                done.append(row.id)
        with transaction(self.engine) as conn:
            for uuid, namespace, name in self._placed:  # where the API and the next pass find the objects
                instances.save_state(conn, uuid, namespace=namespace, vm_name=name)
            if done:
                _finish_rows(conn, done, None)
        self.rows_done = len(reads) + len(done)
        return problems

    def _claim_creates(self, rows: list[ServerRow]) -> None:
        """The builds of a pass claimed together (``Claims.claim_many``: one POST /allocations), their
        host and node written in one transaction; what it leaves is claimed one by one in ``_act``. Only a
        server's first row of the pass: a create behind another row of its server may not run now."""
        first: dict[str, ServerRow] = {}
        for row in rows:
            first.setdefault(row.server_uuid, row)
        creates = [row.server_uuid for row in first.values() if row.operation == "create"]
        if len(creates) < 2:
            return
        servers = [s for s in map(self._server, creates) if s is not None and s["vm_state"] == states.BUILDING]
        made = self.claims.claim_many(servers)
        if made:
            with transaction(self.engine) as conn:
                for uuid, node in made.items():
                    instances.save_state(conn, uuid, host=node, node=node)

    def _start_event(self, conn: Any, row: ServerRow) -> None:
        """The operation's event, in the instance action of the request that asked for it.

        Started once per outbox row, before the cluster is asked, and kept in the server's system
        metadata: a controller restarted at any point finishes it rather than losing or repeating it.
        """
        request_id = row.payload.get("request_id")
        event = EVENTS.get(row.operation)
        if not request_id or event is None:
            return
        if not instances.ever_existed(conn, row.server_uuid):
            return
        current = _sysmeta(conn, row.server_uuid, SYSMETA_EVENT)
        if current and current.split(":", 1)[0] == str(row.id):
            return  # started by an earlier attempt at this row
        if current:  # a delete overrides the task that ran: its event ends, unfinished
            instances.finish_event(conn, int(current.split(":", 1)[1]), "Error")
        action_id = instances.action_for_request(conn, row.server_uuid, request_id)
        if action_id is not None:
            event_id = instances.start_event(conn, action_id, event)
            _set_sysmeta(conn, row.server_uuid, SYSMETA_EVENT, f"{row.id}:{event_id}")

    @staticmethod
    def _event_of(conn: Any, uuid: str) -> dict[str, Any]:
        """The server's open event as _finish_event reads it, from the database as it is now."""
        return {"uuid": uuid, "system_metadata": {SYSMETA_EVENT: _sysmeta(conn, uuid, SYSMETA_EVENT)}}

    def _finish_event(self, conn: Any, server: dict[str, Any], fault: Any, host: str | None = None) -> None:
        """Finish the operation's event, on the server's host as Nova's compute service records it."""
        value = server["system_metadata"].get(SYSMETA_EVENT)
        if not value:
            return
        event_id = int(value.split(":", 1)[1])
        if fault is None:
            instances.finish_event(conn, event_id, "Success", host=host)
        else:
            instances.finish_event(conn, event_id, "Error", traceback=fault.details or fault.message,
                                   details=fault.message, host=host)
        _set_sysmeta(conn, server["uuid"], SYSMETA_EVENT, None)

    def _server(self, uuid: str) -> dict[str, Any] | None:
        with reader(self.engine) as conn:
            try:
                row = instances.get(conn, uuid)
            except Exception:  # noqa: BLE001 - gone (deleted meanwhile): nothing to do
                return None
            row["metadata"] = instances.metadata_of(conn, uuid)
            row["system_metadata"] = instances.metadata_of(conn, uuid, system=True)
        return row

    def _act(self, row: ServerRow) -> None:
        server = self._server(row.server_uuid)
        if server is None:
            return
        namespace = self.options.mapping.namespace_for(str(server["project_id"]))
        name = server_vm_name(row.server_uuid)
        if row.operation == "create":
            if server["vm_state"] != states.BUILDING:
                return  # the build ended meanwhile (ERROR after instance_build_timeout): no VM for it now
            if self.claims is not None and not self._claim(server):
                return  # no node has room: the build failed, nothing was made
            objects = self._compose(server)
            if namespace not in self._namespaces:
                self.cluster.ensure_namespace(namespace, str(server["project_id"]))
                self._namespaces.add(namespace)
            for body in objects.documents():
                self.cluster.apply(body)
            self._placed.append((row.server_uuid, namespace, name))  # written with the rows done
            _verb(self.cluster, namespace, name, "start")
        elif row.operation == "delete":
            self.cluster.delete_server(namespace, row.server_uuid)
            resize_steps.ResizeSteps(self).deleted(row.server_uuid)
        elif row.operation == "rebuild":
            self._rebuild(row, server, namespace)
        elif row.operation == "soft-delete":
            self._soft_delete(row, server, namespace)
        elif row.operation == "restore":
            self._restore(row, server, namespace)
        elif row.operation in resize_steps.OPERATIONS:
            resize_steps.ResizeSteps(self).act(row, server, namespace)
        elif verb_for(row.operation) is not None:
            if row.operation == "start" and not self._start_where_it_can_run(server):
                return  # no node can take it: the start failed, the server stays SHUTOFF
            if row.operation == "reboot-hard":  # done only once a new VMI runs, not while the old one does
                _vm, vmi, _dvs = self.cluster.look(namespace, row.server_uuid)
                uid = ((vmi or {}).get("metadata") or {}).get("uid")
                phase = ((vmi or {}).get("status") or {}).get("phase")
                if not uid or phase in ("Succeeded", "Failed"):
                    # a hard reboot of a stopped server starts it, as Nova's does; KubeVirt
                    # restarts only a running VM
                    if not self._start_where_it_can_run(server):
                        return
                    _verb(self.cluster, namespace, name, "start")
                    return
                with transaction(self.engine) as conn:
                    _set_sysmeta(conn, row.server_uuid, SYSMETA_OLD_VMI, uid)
            _verb(self.cluster, namespace, name, row.operation)
        else:
            raise ValueError(f"unknown server operation {row.operation!r}")

    def _claim(self, server: dict[str, Any]) -> bool:
        """Claim the server's resources (controller/claims.py): its node is then its host and node, and
        the VM is pinned there. False when no node has room: the build ended in ERROR with Nova's fault."""
        from openkeel_compute.controller.claims import NoValidHost

        try:
            node, _alternates = self.claims.claim(server)
        except NoValidHost as exc:
            with transaction(self.engine) as conn:
                if instances.save_state(conn, server["uuid"], expected_task_state=[server.get("task_state")],
                                        vm_state=states.ERROR, task_state=None):
                    instances.add_fault(conn, server["uuid"], code=exc.fault.code, message=exc.fault.message,
                                        details=exc.fault.details)
                    self._finish_event(conn, server, exc.fault)
            return False
        if server.get("node") != node:
            with transaction(self.engine) as conn:
                instances.save_state(conn, server["uuid"], host=node, node=node)
        server["host"] = server["node"] = node
        return True

    def _start_where_it_can_run(self, server: dict[str, Any]) -> bool:
        """Before a start (os-start, or a hard reboot of a stopped server): a server whose node was deleted
        has its VM pinned to a node that will never take it again. Its resources are claimed on a node that
        exists (one PUT at its consumer generation, which drops the old node's allocation), and the VM is
        pinned there, as Nova's evacuate rebuilds the server of a gone host on another one. When no node can
        take it the start fails as a Nova start does: the task goes back, the server stays SHUTOFF with
        "No valid host was found." as its fault, and nothing moved. True when the start can go on."""
        from openkeel_compute.controller.claims import NoValidHost

        node = server.get("node")
        if self.claims is None or not node or self.cluster.node_exists(node):
            return True
        moved = self.claims.move(server, {node})
        if moved is None:
            fault = NoValidHost(f"The server's node {node} is gone and no other node can take it").fault
            with transaction(self.engine) as conn:
                if instances.save_state(conn, server["uuid"], expected_task_state=[server.get("task_state")],
                                        task_state=None):
                    instances.add_fault(conn, server["uuid"], code=fault.code, message=fault.message,
                                        details=fault.details, host=node)
                    self._finish_event(conn, server, fault, node)
            return False
        LOG.info("server %s: its node %s is gone, starting it on %s", server["uuid"], node, moved)
        # the VM is pinned before the row names the new node: a failure in between leaves the row on the
        # gone node, and the next attempt moves again (to the node the claim now holds, or another)
        self.cluster.apply(self._compose({**server, "host": moved, "node": moved}).vm)
        with transaction(self.engine) as conn:
            instances.save_state(conn, server["uuid"], host=moved, node=moved)
        server["host"] = server["node"] = moved
        return True

    def _try_alternate(self, server: dict[str, Any], namespace: str) -> bool:
        """A build whose node cannot run it moves to another node Placement offers (Nova's alternates),
        until ``[scheduler] max_attempts`` nodes were tried: the claim moves, the VM is pinned to the new
        node and restarted. False when no attempt is left or no other node has room."""
        tried = [n for n in (server["system_metadata"].get(SYSMETA_TRIED) or "").split(",") if n]
        if server.get("node") and server["node"] not in tried:
            tried.append(server["node"])
        if len(tried) >= self.claims.max_attempts:
            return False
        node = self.claims.move(server, set(tried))
        if node is None:
            return False
        LOG.info("server %s: node %s cannot run it, trying %s (attempt %d of %d)", server["uuid"],
                 server.get("node"), node, len(tried) + 1, self.claims.max_attempts)
        with transaction(self.engine) as conn:
            instances.save_state(conn, server["uuid"], host=node, node=node)
            _set_sysmeta(conn, server["uuid"], SYSMETA_TRIED, ",".join([*tried, node]))
        server["host"] = server["node"] = node
        self.cluster.apply(self._compose(server).vm)
        _verb(self.cluster, namespace, server_vm_name(server["uuid"]), "reboot-hard")  # KubeVirt's restart
        return True

    def _compose(self, server: dict[str, Any], flavor: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """The server's objects from its row (on ``flavor``, a flavor copy entry, instead of its current
        one when given), with the image service's URL and the service token (every root disk import, at
        create and at rebuild, goes through here)."""
        image = image_from_system_metadata({k: v for k, v in server["system_metadata"].items()
                                            if k.startswith("image_")})
        image["id"] = server["image_ref"]
        options, token = self.options, None
        if self.images is not None:
            options = dataclasses.replace(options, image_endpoint=self.images.endpoint())
            token = self.images.token()
        return compose(server, flavor or flavor_copy.FlavorCopy.loads(server["flavor"]).cur, image,
                       server.get("key_data"), options, image_token=token, **kwargs)

    # -- rebuild ----------------------------------------------------------------------------------------

    def _rebuild(self, row: ServerRow, server: dict[str, Any], namespace: str) -> None:
        """Replace the root disk (docs/servers.md, "Rebuild"). Each pass does what it can and raises
        RebuildPending while the old VMI still runs, so the row is tried again on the next pass:
        stop the VM; once its VMI is gone, apply the VM with a new root DataVolume from the new
        image and delete the old disk (task ``rebuild_block_device_mapping``); then start it again
        (``rebuild_spawning``, which the observer ends ACTIVE once it runs), or, for a server
        rebuilt while SHUTOFF, leave it stopped and end the task here, as Nova does."""
        uuid = row.server_uuid
        task = server.get("task_state")
        if task == task_states.REBUILDING:
            _vm, vmi, dvs = self.cluster.look(namespace, uuid)
            if vmi is not None and ((vmi.get("status") or {}).get("phase")) not in ("Succeeded", "Failed"):
                _verb(self.cluster, namespace, server_vm_name(uuid), "stop")
                raise RebuildPending("waiting for the server's virtual machine to stop before its root disk "
                                     "is replaced")
            self._replace_root_disk(row, server, namespace, dvs)
            with transaction(self.engine) as conn:
                if not instances.save_state(conn, uuid, expected_task_state=task_states.REBUILDING,
                                            task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING):
                    return  # deleted or reset meanwhile: that task wins
                action_id = instances.action_for_request(conn, uuid, row.payload.get("request_id") or "")
                if action_id is not None:
                    event_id = instances.start_event(conn, action_id, events.REBUILD)
                    _set_sysmeta(conn, uuid, SYSMETA_EVENT, f"{row.id}:{event_id}")
            task = task_states.REBUILD_BLOCK_DEVICE_MAPPING
        if task != task_states.REBUILD_BLOCK_DEVICE_MAPPING:
            return  # no longer this rebuild's to finish
        if row.payload.get("old_vm_state") == states.STOPPED:
            # done once the new disk is there, as Nova's rebuild of a stopped server ends after the
            # spawn: the disk is imported, the guest is off
            root = rebuild_root_volume(uuid, str(row.payload.get("request_id") or row.id))
            _vm, _vmi, dvs = self.cluster.look(namespace, uuid)
            phase = next((((dv.get("status") or {}).get("phase")) for dv in dvs
                          if (dv.get("metadata") or {}).get("name") == root), None)
            if phase == "Failed":
                with transaction(self.engine) as conn:
                    if instances.save_state(conn, uuid, expected_task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING,
                                            vm_state=states.ERROR, task_state=None):
                        message = f"Rebuild of instance {uuid} failed: the new root disk could not be imported"
                        instances.add_fault(conn, uuid, code=500, message=message,
                                            details=f"KubeVirt: DataVolume {root} Failed", host=server.get("host"))
                        self._finish_event(conn, self._event_of(conn, uuid), Fault(500, message, ""))
                return
            if phase != "Succeeded":
                raise RebuildPending("waiting for the new root disk to be imported")
            with transaction(self.engine) as conn:
                if instances.save_state(conn, uuid, expected_task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING,
                                        vm_state=states.STOPPED, task_state=None,
                                        power_state=states.power_state.SHUTDOWN):
                    self._finish_event(conn, self._event_of(conn, uuid), None)
            return
        _verb(self.cluster, namespace, server_vm_name(uuid), "start")
        with transaction(self.engine) as conn:
            instances.save_state(conn, uuid, expected_task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING,
                                 task_state=task_states.REBUILD_SPAWNING)

    def _replace_root_disk(self, row: ServerRow, server: dict[str, Any], namespace: str,
                           dvs: list[dict[str, Any]]) -> None:
        uuid = row.server_uuid
        root = rebuild_root_volume(uuid, str(row.payload.get("request_id") or row.id))
        objects = self._compose(server, root_volume=root)
        self.cluster.ensure_namespace(namespace, str(server["project_id"]))
        for body in objects.documents():
            self.cluster.apply(body)
        for dv in dvs:
            name = (dv.get("metadata") or {}).get("name")
            if name and name != root:
                self.cluster.delete(ObjectKey("DataVolume", namespace, name))
        wanted = {s["metadata"]["name"] for s in objects.secrets}
        for secret in self.cluster.secrets_of(namespace, uuid):
            if secret not in wanted:  # a key pair the rebuild removed
                self.cluster.delete(ObjectKey("Secret", namespace, secret))
        if objects.preference is None:  # the new image needs no preference of its own
            self.cluster.delete(ObjectKey(mapping.PREFERENCE, namespace, server_vm_name(uuid)))

    # -- soft delete, restore, reclaim ---------------------------------------------------------------

    def _vmi_phase(self, namespace: str, uuid: str) -> str | None:
        """The VMI's phase ("" when it has none yet), None without a VMI."""
        _vm, vmi, _dvs = self.cluster.look(namespace, uuid)
        return None if vmi is None else ((vmi.get("status") or {}).get("phase") or "")

    def _end_task(self, row: ServerRow, event: str, expected: str, **changes: Any) -> None:
        """End ``expected`` with ``changes`` and record ``event`` in the request's action, done."""
        with transaction(self.engine) as conn:
            if not instances.save_state(conn, row.server_uuid, expected_task_state=expected, **changes):
                return  # another task (a delete) took over
            action_id = instances.action_for_request(conn, row.server_uuid, row.payload.get("request_id") or "")
            if action_id is not None:
                instances.finish_event(conn, instances.start_event(conn, action_id, event), "Success")

    def _soft_delete(self, row: ServerRow, server: dict[str, Any], namespace: str) -> None:
        """Stop the VM (its disks stay), then vm_state soft-delete: what Nova's compute service does
        when its driver has no soft delete of its own."""
        if server.get("task_state") != task_states.SOFT_DELETING:
            return
        phase = self._vmi_phase(namespace, row.server_uuid)
        if phase is not None and phase not in ("Succeeded", "Failed"):
            _verb(self.cluster, namespace, server_vm_name(row.server_uuid), "stop")
            raise Pending("waiting for the server's virtual machine to stop")
        self._end_task(row, events.SOFT_DELETE, task_states.SOFT_DELETING, vm_state=states.SOFT_DELETED,
                       task_state=None, power_state=states.power_state.SHUTDOWN)

    def _restore(self, row: ServerRow, server: dict[str, Any], namespace: str) -> None:
        """Start the VM again; ACTIVE once it runs."""
        if server.get("task_state") != task_states.RESTORING:
            return
        phase = self._vmi_phase(namespace, row.server_uuid)
        if phase == "Running":
            self._end_task(row, events.RESTORE, task_states.RESTORING, vm_state=states.ACTIVE,
                           task_state=None, power_state=states.power_state.RUNNING)
            return
        if phase is None or phase in ("Succeeded", "Failed"):
            _verb(self.cluster, namespace, server_vm_name(row.server_uuid), "start")
        raise Pending("waiting for the server's virtual machine to run")

    def reclaim(self) -> list[str]:
        """Delete for good the servers soft-deleted longer than the interval (as Nova's periodic
        task does: no instance action). Returns their uuids."""
        with reader(self.engine) as conn:
            due = soft_delete.due_for_reclaim(conn, self.reclaim_interval, self.now())
        done = []
        for uuid in due:
            with transaction(self.engine) as conn:
                if instances.save_state(conn, uuid, expected_task_state=None, task_state=task_states.DELETING,
                                        progress=0):
                    instances.outbox(conn, uuid, "delete", instances.Actor("openkeel", "openkeel"))
                    done.append(uuid)
        return done

    # -- observing -----------------------------------------------------------------------------------

    def observe_all(self, problems: dict[str, str] | None = None) -> None:
        """Every live server against the cluster: the rows read in bulk (three statements however many
        servers), the state changes written ``batch_size`` servers per transaction."""
        problems = problems if problems is not None else {}
        servers = self._live_servers()
        if not servers:
            return
        try:
            snapshot = (self.watched.snapshot() if self.watched is not None else None) or self.cluster.snapshot()
        except ClusterError as exc:  # the cluster is away: states stay as last seen
            for server in servers:
                problems.setdefault(server["uuid"], f"observe: {exc}")
            return
        writes: list[Callable[[Any], None]] = []
        quiet, self._quiet = self._quiet, {}
        # Servers whose objects this pass or the one before created, and which the watches do not show yet,
        # are observed on a later pass: each would cost a read of the cluster to find what is known (their
        # build goes on); after that a VM still missing is read from the cluster (one removed meanwhile).
        placed = ({uuid for uuid, _namespace, _name in self._placed} | self._placed_before) if snapshot.cached \
            else set()
        try:
            for server in servers:
                if server["uuid"] in placed and snapshot.look(
                        self.options.mapping.namespace_for(str(server["project_id"])), server["uuid"])[0] is None:
                    continue
                key = _quiet_key(server, self.options.mapping.namespace_for(str(server["project_id"])), snapshot)
                if key is not None and quiet.get(server["uuid"]) == key:
                    self._quiet[server["uuid"]] = key  # nothing it depends on changed: it would change nothing
                    continue
                try:
                    self.observe_one(server["uuid"], snapshot, server=server, writes=writes, quiet_key=key)
                except (ClusterError, PlacementError) as exc:
                    problems.setdefault(server["uuid"], f"observe: {exc}")
                if len(writes) >= self.batch_size:
                    self._write(writes)
            self._write(writes)
        finally:
            self._fresh, self._fresh_reads = None, 0
            self._nodes_seen.clear()

    def _look_fresh(self, namespace: str, uuid: str) -> tuple[dict | None, dict | None, list[dict]]:
        """A server's objects read from the cluster, not the watches. The first few of a pass are read
        server by server; then the cluster is listed once for the rest of the pass (three lists cost what
        a few servers' reads cost, and a pass over a thousand servers may find hundreds changed)."""
        if self._fresh is None and self._fresh_reads < _FRESH_ONE_BY_ONE:
            self._fresh_reads += 1
            return self.cluster.look(namespace, uuid)
        if self._fresh is None:
            self._fresh = self.cluster.snapshot()
        return self._fresh.look(namespace, uuid)

    def _live_servers(self) -> list[dict[str, Any]]:
        """Every live server as ``_server`` reads one, with its metadata and system metadata."""
        with reader(self.engine) as conn:
            rows = instances.live_rows(conn)
            metadata: dict[str, dict[str, str]] = {}
            system: dict[str, dict[str, str]] = {}
            for start in range(0, len(rows), _READ_CHUNK):  # bounded IN lists, whatever the engine
                uuids = [r["uuid"] for r in rows[start:start + _READ_CHUNK]]
                metadata.update(instances.metadata_by_instance(conn, uuids))
                system.update(instances.metadata_by_instance(conn, uuids, system=True))
        for row in rows:
            row["metadata"] = metadata.get(row["uuid"], {})
            row["system_metadata"] = system.get(row["uuid"], {})
        return rows

    def _write(self, writes: list[Callable[[Any], None]]) -> None:
        """The state changes observed so far, in one transaction (each still compares the task it read)."""
        if writes:
            with transaction(self.engine) as conn:
                for write in writes:
                    write(conn)
            writes.clear()

    def observe_one(self, uuid: str, snapshot: Snapshot | None = None, *, server: dict[str, Any] | None = None,
                    writes: list[Callable[[Any], None]] | None = None, quiet_key: tuple | None = None
                    ) -> Observation | None:
        """One server against the cluster. ``server``: its row as ``_server`` reads it (read now when not
        given); ``writes``: where the state change goes to be written with others (written now when not
        given); ``quiet_key``: what the observation depends on (``_quiet_key``), kept when it changes
        nothing so that the next pass skips the server while the key stays the same."""
        server = server if server is not None else self._server(uuid)
        if server is None:
            return None
        namespace = self.options.mapping.namespace_for(str(server["project_id"]))
        vm, vmi, dvs = (snapshot or self.cluster).look(namespace, uuid)
        if vm is None and snapshot is not None and snapshot.cached:
            vm, vmi, dvs = self._look_fresh(namespace, uuid)  # a watch may lag our own create: ask
        server["vmi_uid"] = server["system_metadata"].get(SYSMETA_OLD_VMI)
        if vm is not None and server.get("vm_state") == states.BUILDING \
                and server.get("task_state") != task_states.DELETING \
                and not (vm.get("metadata") or {}).get("deletionTimestamp") and any(
                (dv.get("status") or {}).get("phase") != "Succeeded" for dv in dvs):
            # a build still under way: a deleted server's token Secret is never written again
            self._refresh_image_token(namespace, uuid, str(server["project_id"]))
        seen = observe(server, vm, vmi, dvs, self.now(), server["created_at"], self.build_timeout,
                       self.network_name, self.unschedulable_grace, self._node_gone(vmi))
        if snapshot is not None and snapshot.cached and (seen.deleted or (seen.vm_state, seen.task_state) != (
                server.get("vm_state"), server.get("task_state"))) and not _build_moves_on(server, seen):
            # a change of state is concluded only from a fresh read: the watches may still show an object
            # as it was (the VMI a hard reboot replaced, say, which would read as a guest that shut down)
            vm, vmi, dvs = self._look_fresh(namespace, uuid)
            seen = observe(server, vm, vmi, dvs, self.now(), server["created_at"], self.build_timeout,
                           self.network_name, self.unschedulable_grace, self._node_gone(vmi))
        if (self.claims is not None and server.get("vm_state") == states.BUILDING and seen.vm_state == states.ERROR
                and vm is not None and seen.fault is not None
                and (seen.fault.details or "").startswith("KubeVirt: Unschedulable")
                and self._try_alternate(server, namespace)):
            return seen  # building again, on another node
        if seen.deleted:
            left = self.cluster.leftovers(namespace, uuid)
            if left:  # observe only sees the VM and disks; Secrets and the preference must be gone too
                # whatever is left (a Secret written while the delete ran, say) is asked to go again
                self.cluster.delete_server(namespace, uuid)
                return seen
            if self.claims is not None:  # given back first: a failure leaves the server for the next pass
                try:
                    self.claims.release(uuid)
                except PlacementUnavailable as exc:
                    # As Nova's compute service: the delete completes; the allocations Placement still
                    # holds belong to no server now and the audit gives them back once it answers.
                    LOG.warning("server %s: deleted, its allocations not given back yet: %s", uuid, exc.message)

            def gone(conn: Any) -> None:
                self._finish_event(conn, server, None, server.get("host"))
                instances.soft_delete(conn, uuid)

            self._queue(writes, gone)
            return seen
        changes: dict[str, Any] = {"vm_state": seen.vm_state, "task_state": seen.task_state,
                                   "power_state": seen.power_state}
        if seen.addresses is not None:
            changes["network_info"] = json.dumps(seen.addresses)
        if seen.progress is not None:
            changes["progress"] = seen.progress
        if seen.host is not None:
            changes["host"] = changes["node"] = seen.host
            if not server.get("availability_zone"):
                # scheduled: the server is in its host's zone, the default one (the list filter sees it)
                changes["availability_zone"] = self.options.default_availability_zone
        if seen.launched and server.get("launched_at") is None:
            changes["launched_at"] = models.utcnow()
        if seen.launched and not server.get("root_device_name"):
            changes["root_device_name"] = root_device_name(server.get("system_metadata") or {})
        current = {k: server.get(k) for k in changes}
        # A fault belongs to the change into the failed state, once: a server that stays in ERROR (its VM
        # still gone, say) does not collect one fault per pass.
        transition = (server.get("vm_state"), server.get("task_state")) != (seen.vm_state, seen.task_state)
        fault = seen.fault if transition else None
        old_vmi = server["system_metadata"].get(SYSMETA_OLD_VMI)
        ends_task = seen.task_state is None and seen.vm_state != states.BUILDING
        open_event = bool(server["system_metadata"].get(SYSMETA_EVENT))
        if current == changes and not (ends_task and (open_event or old_vmi)):
            if quiet_key is not None:
                self._quiet[uuid] = quiet_key
            return seen  # nothing changed: only read

        def save(conn: Any) -> None:
            if not instances.save_state(conn, uuid, expected_task_state=[server.get("task_state")], **changes):
                return  # an API action moved the task meanwhile: it wins, the next pass looks again
            if fault is not None:
                instances.add_fault(conn, uuid, code=fault.code, message=fault.message,
                                    details=fault.details or None, host=seen.host)
            if seen.stopped_by_sync:
                # Nova's power sync stops a guest it finds off through the stop API: a "stop" action
                # (no user, no project) whose compute_stop_instance event ran on the server's host
                action_id = instances.start_action(conn, uuid, "stop", POWER_SYNC)
                event_id = instances.start_event(conn, action_id, EVENTS["stop"], seen.host or server.get("host"))
                instances.finish_event(conn, event_id, "Success")
            if ends_task:
                self._finish_event(conn, server, fault, seen.host or server.get("host"))
                if old_vmi:
                    _set_sysmeta(conn, uuid, SYSMETA_OLD_VMI, None)

        self._queue(writes, save)
        if self.claims is not None and server.get("vm_state") == states.BUILDING and seen.vm_state == states.ERROR:
            # a failed build holds nothing and is on no node, as Nova leaves it
            self.claims.release(uuid)
            self._queue(writes, lambda conn: instances.save_state(conn, uuid, host=None, node=None))
        return seen

    def _node_gone(self, vmi: dict[str, Any] | None) -> bool:
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
            self._nodes_seen[node] = self.cluster.node_exists(node)
            if self._nodes_seen[node]:
                self._nodes_gone.pop(node, None)
            else:
                self._nodes_gone[node] = self.clock()
        return not self._nodes_seen[node]

    def _queue(self, writes: list[Callable[[Any], None]] | None, write: Callable[[Any], None]) -> None:
        if writes is None:
            self._write([write])
        else:
            writes.append(write)

    def _refresh_image_token(self, namespace: str, uuid: str, project_id: str) -> None:
        """Rewrite the image token Secret while the import runs: CDI reads it again at each retry, and a
        service token expires. keystoneauth hands out the same token until it nears its expiry."""
        try:
            token = self.images.token() if self.images is not None else None
        except Exception as exc:  # noqa: BLE001 - identity service away: the Secret keeps the last token
            LOG.warning("server %s: no service token to renew the image import's: %s", uuid, exc)
            return
        if token is not None:
            self.cluster.apply_if_changed(image_token_secret(uuid, namespace, token, project_id), self._tokens)

    # -- orphans -------------------------------------------------------------------------------------

    def sweep_orphans(self) -> list[str]:
        """Remove the objects of servers that no longer exist (row deleted, or never there).

        Only objects labelled managed-by openkeel are looked at; the cluster is read before the database,
        so an object created meanwhile always has its row already. Returns the uuids removed.
        """
        found = self.cluster.managed_servers()
        if not found:
            return []
        with reader(self.engine) as conn:
            live = {r[0].lower() for r in conn.execute(
                select(models.INSTANCES.c.uuid).where(models.INSTANCES.c.deleted == 0))}
        removed = []
        for uuid, namespaces in sorted(found.items()):
            if uuid in live:
                continue
            for namespace in sorted(namespaces):
                LOG.info("removing the objects of server %s in %s: the server no longer exists", uuid, namespace)
                self.cluster.delete_server(namespace, uuid)
            removed.append(uuid)
        return removed


_sysmeta = instances.system_metadata_item
_set_sysmeta = instances.set_system_metadata_item


def make_loop(client: Client, engine: Engine, *, retry: Retry | None = None, **kwargs: Any) -> ServerLoop:
    return ServerLoop(engine, Gateway(client, retry), **kwargs)


__all__ = ["ServerLoop", "Snapshot", "make_loop", "verb_for"]
