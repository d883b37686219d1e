"""The server loop: the ``server`` outbox rows carried out by their steps, then every server observed.

One pass (``run_once``):

- the pending rows, in id order, each handed to its operation's step (controller/steps/__init__.py,
  one table); the outcome decides the row: done, waiting (tried again later, nothing counted) or failed
  (attempts and ``last_error``, tried again, or over when the task ended in Nova's fault). A server's
  rows keep their order: none passes one that waits or failed. A row that failed because the cluster
  does not answer (transport errors, 429 and 5xx past the gateway's retries) ends the rows of the pass:
  each would wait out the same retries;
- every live server observed (controller/observe.py) and its row written back;
- the periodic tasks: the reclaim of soft-deleted servers, the automatic confirmation of resizes, and
  every ``orphan_interval`` the sweep of objects whose server is gone.

Decisions are pure (``kubevirt.server.compose``, ``kubevirt.vmstatus.observe``); every Kubernetes request
goes through the gateway (controller/gateway.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lightkube import Client
from sqlalchemy import Engine, and_, select, update

from openkeel_compute.compute.instances import cas
from openkeel_compute.controller import tasks
from openkeel_compute.controller.claims import Claims
from openkeel_compute.controller.compose import Composer
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.kube import ClusterError, Retry, transient
from openkeel_compute.controller.observe import Observer, root_device_name, utc_now
from openkeel_compute.controller.resize_allocations import Allocations
from openkeel_compute.controller.settings import ServerSettings
from openkeel_compute.controller.steps import TABLE, confirm, delete, net_events, shelve, volume_events
from openkeel_compute.controller.steps.base import (
    Context,
    Done,
    Failed,
    Outcome,
    PassState,
    ServerRow,
    Wait,
    Waiting,
    read_server,
    read_servers,
)
from openkeel_compute.controller.steps.power import verb_for
from openkeel_compute.controller.watch import Snapshot, WatchedObjects
from openkeel_compute.db import models
from openkeel_compute.db.api import reader, transaction, unavailable
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states
from openkeel_compute.model.states import task_states
from openkeel_compute.placement.client import PlacementClient

if TYPE_CHECKING:
    from openkeel_compute.network.client import NeutronClient

LOG = logging.getLogger(__name__)
OUTBOX = models.OUTBOX
_ERROR_MAX = 2000
# What became of a row this pass (ServerLoop._execute).
_DONE, _OVER, _WAITS, _FAILS, _AWAY = "done", "over", "waits", "fails", "away"


def _pending_servers(engine: Engine, limit: int) -> list[ServerRow]:
    query = (select(OUTBOX.c.id, OUTBOX.c.object_id, OUTBOX.c.operation, OUTBOX.c.payload, OUTBOX.c.attempts,
                    OUTBOX.c.last_error)
             .where(and_(OUTBOX.c.done_at.is_(None), OUTBOX.c.kind == ops.SERVER)).order_by(OUTBOX.c.id).limit(limit))
    with reader(engine) as conn:
        return [ServerRow(i, o, op, p if isinstance(p, dict) else json.loads(p or "{}"), attempts or 0, error)
                for i, o, op, p, attempts, error in conn.execute(query)]


def _finish_rows(target: Any, ids: list[int], *, error: str | None = None, done: bool = True) -> None:
    """Rows done, failed once more (``error``; still pending unless ``done``); ``target``: an engine, or a
    transaction's connection."""
    values: dict[str, Any] = {"done_at": models.utcnow()} if done else {}
    if error is not None:
        values.update(attempts=OUTBOX.c.attempts + 1, last_error=error[:_ERROR_MAX])
    statement = update(OUTBOX).where(OUTBOX.c.id.in_(ids), OUTBOX.c.done_at.is_(None)).values(values)
    if isinstance(target, Engine):
        with transaction(target) as conn:
            conn.execute(statement)
    else:
        target.execute(statement)


