"""RabbitMQ stopped and started under writes with versioned notifications on.

A RabbitMQ node of the run's own (its own node name, ports and directories; the machine's broker
is never touched) receives the notifications of flavor creates made through the API without pause.
A consumer drains the notification queue as they come. The node is stopped for a while and started
again. The API hands its notifications to its background sender and answers at once; the run
checks that:

- no request failed, and requests were answered while the sender was failing to reach the broker
  (``answered-during-outage``: the requests did not wait for the sender's retries);
- every notification the API emitted was sent or counted as dropped, and none is still waiting
  once the broker is back (``recovery``: broker listening again -> queue empty);
- what was sent reached the consumer in the order each writer emitted it; the run reports those
  the broker lost (sent, then gone with the node's non-durable queue when it stopped).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

from openkeel_compute.notifications import sender as senders
from tests.databases import _reachable
from tests.reliability import world as w

HANG_SECONDS = 30.0


@dataclasses.dataclass
class Report(w.WriteLoad):
    emitted: int = 0  # notifications the API handed to its sender
    sent: int = 0  # accepted by the broker
    dropped: int = 0  # counted as dropped by the sender
    waiting: int = 0  # still queued at the end (0 once recovered)
    received: int = 0  # of the acknowledged creates, notifications the consumer got
    errors: int = 0
    answered_during_outage: int = 0  # 200s answered while the sender was failing
    in_order: bool = True
    broker_down_seconds: float = 0.0
    recovery_seconds: float | None = None

    @property
    def lost_by_broker(self) -> int:
        return max(0, self.sent - self.received)

    @property
    def ok(self) -> bool:
        # one notification per acknowledged create, each sent or counted as dropped, none left waiting
        return (self.errors == 0 and self.emitted == self.acknowledged and self.waiting == 0 and self.recovery_seconds is not None and self.answered_during_outage > 0
                and 0 < self.received <= self.sent and self.in_order
                and self.slowest_answer_seconds < HANG_SECONDS)

    def line(self) -> str:
        recovery = f"{self.recovery_seconds:.1f}s" if self.recovery_seconds is not None else "never"
        return (f"rabbitmq: requests={self.requests} acknowledged={self.acknowledged} 5xx={self.errors} "
                f"notifications={self.emitted} delivered={self.sent} dropped={self.dropped} "
                f"lost-by-broker={self.lost_by_broker} in-order={'yes' if self.in_order else 'NO'} "
                f"answered-during-outage={self.answered_during_outage} broker-down={self.broker_down_seconds:.1f}s "
                f"recovery={recovery} slowest-answer={self.slowest_answer_seconds:.2f}s")


def free_port_pair() -> int:
    """A loopback port that is free together with the next one (an own node's AMQP and distribution
    ports): a free port's neighbour may be any connection's local port on a busy machine."""
    for _ in range(50):
        with contextlib.closing(socket.socket()) as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with contextlib.closing(socket.socket()) as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise RuntimeError("no two neighbouring free ports on 127.0.0.1")


class OwnRabbit:
    """A RabbitMQ node named ``openkeel-reliability-PORT`` on ``port`` (distribution on port + 1)."""

    def __init__(self, port: int):
        if shutil.which("rabbitmq-server") is None and not pathlib.Path("/usr/sbin/rabbitmq-server").exists():
            raise RuntimeError("rabbitmq-server is not installed")
        self.port = port
        self.node = f"openkeel-reliability-{port}@localhost"
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="openkeel-reliability-rabbit-"))
        if os.geteuid() == 0:
            # the server script runs the node as the rabbitmq account: it must own the node's directory
            with contextlib.suppress(LookupError, OSError):
                shutil.chown(self.dir, "rabbitmq", "rabbitmq")
        for name, text in (("enabled_plugins", "[].\n"), ("rabbitmq.conf", f"listeners.tcp.1 = 127.0.0.1:{port}\n")):
            (self.dir / name).write_text(text)
            with contextlib.suppress(LookupError, OSError):
                shutil.chown(self.dir / name, "rabbitmq", "rabbitmq")
        self.env = {**os.environ, "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_PORT": str(port),
                    "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_DIST_PORT": str(port + 1),
                    "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"), "RABBITMQ_LOG_BASE": str(self.dir / "log"),
                    "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
                    "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq"), "RABBITMQ_PID_FILE": str(self.dir / "pid")}
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"rabbit://guest:guest@127.0.0.1:{self.port}/"

    def start(self, timeout: float = 90) -> None:
        if _reachable("127.0.0.1", self.port):
            raise RuntimeError(f"127.0.0.1:{self.port} is already taken (a node left running by an earlier run?)")
        with (self.dir / "server.out").open("wb") as out:  # what the start script says, before any log exists
            self.process = subprocess.Popen(["rabbitmq-server"], env=self.env, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True, cwd=self.dir)
        deadline = time.monotonic() + timeout
        while not _reachable("127.0.0.1", self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                # the directory goes with the run: the node's last words go into the error
                tails = [f"{log.name}: …{log.read_text(errors='replace')[-800:]}"
                         for log in [self.dir / "server.out", *sorted((self.dir / "log").glob("*.log"))]
                         if log.exists()]
                raise RuntimeError(f"the own RabbitMQ node did not listen on {self.port} (exit status "
                                   f"{self.process.poll()}); {' | '.join(tails)}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop this node only (by its name), then its process group (started here) if still there."""
        subprocess.run(["rabbitmqctl", "-n", self.node, "stop"], env=self.env, capture_output=True, timeout=60,
                       check=False)
        if self.process is not None:
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
            self.process = None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _consume(url: str, queue_name: str, received: list, stop: threading.Event) -> None:
    """Drain the queue as messages come, reconnecting while the broker is away."""
    import json

    import kombu

    while not stop.is_set():
        try:
            with kombu.Connection(url.replace("rabbit://", "amqp://", 1), connect_timeout=1) as connection:
                queue = kombu.Queue(queue_name, channel=connection.default_channel, no_declare=True)
                while not stop.is_set():
                    message = queue.get(no_ack=True)
                    if message is None:
                        time.sleep(0.02)
                        continue
                    body = json.loads(message.body)
                    payload = json.loads(body["oslo.message"]) if "oslo.message" in body else body
                    data = payload.get("payload", {}).get("nova_object.data", {})
                    if payload.get("event_type") == "flavor.create":
                        received.append(data.get("flavorid"))
        except Exception:  # noqa: BLE001 - broker away or queue not declared yet: try again
            time.sleep(0.2)


