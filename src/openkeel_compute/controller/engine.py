"""The I/O loop: read the outbox and the catalogue, observe, plan (pure), write, mark rows done.

Two paths feed the same planner:
- the outbox, row by row in id order: each flavor named by pending rows is reconciled to its *current*
  catalogue state (several rows of one flavor collapse into one pass) and its rows are marked done only
  once every write of that flavor was accepted. A transient failure stops the batch (order is kept);
  a flavor-specific problem (foreign object, missing namespace, refused object) leaves its rows pending
  with the error, backs that flavor off and lets the others pass;
- the full resync (at start, every resync_interval, and instead of the outbox when the backlog is
  large): the whole catalogue against everything observed. The highest pending outbox id is read
  *before* the catalogue snapshot, so every row up to it is covered by the snapshot and marked done.
With nothing to change, both paths only read.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import httpx2
from sqlalchemy import Engine

from openkeel_compute.controller import outbox
from openkeel_compute.controller.desired import (
    NAMESPACE,
    FlavorDesired,
    ObjectKey,
    desired_for,
    desired_state,
    load_catalogue,
    namespace_object,
)
from openkeel_compute.controller.kube import Observed, Refused, Transient, status_code
from openkeel_compute.controller.metrics import Metrics
from openkeel_compute.controller.plan import (
    APPLY,
    CREATE,
    DELETE,
    NAMESPACES_OFF,
    REPLACE,
    Action,
    Plan,
    plan,
)
from openkeel_compute.controller.settings import Settings
from openkeel_compute.db.api import reader, unavailable
from openkeel_compute.kubevirt.flavor import FlavorCheck
from openkeel_compute.kubevirt.mapping import ANN_ID
from openkeel_compute.kubevirt.names import kubernetes_name
from openkeel_compute.kubevirt.options import MappingOptions

if TYPE_CHECKING:
    from openkeel_compute.controller.servers import ServerLoop

LOG = logging.getLogger(__name__)


class Backend(Protocol):
    def observe(self, names: Iterable[str] | None = None) -> Observed: ...
    def create(self, body: dict[str, Any]) -> None: ...
    def apply(self, body: dict[str, Any]) -> None: ...
    def replace(self, body: dict[str, Any]) -> None: ...
    def delete(self, key: ObjectKey) -> None: ...
    def close(self) -> None: ...


class LostLeadership(Transient):
    pass


@dataclasses.dataclass
class Report:
    """What one pass did."""

    writes: dict[str, int] = dataclasses.field(default_factory=dict)
    problems: dict[str, str] = dataclasses.field(default_factory=dict)  # flavor id -> why not in sync
    rows_done: int = 0
    transient: str | None = None

    def count(self, verb: str) -> None:
        self.writes[verb] = self.writes.get(verb, 0) + 1

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())


def classify(exc: BaseException) -> type[Exception]:
    """Transient (try the batch again later) or Refused (this object, these bytes, will not pass)."""
    if isinstance(exc, Transient):
        return Transient
    if isinstance(exc, httpx2.HTTPStatusError):
        code = status_code(exc) or 500
        if code in (409, 429) or code >= 500:  # 409: changed since we looked; re-observe and retry
            return Transient
        return Refused
    if isinstance(exc, (httpx2.TransportError, OSError)):
        return Transient
    return Refused


def _flavor_of(key: ObjectKey, body: Mapping[str, Any] | None, names: Mapping[str, str]) -> str:
    annotations = ((body or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANN_ID) or names.get(key.name) or key.name


class Controller:
    def __init__(self, engine: Engine, backend: Backend, options: MappingOptions, settings: Settings | None = None,
                 metrics: Metrics | None = None, is_leader: Callable[[], bool] = lambda: True,
                 clock: Callable[[], float] = time.monotonic, servers: ServerLoop | None = None,
                 flavor_check: FlavorCheck | None = None) -> None:
        self.engine = engine
        self.flavor_check = flavor_check  # Nova's validation of a flavor body (api/flavor_checks.py), if given
        self.servers = servers  # the server loop, after the flavors each pass
        self.backend = backend
        self.options = options
        self.settings = settings or Settings()
        self.metrics = metrics or Metrics()
        self.is_leader = is_leader
        self.clock = clock
        self._backoff: dict[str, tuple[float, float]] = {}  # flavor id -> (retry at, current delay)
        self._lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------------------

    def _execute(self, action: Action, report: Report) -> None:
        if not self.is_leader():
            raise LostLeadership("not the leader any more")
        backend = self.backend
        if action.verb == CREATE:
            assert action.body is not None
            backend.create(action.body)
        elif action.verb == APPLY:
            assert action.body is not None
            backend.apply(action.body)
        elif action.verb == REPLACE:
            assert action.body is not None
            backend.replace(action.body)
        elif action.verb == DELETE:
            backend.delete(action.key)
        if action.moved_to is not None:
            LOG.info("moved %s -> %s (flavor %s): %s", action.key, action.moved_to,
                     _flavor_of(action.key, action.observed, {}), action.reason)
        else:
            LOG.info("%s %s (%s)", action.verb, action.key, action.reason)
        self.metrics.writes.labels(action.verb).inc()
        with self._lock:
            report.count(action.verb)

    def _error(self, reason: str) -> None:
        self.metrics.errors.labels(reason).inc()

    # -- the outbox ----------------------------------------------------------------------------------

    def _due(self, flavor_id: str) -> bool:
        entry = self._backoff.get(flavor_id)
        return entry is None or self.clock() >= entry[0]

    def _back_off(self, flavor_id: str) -> None:
        delay = min(self.settings.max_backoff, self._backoff.get(flavor_id, (0.0, 0.5))[1] * 2)
        self._backoff[flavor_id] = (self.clock() + delay, delay)

    def process_outbox(self) -> Report:
        """One batch of pending rows; full resync instead when the backlog is over the threshold."""
        count, _max_id, _oldest = outbox.summary(self.engine)
        if count > self.settings.full_resync_threshold:
            LOG.info("%d pending outbox rows: one full resync instead of row by row", count)
            return self.resync()
        report = Report()
        waiting = [fid for fid in self._backoff if not self._due(fid)]
        rows = outbox.pending(self.engine, self.settings.batch_size, exclude=waiting)
        if not rows:
            return report
        self.metrics.reconciles.labels("outbox").inc()
        order: dict[str, list[int]] = {}
        for row in rows:
            order.setdefault(row.flavor_id, []).append(row.id)
        with reader(self.engine) as conn:
            bodies = load_catalogue(conn, order)  # read after the rows: at least as new as each of them
        wanted = {fid: (desired_for(bodies[fid], self.options, self.flavor_check) if fid in bodies
                        else FlavorDesired(fid, kubernetes_name(fid), {}, {})) for fid in order}
        try:
            observed = self.backend.observe({name for w in wanted.values() for name in w.names})
        except Exception as exc:  # noqa: BLE001 - any failure to observe: nothing written, try again later
            report.transient = f"observe: {exc}"
            self._error("transient")
            outbox.record_failure(self.engine, [i for ids in order.values() for i in ids], report.transient)
            return report
        for flavor_id, ids in order.items():
            problem = self._reconcile_flavor(wanted[flavor_id], observed, report)
            if report.transient is not None:
                outbox.record_failure(self.engine, ids, report.transient)
                break
            if problem is None:
                outbox.mark_done(self.engine, ids)
                report.rows_done += len(ids)
                self._backoff.pop(flavor_id, None)
            else:
                report.problems[flavor_id] = problem
                outbox.record_failure(self.engine, ids, problem)
                self._back_off(flavor_id)
        return report

    @property
    def _namespace_hint(self) -> str:
        return "" if self.settings.create_namespaces else NAMESPACES_OFF

    def _namespace_objects(self, wanted: FlavorDesired) -> dict[ObjectKey, dict[str, Any]]:
        if not self.settings.create_namespaces:
            return {}
        return {ObjectKey(NAMESPACE, None, ns): namespace_object(ns, project)
                for ns, project in wanted.namespaces.items()}

    def _reconcile_flavor(self, wanted: FlavorDesired, observed: Observed, report: Report) -> str | None:
        """Bring one flavor's objects in step; the problem text, or None when it is in sync."""
        if wanted.error is not None:
            self._error("mapping")
            return wanted.error  # its existing objects are left as they are
        names = set(wanted.names)
        mine = {k: v for k, v in observed.objects.items() if k.name in names or k.kind == NAMESPACE}
        mine.update(_namespace_keys(observed))
        result = plan({**self._namespace_objects(wanted), **wanted.objects}, mine, observed.namespaces,
                      self._namespace_hint)
        problems = [p.message for p in result.problems]
        failed: set[ObjectKey] = set()
        for action in result.actions:
            if action.moved_to is not None and action.moved_to in failed:
                continue  # the object under the new name was refused: the old one stays
            try:
                self._execute(action, report)
            except Exception as exc:  # noqa: BLE001 - sorted into transient / refused below
                if classify(exc) is Transient:
                    report.transient = f"{action.verb} {action.key}: {exc}"
                    self._error("transient")
                    return report.transient
                self._error("refused")
                failed.add(action.key)
                problems.append(f"{action.verb} {action.key} refused: {exc}")
            else:
                if action.key.kind == NAMESPACE and observed.namespaces is not None:
                    observed.namespaces.add(action.key.name)
        for p in result.problems:
            self._error(p.kind)
        return "; ".join(dict.fromkeys(problems)) or None

    # -- the full resync -----------------------------------------------------------------------------

    def resync(self) -> Report:
        """The whole catalogue against everything observed; marks the outbox rows it covered done."""
        report = Report()
        self.metrics.reconciles.labels("resync").inc()
        _count, max_id, _oldest = outbox.summary(self.engine)  # before the snapshot, on purpose
        with reader(self.engine) as conn:
            bodies = load_catalogue(conn)
        desired, per_flavor = desired_state(bodies, self.options, self.settings.create_namespaces,
                                               self.flavor_check)
        try:
            observed = self.backend.observe()
        except Exception as exc:  # noqa: BLE001 - any failure to observe: nothing written, try again later
            report.transient = f"observe: {exc}"
            self._error("transient")
            return report
        names = {w.name: fid for fid, w in per_flavor.items()}
        refused = {name for w in per_flavor.values() if w.error is not None for name in w.names}
        for fid, w in per_flavor.items():
            if w.error is not None:
                report.problems[fid] = w.error
                self._error("mapping")
        current = {k: v for k, v in observed.objects.items() if k.name not in refused or k.kind == NAMESPACE}
        current.update(_namespace_keys(observed))
        result = plan(desired, current, observed.namespaces, self._namespace_hint)
        for p in result.problems:
            fid = _flavor_of(p.key, desired.get(p.key) or current.get(p.key), names)
            known = report.problems.get(fid)
            if known is None or p.message not in known:
                report.problems[fid] = "; ".join(filter(None, [known, p.message]))
            self._error(p.kind)
        self._execute_all(result, report, names)
        if report.transient is None and max_id is not None:
            report.rows_done = outbox.mark_done_up_to(self.engine, max_id, report.problems)
            outbox.record_failure_by_flavor(self.engine, max_id, report.problems)
        self.metrics.out_of_sync.set(len(report.problems))
        self.metrics.last_resync.set_to_current_time()
        LOG.info("resync: %d objects desired, %d in sync, %s written, %d flavors with problems",
                 len(desired), len(result.in_sync), report.total_writes, len(report.problems))
        return report

    def _execute_all(self, result: Plan, report: Report, names: Mapping[str, str]) -> None:
        namespaces = [a for a in result.actions if a.key.kind == NAMESPACE]
        others = [a for a in result.actions if a.key.kind != NAMESPACE and a.moved_to is None]
        moves = [a for a in result.actions if a.moved_to is not None]
        failed: set[ObjectKey] = set()

        def run(action: Action) -> None:
            if report.transient is not None:
                return  # a transient failure stops the pass; the next one starts from observation
            if action.moved_to is not None and action.moved_to in failed:
                return  # the object under the new name was refused: the old one stays
            try:
                self._execute(action, report)
            except Exception as exc:  # noqa: BLE001 - sorted below
                fid = _flavor_of(action.key, action.body or action.observed, names)
                message = f"{action.verb} {action.key}: {exc}"
                with self._lock:
                    failed.add(action.key)
                    if classify(exc) is Transient:
                        report.transient = report.transient or message
                        self._error("transient")
                    else:
                        report.problems[fid] = message
                        self._error("refused")

        for action in namespaces:
            run(action)
        if self.settings.workers <= 1 or len(others) < 4:
            for action in others:
                run(action)
        else:
            with concurrent.futures.ThreadPoolExecutor(self.settings.workers, thread_name_prefix="write") as pool:
                list(pool.map(run, others))
        for action in moves:  # after every create: a move deletes the old object once the new one is there
            run(action)

    # -- status --------------------------------------------------------------------------------------

    def update_gauges(self) -> None:
        count, _max_id, oldest = outbox.summary(self.engine)
        self.metrics.outbox_pending.set(count)
        if oldest is None:
            self.metrics.outbox_oldest_age.set(0)
        else:
            from openkeel_compute.db.models import utcnow

            self.metrics.outbox_oldest_age.set(max(0.0, (utcnow() - oldest).total_seconds()))
        self.metrics.leader.set(1 if self.is_leader() else 0)

    # -- the loop ------------------------------------------------------------------------------------

    def _server_pass(self, report: Report) -> bool:
        """The servers' rows and their observation, after the flavors (a VM names its flavor's objects).
        Returns whether server rows were taken (more may be waiting)."""
        if self.servers is None or report.transient is not None or not self.is_leader():
            return False
        for uuid, problem in self.servers.run_once().items():
            report.problems[f"server {uuid}"] = problem
        return self.servers.rows_done > 0

    def run_once(self) -> Report:
        """One full resync, then the outbox until nothing more can be done now (``--once``); then one
        pass of the server loop."""
        total = self._run_once_flavors()
        self._server_pass(total)
        return total

    def _run_once_flavors(self) -> Report:
        total = self.resync()
        if total.transient is not None:
            return total
        while True:
            report = self.process_outbox()
            total.problems.update(report.problems)
            total.rows_done += report.rows_done
            for verb, n in report.writes.items():
                total.writes[verb] = total.writes.get(verb, 0) + n
            if report.transient is not None:
                total.transient = report.transient
                return total
            if report.rows_done == 0:
                return total

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: resync at start and every resync_interval, the outbox in between.

        Nothing a pass meets ends the loop. The database away (its server down or unreachable): one
        warning when it goes, passes tried again with a delay doubling up to 30 s, one line when it is
        back, and the loop goes on where it was (the outbox rows still pending are the work left; the
        Lease is renewed by its own thread meanwhile, so the replica stays the leader when it can)."""
        next_resync = self.clock()
        transient_delay = self.settings.poll_interval
        database_away: float | None = None  # since when (the clock), while the database is away
        while not stop.is_set():
            try:
                self.update_gauges()
                if not self.is_leader():
                    next_resync = self.clock()  # a new leader starts with a full resync
                    stop.wait(self.settings.poll_interval)
                    continue
                if self.clock() >= next_resync:
                    report = self.resync()
                    if report.transient is None:
                        next_resync = self.clock() + self.settings.resync_interval
                else:
                    report = self.process_outbox()
                servers_busy = self._server_pass(report)
            except Exception as exc:
                if unavailable(exc):
                    if database_away is None:
                        database_away = self.clock()
                        LOG.warning("the database cannot be used, trying again with backoff: %s",
                                    str(exc).splitlines()[0][:300])
                    self._error("database")
                else:
                    LOG.exception("reconcile pass failed")
                    self._error("internal")
                stop.wait(transient_delay)
                transient_delay = min(30.0, transient_delay * 2)
                continue
            if database_away is not None:
                LOG.warning("the database is back after %.0f s: carrying on", self.clock() - database_away)
                database_away = None
            if report.transient is not None:
                LOG.warning("transient failure, backing off %.1fs: %s", transient_delay, report.transient)
                stop.wait(transient_delay)
                transient_delay = min(30.0, transient_delay * 2)
                continue
            transient_delay = self.settings.poll_interval
            if report.rows_done == 0 and not report.total_writes and not servers_busy:
                stop.wait(self.settings.poll_interval)


def _namespace_keys(observed: Observed) -> dict[ObjectKey, dict[str, Any]]:
    if observed.namespaces is None:
        return {}
    return {ObjectKey(NAMESPACE, None, ns): {"kind": NAMESPACE, "metadata": {"name": ns}}
            for ns in observed.namespaces}
