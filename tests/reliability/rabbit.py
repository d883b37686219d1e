"""RabbitMQ stopped and started under writes with versioned notifications on.

A RabbitMQ node of the run's own (its own node name, ports and directories; the machine's broker
is never touched) receives the notifications of flavor creates made through the API without pause.
A consumer drains the notification queue as they come. The node is stopped for a while and started
again. Every acknowledged create must be notified or counted as dropped (acknowledged − received);
the API must keep answering (no 5xx, and its slowest answer is reported: a broker outage may
cost a request the notifier's one retry, never a hang).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid

from tests.databases import _reachable
from tests.reliability import world as w

HANG_SECONDS = 30.0


@dataclasses.dataclass
class Report(w.WriteLoad):
    delivered: int = 0
    errors: int = 0
    broker_down_seconds: float = 0.0

    @property
    def dropped(self) -> int:
        return max(0, self.acknowledged - self.delivered)

    @property
    def ok(self) -> bool:
        # delivered before and after the outage, no 5xx, and no answer held for as long as a hang
        return (self.errors == 0 and 0 < self.delivered <= self.acknowledged
                and self.slowest_answer_seconds < HANG_SECONDS)

    def line(self) -> str:
        return (f"rabbitmq: requests={self.requests} acknowledged={self.acknowledged} delivered={self.delivered} "
                f"dropped={self.dropped} 5xx={self.errors} broker-down={self.broker_down_seconds:.1f}s "
                f"slowest-answer={self.slowest_answer_seconds:.2f}s")


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
        self.process = subprocess.Popen(["rabbitmq-server"], env=self.env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True, cwd=self.dir)
        deadline = time.monotonic() + timeout
        while not _reachable("127.0.0.1", self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the own RabbitMQ node did not listen on {self.port}; see {self.dir}/log")
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


def _consume(url: str, queue_name: str, received: set, stop: threading.Event) -> None:
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
                        received.add(data.get("flavorid"))
        except Exception:  # noqa: BLE001 - broker away or queue not declared yet: try again
            time.sleep(0.2)


def run(port: int, *, writers: int = 2, before: float = 3.0, outage: float = 4.0, after: float = 6.0,
        settle: float = 3.0) -> Report:
    report = Report()
    broker = OwnRabbit(port)
    stop_writers, stop_consumer = threading.Event(), threading.Event()
    received: set = set()
    lock = threading.Lock()
    run_id = uuid.uuid4().hex[:8]
    topic = f"versioned_notifications-{run_id}"
    try:
        broker.start()
        with w.world_on_sqlite(DEFAULT={"control_exchange": f"openkeel-reliability-{run_id}"},
                               notifications={"notification_format": "versioned",
                                              "versioned_notifications_topics": topic},
                               oslo_messaging_notifications={"driver": "messagingv2",
                                                             "transport_url": broker.url}) as world:
            # The first create declares the queue; the consumer starts on it.
            w.api(world.app, "POST", "/flavors", body={"flavor": {"name": "rq-first", "id": "rq-first", "ram": 64,
                                                                  "vcpus": 1, "disk": 0}})
            consumer = threading.Thread(target=_consume, args=(broker.url, f"{topic}.info", received, stop_consumer),
                                        daemon=True)
            consumer.start()

            def record(flavorid: str, status: int, sent_at: float, seconds: float) -> None:
                with lock:
                    report.heard(flavorid, status, seconds)
                    report.errors += status >= 500

            threads = [threading.Thread(target=w.create_flavors, args=(world, f"rq-{i}", stop_writers, record, 0.02),
                                        daemon=True) for i in range(writers)]
            for thread in threads:
                thread.start()
            time.sleep(before)
            down = time.monotonic()
            broker.stop()
            time.sleep(outage)
            broker.start()
            report.broker_down_seconds = time.monotonic() - down
            time.sleep(after)
            stop_writers.set()
            for thread in threads:
                thread.join(120)
            time.sleep(settle)
            report.delivered = len(received & set(report.acknowledged_ids))
    finally:
        stop_writers.set()
        stop_consumer.set()
        broker.destroy()
    return report