def _in_order(received: list[str]) -> bool:
    """Each writer's flavors (``rq-W-N``) arrived in the order of N (a redelivered one may repeat)."""
    last: dict[str, int] = {}
    for flavorid in received:
        match = re.fullmatch(r"(rq-\d+)-(\d+)", flavorid or "")
        if match is None:
            continue
        writer, n = match.group(1), int(match.group(2))
        if n < last.get(writer, -1):
            return False
        last[writer] = n
    return True


def run(port: int, *, writers: int = 2, before: float = 3.0, outage: float = 4.0, after: float = 6.0,
        settle: float = 3.0) -> Report:
    report = Report()
    broker = OwnRabbit(port)
    stop_writers, stop_consumer = threading.Event(), threading.Event()
    received: list = []
    lock = threading.Lock()
    run_id = uuid.uuid4().hex[:8]
    topic = f"versioned_notifications-{run_id}"
    sender = None
    try:
        broker.start()
        existing = set(senders._SENDERS)
        with w.world_on_sqlite(DEFAULT={"control_exchange": f"openkeel-reliability-{run_id}"},
                               notifications={"notification_format": "versioned",
                                              "versioned_notifications_topics": topic},
                               oslo_messaging_notifications={"driver": "messagingv2",
                                                             "transport_url": broker.url}) as world:
            (sender,) = set(senders._SENDERS) - existing
            # The first create declares the queue; the consumer starts on it.
            w.api(world.app, "POST", "/flavors", body={"flavor": {"name": "rq-first", "id": "rq-first", "ram": 64,
                                                                  "vcpus": 1, "disk": 0}})
            assert sender.drain(60), "the first notifications did not leave"
            baseline = sender.stats()  # the world's own objects and the first create
            consumer = threading.Thread(target=_consume, args=(broker.url, f"{topic}.info", received, stop_consumer),
                                        daemon=True)
            consumer.start()

            def record(flavorid: str, status: int, sent_at: float, seconds: float) -> None:
                failing = sender.stats().failing_for is not None
                with lock:
                    report.heard(flavorid, status, seconds)
                    report.errors += status >= 500
                    report.answered_during_outage += status == 200 and failing

            threads = [threading.Thread(target=w.create_flavors, args=(world, f"rq-{i}", stop_writers, record, 0.02),
                                        daemon=True) for i in range(writers)]
            for thread in threads:
                thread.start()
            time.sleep(before)
            down = time.monotonic()
            broker.stop()
            time.sleep(outage)
            broker.start()
            up = time.monotonic()
            report.broker_down_seconds = up - down

            def recovered() -> bool:
                stats = sender.stats()
                if report.recovery_seconds is None and stats.failing_for is None and stats.queued == 0:
                    report.recovery_seconds = time.monotonic() - up
                return report.recovery_seconds is not None

            deadline = up + after
            while time.monotonic() < deadline:
                recovered()
                time.sleep(0.05)
            stop_writers.set()
            for thread in threads:
                thread.join(120)
            # the backlog of the outage may still be going out
            deadline = time.monotonic() + HANG_SECONDS * 4
            while not recovered() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(settle)
            stats = sender.stats()
            report.sent = stats.delivered - baseline.delivered
            report.dropped, report.waiting = stats.dropped - baseline.dropped, stats.queued
            report.emitted = report.sent + report.dropped + report.waiting
            acknowledged = set(report.acknowledged_ids)
            report.received = len(acknowledged.intersection(received))
            report.in_order = _in_order(received)
    finally:
        stop_writers.set()
        stop_consumer.set()
        if sender is not None:
            sender.close(0)
        broker.destroy()
    return report
