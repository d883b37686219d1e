"""How the server loop records a step's outcome in the outbox (steps/base.py): a waiting step is not a
failure (no attempt counted, no error, DEBUG), a failing one is (attempts, last_error, one WARNING), one
whose task ended in Nova's fault is over. The steps here are registered for the test in the one table, as a
new operation would be."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from openkeel_compute.compute.instances import updates
from openkeel_compute.controller.servers import ServerLoop
from openkeel_compute.controller.settings import ServerSettings
from openkeel_compute.controller.steps import TABLE, Operation
from openkeel_compute.controller.steps.base import DONE, Failed, Wait, Waiting
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import operations as ops
from tests.controller.fake_cluster import FakeCluster
from tests.controller.helpers import OWNER, boot, outbox_rows


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def servers(db, clock) -> ServerLoop:
    return ServerLoop(db, FakeCluster(), ServerSettings(), clock=clock)  # type: ignore[arg-type]


@pytest.fixture
def ran(monkeypatch) -> list[str]:
    """Registers the test's operations; lists the operations run."""
    calls: list[str] = []

    def step(outcome: Any):
        def run(ctx, row, server):
            calls.append(row.operation)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        return Operation(run)

    for name, outcome in {"t-wait": Waiting("the VMI still stops"), "t-wait-30": Waiting("later", after=30),
                          "t-raise-wait": Wait("the disk still imports"), "t-fail": Failed("the cluster said no"),
                          "t-raise": RuntimeError("boom"), "t-fault": Failed("no room", Fault(500, "No valid host", "")),
                          "t-done": DONE}.items():
        monkeypatch.setitem(TABLE, name, step(outcome))
    return calls


def _server_with(db, *operations: str) -> str:
    """A server (its create row done already) and outbox rows of ``operations``, in that order."""
    uuid = boot(db)
    with db_api.transaction(db) as conn:
        conn.execute(models.OUTBOX.update().where(models.OUTBOX.c.object_id == uuid).values(done_at=models.utcnow()))
        for operation in operations:
            updates.outbox(conn, uuid, operation, OWNER)
    return uuid


def _rows(db, uuid: str) -> list[tuple[str, int, str | None, bool]]:
    return [(r["operation"], r["attempts"], r["last_error"], r["done"]) for r in outbox_rows(db, uuid)[1:]]


@pytest.mark.parametrize("waiting", ["t-wait", "t-raise-wait"])
def test_a_waiting_step_counts_no_attempt_records_no_error_and_holds_the_servers_later_rows(
        db, servers, ran, caplog, waiting):
    uuid = _server_with(db, waiting, "t-done")
    with caplog.at_level(logging.DEBUG, logger="openkeel_compute.controller.servers"):
        for _ in range(3):
            assert servers.process_outbox() == {}  # waiting is not a problem
    assert _rows(db, uuid) == [(waiting, 0, None, False), ("t-done", 0, None, False)]
    assert ran == [waiting] * 3  # tried on every pass; the row behind it waits
    assert {r.levelno for r in caplog.records} == {logging.DEBUG}


def test_a_failing_step_is_counted_with_its_error_and_so_are_the_servers_later_rows(db, servers, ran, caplog,
                                                                                   clock):
    uuid = _server_with(db, "t-fail", "t-done")
    with caplog.at_level(logging.DEBUG, logger="openkeel_compute.controller.servers"):
        assert servers.process_outbox() == {uuid: "t-fail: the cluster said no"}
    assert _rows(db, uuid) == [("t-fail", 1, "t-fail: the cluster said no", False),
                               ("t-done", 1, "t-fail: the cluster said no", False)]
    assert ran == ["t-fail"]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"server {uuid} t-fail: the cluster said no")]
    servers.process_outbox()  # not yet: the row backs off
    assert [attempts for _op, attempts, _error, _done in _rows(db, uuid)] == [1, 1]
    clock.now += 0.5
    servers.process_outbox()
    assert [attempts for _op, attempts, _error, _done in _rows(db, uuid)] == [2, 2]


