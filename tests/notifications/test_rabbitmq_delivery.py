"""End to end against the real RabbitMQ on 127.0.0.1:5672: what a consumer of Nova's
versioned notifications actually receives from OpenKeel.

Each run publishes on its own exchange and topic, so parallel runs never share a queue;
both are deleted afterwards. When the broker is unreachable the test fails (start it
with ``rabbitmq-server -detached``) unless OPENKEEL_SKIP_RABBITMQ=1.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kombu
import kombu.exceptions
import pytest
from oslo_config import cfg

from openkeel_compute.notifications import FlavorNotifier
from tests.notifications.conftest import SAMPLE_FLAVOR, SAMPLE_FLAVOR_AFTER_UPDATES
from tests.notifications.test_flavor_payload import (
    EXPECTED_CREATE_PAYLOAD,
    EXPECTED_DELETE_PAYLOAD,
    EXPECTED_UPDATE_PAYLOAD,
    assert_same_payload,
)

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


def test_flavor_notifications_reach_a_rabbitmq_consumer_as_nova_sends_them(
    broker: kombu.Connection, make_conf: Callable[..., cfg.ConfigOpts]
) -> None:
    run = uuid.uuid4().hex[:12]
    exchange, topic = f"openkeel-test-{run}", f"versioned_notifications-{run}"
    conf = make_conf(
        DEFAULT__control_exchange=exchange,
        oslo_messaging_notifications__driver=["messagingv2"],
        oslo_messaging_notifications__transport_url=TRANSPORT_URL,
        notifications__notification_format="versioned",
        notifications__versioned_notifications_topics=[topic],
    )
    notifier = FlavorNotifier(conf, host="fake-mini")
    try:
        assert notifier.enabled
        notifier.flavor_create(SAMPLE_FLAVOR)
        notifier.flavor_update(SAMPLE_FLAVOR_AFTER_UPDATES)
        notifier.flavor_delete(SAMPLE_FLAVOR)
    finally:
        notifier.close()

    try:
        messages = receive(broker, f"{topic}.info", 3)
    finally:
        channel = broker.default_channel
        kombu.Queue(f"{topic}.info", channel=channel, no_declare=True).delete()
        kombu.Exchange(exchange, channel=channel).delete()

    decoded: list[dict[str, Any]] = []
    for message in messages:
        assert message.delivery_info["exchange"] == exchange
        assert message.delivery_info["routing_key"] == f"{topic}.info"
        assert message.content_type == "application/json"
        envelope = json.loads(message.body)
        assert envelope["oslo.version"] == "2.0", f"not a messagingv2 envelope: {envelope}"
        decoded.append(json.loads(envelope["oslo.message"]))

    assert [body["event_type"] for body in decoded] == ["flavor.create", "flavor.update", "flavor.delete"]
    for body in decoded:
        assert body["publisher_id"] == "nova-api:fake-mini"
        assert body["priority"] == "INFO"
        assert uuid.UUID(body["message_id"])
        assert body["timestamp"]
    assert_same_payload(decoded[0]["payload"], EXPECTED_CREATE_PAYLOAD)
    assert_same_payload(decoded[1]["payload"], EXPECTED_UPDATE_PAYLOAD)
    assert_same_payload(decoded[2]["payload"], EXPECTED_DELETE_PAYLOAD)


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
