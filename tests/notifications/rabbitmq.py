"""A RabbitMQ broker for the notification tests (skipped without one), the API publishing to it, and a
receiver."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kombu
import kombu.exceptions
import pytest

TRANSPORT_URL = os.environ.get("OPENKEEL_RABBITMQ_URL", "rabbit://guest:guest@127.0.0.1:5672/")


KOMBU_URL = TRANSPORT_URL.replace("rabbit://", "amqp://", 1)


DELIVERY_TIMEOUT_S = 10.0


@pytest.fixture
def broker() -> Iterator[kombu.Connection]:
    """A live connection to the broker, or a clear failure saying how to get one."""
    connection = kombu.Connection(KOMBU_URL, connect_timeout=3)
    try:
        connection.ensure_connection(max_retries=2, interval_start=0.5, interval_step=0.5)
        unreachable = None
    except (kombu.exceptions.OperationalError, OSError) as error:
        unreachable = f"RabbitMQ is not reachable at {TRANSPORT_URL} ({error})"
    # Failing outside the except block keeps the report to the one line that says what to do.
    if unreachable is not None:
        if os.environ.get("OPENKEEL_SKIP_RABBITMQ") == "1":
            pytest.skip(unreachable + "; skipped because OPENKEEL_SKIP_RABBITMQ=1")
        pytest.fail(
            unreachable + ": start it with `rabbitmq-server -detached`, or set OPENKEEL_SKIP_RABBITMQ=1",
            pytrace=False,
        )
    with connection:
        yield connection


def receive(broker: kombu.Connection, queue_name: str, count: int) -> list[kombu.Message]:
    """Pull ``count`` messages from the queue oslo.messaging declared while publishing."""
    from openkeel_compute.notifications import sender

    # The API answers before its background sender publishes (and so declares the queue).
    assert sender.drain_all(DELIVERY_TIMEOUT_S), "the notification sender did not become idle"
    queue = kombu.Queue(queue_name, channel=broker.default_channel, no_declare=True)
    received: list[kombu.Message] = []
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while len(received) < count and time.monotonic() < deadline:
        message = queue.get(no_ack=True)
        if message is None:
            time.sleep(0.05)
        else:
            received.append(message)
    assert len(received) == count, f"received {len(received)} of {count} notifications on {queue_name}"
    return received


@contextlib.contextmanager
def api_publishing(tmp_path, broker: kombu.Connection, name: str) -> Iterator[tuple[Any, str]]:
    """(client, queue): the real API pipeline publishing on an exchange and topic of its own, removed afterwards."""
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from openkeel_compute.db import api as db_api
    from openkeel_compute.db import migration
    from tests.conftest import make_conf
    from tests.wsgi_client import Client

    run = uuid.uuid4().hex[:12]
    exchange, topic = f"openkeel-{name}-{run}", f"versioned_notifications-{run}"
    policies.reset()
    conf = make_conf(
        tmp_path,
        DEFAULT={"control_exchange": exchange, "host": "api-test"},
        notifications={"notification_format": "versioned", "versioned_notifications_topics": topic},
        oslo_messaging_notifications={"driver": "messagingv2", "transport_url": TRANSPORT_URL},
    )
    migration.sync(db_api.get_engine(conf))
    try:
        yield Client(deploy(conf)), f"{topic}.info"
    finally:
        channel = broker.default_channel
        kombu.Queue(f"{topic}.info", channel=channel, no_declare=True).delete()
        kombu.Exchange(exchange, channel=channel).delete()
        policies.reset()
        db_api.dispose_all()
