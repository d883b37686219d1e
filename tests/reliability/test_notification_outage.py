"""A broker that is really away never makes the API wait; what cannot be sent is counted.

The first test points the notification transport at a closed port (nothing listens there: a
RabbitMQ that is down); the second stops and starts a RabbitMQ node of its own under writes
(tests/reliability/rabbit.py), never the machine's broker.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import time

import pytest

from openkeel_compute.notifications import sender as senders
from tests.databases import free_port
from tests.reliability import fuzz, rabbit
from tests.reliability import world as w


def _closed_port() -> int:
    """A port nothing listens on (bound, then released; connections to it are refused)."""
    port = free_port()
    with contextlib.closing(socket.socket()) as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    return port


@contextlib.contextmanager
def _broker_away(caplog, **notifications):
    """A world on SQLite whose notifications go to a broker nobody answers for; yields (world, its sender),
    the warnings of the sender captured, and the sender closed at the end."""
    existing = set(senders._SENDERS)
    with caplog.at_level(logging.WARNING, logger="openkeel_compute.notifications.sender"), \
            w.world_on_sqlite(notifications={"notification_format": "versioned", **notifications},
                              oslo_messaging_notifications={
                                  "driver": "messagingv2",
                                  "transport_url": f"rabbit://guest:guest@127.0.0.1:{_closed_port()}/"},
                              healthcheck={"detailed": True}) as world:
        (sender,) = set(senders._SENDERS) - existing
        try:
            yield world, sender
        finally:
            sender.close(0)


def _create(world, flavorid: str) -> int:
    return w.api(world.app, "POST", "/flavors", body={"flavor": {"name": flavorid, "id": flavorid, "ram": 64,
                                                                 "vcpus": 1, "disk": 0}}).status


def _wait(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_writes_answer_while_the_sender_retries_and_the_drops_are_counted(caplog):
    with _broker_away(caplog, send_max_wait=3.0) as (world, sender):
        # The world's own objects were notified too; wait until the sender has failed on them.
        assert _wait(lambda: sender.stats().failing_for is not None), "the sender never tried the broker"
        before = sender.stats()
        assert before.delivered == 0

        # Writes answer while the sender is still retrying: their notifications are still queued
        # behind the ones it keeps trying (nothing was sent, nothing has waited long enough to drop).
        assert _create(world, "outage-1") == 200
        assert _create(world, "outage-2") == 200
        during = sender.stats()
        assert during.failing_for is not None
        assert during.delivered == 0
        assert during.queued + during.dropped == before.queued + before.dropped + 2
        assert during.queued >= 2

        # Past send_max_wait every one of them is dropped and counted, never sent.
        assert _wait(lambda: sender.stats().queued == 0), "the notifications were never given up"
        after = sender.stats()
        assert (after.delivered, after.dropped) == (0, before.queued + before.dropped + 2)
        assert after.dropped == after.dropped_expired

        # The count is visible to the operator, on /healthcheck's details.
        health = w.call(world.app, "GET", "/healthcheck", headers={"Accept": "application/json"})
        assert health.status == 200  # the API serves; notifications are not its health
        assert f"dropped={after.dropped}" in health.body.decode()
    # One warning for the whole outage, not one per notification or per try.
    failing = [r for r in caplog.records if r.getMessage().startswith("Cannot send notifications")]
    assert len(failing) == 1


def test_a_full_queue_drops_and_counts_without_waiting(caplog):
    with _broker_away(caplog, send_queue_size=1) as (world, sender):
        full_before = sender.stats().dropped_full
        for n in range(5):
            assert _create(world, f"full-{n}") == 200
        stats = sender.stats()
        assert stats.queued <= 1
        assert stats.dropped_full >= full_before + 4  # at most one of the five found room
    assert sum(r.getMessage().startswith("The notification queue is full") for r in caplog.records) == 1


def test_a_worker_stopped_by_sigterm_flushes_its_queue_and_says_what_it_dropped():
    """serve with two workers, the broker away: SIGTERM makes each worker spend its flush time on
    its queue, then log what it could not send (the last line of a worker that dropped some)."""
    closed = _closed_port()
    extra = ("[notifications]\nnotification_format = versioned\nsend_flush_seconds = 1\n"
             f"[oslo_messaging_notifications]\ndriver = messagingv2\n"
             f"transport_url = rabbit://guest:guest@127.0.0.1:{closed}/\nretry = 0\n")
    with w.world_on_sqlite() as world:
        with w.served(world, free_port(), workers=2, extra=extra) as server:
            for n in range(4):  # the kernel spreads the connections over the workers
                answer = fuzz.http_call(server, "POST", "/v2.1/flavors", headers={
                    "X-Auth-Token": w.ADMIN, "Content-Type": "application/json"}, body=(
                        b'{"flavor": {"name": "stop-%d", "ram": 64, "vcpus": 1, "disk": 0}}' % n))
                assert answer.status == 200, answer.body
        log = next(world.state.glob("serve-*.log")).read_text(errors="replace")
    stopped = [line for line in log.splitlines() if "Notification sender stopped" in line]
    assert stopped, log[-3000:]
    dropped = sum(int(line.split("dropped=")[1].split()[0]) for line in stopped)
    assert dropped == 4, stopped


@pytest.mark.skipif(shutil.which("rabbitmq-server") is None, reason="rabbitmq-server is not installed")
def test_a_rabbitmq_stopped_and_started_gets_the_notifications_in_order():
    report = rabbit.run(rabbit.free_port_pair(), before=1.0, outage=1.0, after=2.0, settle=1.0)
    assert report.ok, report.line()
    assert report.answered_during_outage > 0