class ServerLoop:
    def __init__(self, engine: Engine, cluster: Gateway, settings: ServerSettings | None = None, *,
                 images: ImageAccess | None = None, claims: Claims | None = None,
                 placement: PlacementClient | None = None, network: NeutronClient | None = None,
                 volumes: Any = None,
                 now: Callable[[], dt.datetime] = utc_now, clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.cluster = cluster
        self.settings = settings or ServerSettings()
        self.objects = Composer(self.settings.options, images, engine)
        #: Neutron ([neutron] set): servers' interfaces are its ports (None: the pod network)
        self.network = network
        #: servers' resources claimed in Placement (controller.claims.Claims; None: not claimed)
        self.claims = claims
        self.placement = placement  # the Placement client of a resize's accounting, when there are no claims
        self.volumes = volumes  # Cinder's client when [cinder] is set (volume/client.py)
        self.now = now
        self.clock = clock
        self.observer = Observer(clock)
        self.watched = WatchedObjects(cluster).start() if self.settings.watch else None
        self.rows_done = 0  # rows the last pass did: when some were, the controller looks again without waiting
        self._next_sweep = 0.0  # the first pass looks for orphans
        self._not_before: dict[int, float] = {}  # row id -> when a waiting row is tried again
        self._pass = PassState()
        self._placed_before: set[str] = set()  # the servers whose objects the pass before created

    def close(self) -> None:
        if self.watched is not None:
            self.watched.stop()

    def context(self) -> Context:
        """The collaborators of this pass's steps."""
        claims = self.claims
        allocations = Allocations(self.placement or (claims.placement if claims is not None else None),
                                  same_host=self.settings.allow_resize_to_same_host,
                                  max_results=claims.max_results if claims is not None else 1000)
        return Context(self.engine, self.cluster, self.settings, self.objects, allocations, self.now, claims,
                       self._pass, self.network, self.volumes)

    def run_once(self) -> dict[str, str]:
        """One pass: the pending rows, then every live server observed, the periodic tasks. Returns server
        uuid -> problem."""
        problems = self.process_outbox()
        ctx = self.context()
        net_events.consume(ctx)  # Neutron's events about the servers' ports (with [neutron] only)
        volume_events.consume(ctx)  # Cinder's volume-extended
        self.observe_all(problems)
        if self.settings.reclaim_interval > 0:
            delete.reclaim(ctx, self.settings.reclaim_interval, self.now())
        if self.settings.shelved_offload_time > 0:
            shelve.offload_due(ctx, self.settings.shelved_offload_time, self.now())
        confirm.auto_confirm(ctx, self.settings.resize_confirm_window)
        confirm.close_reset(ctx)
        if self.clock() >= self._next_sweep:
            try:
                self.sweep_orphans()
            except ClusterError as exc:
                problems.setdefault("orphans", f"sweep: {exc}")
            else:
                self._next_sweep = self.clock() + self.settings.orphan_interval
        return problems

    # -- the outbox ----------------------------------------------------------------------------------

    def process_outbox(self) -> dict[str, str]:
        """The pending rows in order. Three transactions for the whole batch (the rows a later delete makes
        moot, the events started, then the rows done with where their objects went) plus one per row that
        failed; the cluster's requests in between, row by row."""
        problems: dict[str, str] = {}
        self.rows_done = 0
        self._placed_before = {uuid for uuid, _namespace, _name in self._pass.placed}
        self._pass = PassState()
        ctx = self.context()
        if ctx.claims is not None:
            ctx.claims.begin_pass()  # candidates are shared within a pass only, never kept across
        rows = _pending_servers(self.engine, self.settings.batch_size)
        known = {row.id for row in rows}
        self._not_before = {i: t for i, t in self._not_before.items() if i in known}
        done: list[int] = []
        for row in [r for r in rows if not _ordered(r)]:  # reads: neither wait behind others nor hold them
            if self._execute(ctx, row, None, problems) == _DONE:
                done.append(row.id)
        rows = self._without_moot([r for r in rows if _ordered(r)])
        if rows:
            with transaction(self.engine) as conn:
                events = {row.id: TABLE[row.operation].event if row.operation in TABLE else None for row in rows}
                tasks.start_all(conn, [(row.id, row.server_uuid, row.request_id, event) for row in rows
                                       if (event := events[row.id]) is not None])
            self._prepare(ctx, rows)
        # each server's first row of the pass finds its server read with the others' (after the claims were
        # written); a later row of the same server reads it again, as an earlier step may have changed it
        first_reads = read_servers(self.engine, [row.server_uuid for row in rows])
        held: dict[str, str | None] = {}  # server uuid -> why its later rows wait (None) or fail (the error)
        for row in rows:
            if row.server_uuid in held:
                if held[row.server_uuid] is not None:  # keep a server's rows in order: none passes one that failed
                    _finish_rows(self.engine, [row.id], error=held[row.server_uuid], done=False)
                continue
            if self._not_before.get(row.id, 0.0) > self.clock():
                held[row.server_uuid] = None
                continue
            server = first_reads.pop(row.server_uuid, None) or read_server(self.engine, row.server_uuid)
            result = _DONE if server is None else self._execute(ctx, row, server, problems)  # gone: moot
            if result == _DONE:
                done.append(row.id)
            elif result == _WAITS:
                held[row.server_uuid] = None
            elif result == _FAILS:
                held[row.server_uuid] = problems[row.server_uuid]
            elif result == _AWAY:
                break  # the cluster is away or busy past the retry policy: the other rows wait, untouched
        if self._pass.placed or done:
            with transaction(self.engine) as conn:
                # [DEFAULT] force_config_drive: the server got a config drive, and says so as Nova's compute
                # records it at build (its config_drive field "True")
                forced = {"config_drive": "True"} if ctx.settings.options.force_config_drive else {}
                for uuid in self._pass.spawning:  # the build's last stage (steps/build.py), unless it left it
                    cas.save_state(conn, uuid, expected_task_state=task_states.BLOCK_DEVICE_MAPPING,
                                   vm_state=states.BUILDING, task_state=task_states.SPAWNING)
                for uuid, namespace, name in self._pass.placed:  # where the API and the next pass find them
                    cas.save_state(conn, uuid, namespace=namespace, vm_name=name, **forced)
                if done:
                    _finish_rows(conn, done)
        self.rows_done = len(done)
        return problems

    def _without_moot(self, rows: list[ServerRow]) -> list[ServerRow]:
        """The rows that still matter: an operation that supersedes the server's earlier rows (a delete
        removes whatever they would make, and must not wait behind a row that keeps failing) makes them
        done without running."""
        first: dict[str, int] = {}
        for row in rows:
            if row.operation in TABLE and TABLE[row.operation].supersedes:
                first.setdefault(row.server_uuid, row.id)
        moot = [row.id for row in rows if row.id < first.get(row.server_uuid, 0)]
        if moot:
            _finish_rows(self.engine, moot)
        return [row for row in rows if row.id >= first.get(row.server_uuid, 0)]

    def _prepare(self, ctx: Context, rows: list[ServerRow]) -> None:
        """Each operation's work for several servers at once, on the rows that are their server's first."""
        first: dict[str, ServerRow] = {}
        for row in rows:
            first.setdefault(row.server_uuid, row)
        for operation, spec in TABLE.items():
            if spec.prepare is not None:
                spec.prepare(ctx, [row for row in first.values() if row.operation == operation])

    def _execute(self, ctx: Context, row: ServerRow, server: dict[str, Any] | None, problems: dict[str, str]) -> str:
        """Run the row's step and record its outcome (``_DONE``: to be written done with the pass's other
        rows; ``_OVER``: written already; ``_WAITS``, ``_FAILS``: the server's later rows are held;
        ``_AWAY``: failed because the cluster does not answer, no other row is tried this pass)."""
        spec = TABLE.get(row.operation)
        try:
            if spec is None:
                raise ValueError(f"unknown server operation {row.operation!r}")
            outcome: Outcome = spec.step(ctx, row, server if server is not None else {})  # a read gets no row
        except Wait as wait:
            outcome = Waiting(wait.reason, wait.after)
        except Exception as exc:
            if unavailable(exc):
                raise  # the database away: the pass ends, no attempt is counted (controller/engine.py waits)
            away = transient(exc)
            result = self._record(ctx, row, server, Failed(str(exc)), problems, counted=not away)
            return _AWAY if result == _FAILS and away else result
        return self._record(ctx, row, server, outcome, problems)

    def _record(self, ctx: Context, row: ServerRow, server: dict[str, Any] | None, outcome: Outcome,
                problems: dict[str, str], *, counted: bool = True) -> str:
        """``counted``: the failure backs the row off and may end the task once its attempts are spent (a
        cluster that does not answer at all spends none: the row is tried on the next pass)."""
        if isinstance(outcome, Done):
            self._not_before.pop(row.id, None)
            return _DONE
        if isinstance(outcome, Waiting):
            LOG.debug("server %s %s: %s", row.server_uuid, row.operation, outcome.reason)
            if outcome.after > 0:
                self._not_before[row.id] = self.clock() + outcome.after
            return _WAITS
        error = f"{row.operation}: {outcome.reason}"
        # logged once: a row that keeps failing for the same reason says so at DEBUG after the first time
        LOG.log(logging.DEBUG if error[:_ERROR_MAX] == row.last_error and not outcome.final else logging.WARNING,
                "server %s %s", row.server_uuid, error)
        self._not_before.pop(row.id, None)
        spec = TABLE.get(row.operation)
        if (not outcome.final and counted and server and spec is not None and spec.give_up is not None
                and row.attempts + 1 >= self.settings.step_attempts):
            LOG.warning("server %s %s: %d attempts failed, the task ends in a fault", row.server_uuid,
                        row.operation, row.attempts + 1)
            outcome = spec.give_up(ctx, row, server, outcome.reason)
        if outcome.final:  # the task ended in Nova's fault: the row is over, its last attempt counted
            _finish_rows(self.engine, [row.id], error=error)
            return _OVER
        problems[row.server_uuid] = error
        _finish_rows(self.engine, [row.id], error=error, done=False)
        if counted:  # a cluster that does not answer ends the pass instead: its rows are tried on the next
            delay = min(self.settings.retry_max_delay, self.settings.retry_delay * 2 ** min(row.attempts, 16))
            self._not_before[row.id] = self.clock() + delay
        return _FAILS

    # -- observing and the periodic tasks ------------------------------------------------------------

    def observe_all(self, problems: dict[str, str] | None = None) -> None:
        """Every live server against the cluster (controller/observe.py)."""
        watched = self.watched

        def snapshot() -> Snapshot:
            return (watched.snapshot() if watched is not None else None) or self.cluster.snapshot()

        placed = {uuid for uuid, _namespace, _name in self._pass.placed} | self._placed_before
        self.observer.observe_all(self.context(), snapshot, problems if problems is not None else {}, placed)

    def observe_one(self, uuid: str, snapshot: Snapshot | None = None) -> Any:
        """One server against ``snapshot`` (the cluster when None), its change written at once; None when
        the server is gone."""
        server = read_server(self.engine, uuid)
        return None if server is None else self.observer.observe_one(self.context(), server, snapshot)

    def reclaim(self) -> list[str]:
        return delete.reclaim(self.context(), self.settings.reclaim_interval, self.now())

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


def _ordered(row: ServerRow) -> bool:
    spec = TABLE.get(row.operation)
    return spec is None or spec.ordered


_SETTINGS = {field.name for field in dataclasses.fields(ServerSettings)}


def make_loop(client: Client, engine: Engine, *, retry: Retry | None = None, **kwargs: Any) -> ServerLoop:
    """A server loop on a lightkube client: ``kwargs`` are ServerSettings fields and ServerLoop's
    collaborators (tests and tools; the controller builds its loop in service.py)."""
    settings = ServerSettings(**{k: v for k, v in kwargs.items() if k in _SETTINGS})
    return ServerLoop(engine, Gateway(client, retry), settings, **{k: v for k, v in kwargs.items()
                                                                   if k not in _SETTINGS})


__all__ = ["ServerLoop", "Snapshot", "make_loop", "root_device_name", "verb_for"]