def test_a_failing_row_backs_off_is_logged_once_and_gives_up_in_bounded_time(db, servers, ran, caplog, clock,
                                                                           monkeypatch):
    """Each failed attempt doubles the wait (0.5 s, 1 s, 2 s, ... up to retry_max_delay); the same reason is
    logged once; after step_attempts attempts the operation's give_up ends the task in Nova's fault."""
    gave_up: list[str] = []

    def give_up(ctx, row, server, reason):
        gave_up.append(reason)
        return Failed(reason, Fault(500, reason, ""))

    monkeypatch.setitem(TABLE, "t-fail", Operation(TABLE["t-fail"].step, give_up=give_up))
    uuid = _server_with(db, "t-fail")
    tried_at = []
    with caplog.at_level(logging.DEBUG, logger="openkeel_compute.controller.servers"):
        for _ in range(800):
            before = len(ran)
            servers.process_outbox()
            if len(ran) > before:
                tried_at.append(clock.now)
            clock.now += 0.25
    assert len(ran) == servers.settings.step_attempts == 10
    gaps = [b - a for a, b in itertools.pairwise(tried_at)]
    assert gaps == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert gave_up == ["the cluster said no"]
    assert _rows(db, uuid) == [("t-fail", 10, "t-fail: the cluster said no", True)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [f"server {uuid} t-fail: the cluster said no",
                        f"server {uuid} t-fail: 10 attempts failed, the task ends in a fault"]


def test_an_exception_is_a_failure(db, servers, ran):
    uuid = _server_with(db, "t-raise", "unknown-operation")
    servers.process_outbox()
    assert _rows(db, uuid)[0] == ("t-raise", 1, "t-raise: boom", False)
    other = _server_with(db, "unknown-operation")
    servers.process_outbox()
    assert _rows(db, other) == [("unknown-operation", 1, ("unknown-operation: unknown server operation "
                                 "'unknown-operation'"), False)]


def test_a_step_whose_task_ended_in_a_fault_is_over_and_the_next_row_runs(db, servers, ran):
    uuid = _server_with(db, "t-fault", "t-done")
    assert servers.process_outbox() == {}  # over: nothing left to retry
    assert _rows(db, uuid) == [("t-fault", 1, "t-fault: no room", True), ("t-done", 0, None, True)]
    assert ran == ["t-fault", "t-done"] and servers.rows_done == 1


def test_a_step_that_waits_for_n_seconds_is_not_tried_before(db, servers, ran, clock):
    uuid = _server_with(db, "t-wait-30")
    servers.process_outbox()
    clock.now += 29
    servers.process_outbox()
    assert ran == ["t-wait-30"]
    clock.now += 2
    servers.process_outbox()
    assert ran == ["t-wait-30", "t-wait-30"] and _rows(db, uuid) == [("t-wait-30", 0, None, False)]


def test_a_new_operation_is_one_row_of_the_table(db, servers, ran):
    uuid = _server_with(db, "t-done")
    servers.process_outbox()
    assert ran == ["t-done"] and _rows(db, uuid) == [("t-done", 0, None, True)]
    assert set(ops.SERVER_OPERATIONS) <= TABLE.keys()  # every operation the API writes has its step


def test_a_cluster_that_does_not_answer_ends_the_rows_of_the_pass(db, servers, ran, monkeypatch):
    """Each row would wait out the gateway's retries again: the first one's failure is counted, the others
    wait for the next pass untouched."""
    import httpx2

    monkeypatch.setitem(TABLE, "t-away", Operation(_raising(httpx2.ConnectError("refused"))))
    first, second = _server_with(db, "t-away"), _server_with(db, "t-done")
    assert servers.process_outbox() == {first: "t-away: refused"}
    assert _rows(db, first) == [("t-away", 1, "t-away: refused", False)]
    assert _rows(db, second) == [("t-done", 0, None, False)] and ran == []


def _raising(exc: Exception):
    def run(ctx, row, server):
        raise exc
    return run
