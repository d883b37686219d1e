"""End to end against the real RabbitMQ on 127.0.0.1:5672: what a consumer of Nova's
versioned notifications actually receives from OpenKeel.

Each run publishes on its own exchange and topic, so parallel runs never share a queue;
both are deleted afterwards. When the broker is unreachable the test fails (start it
with ``rabbitmq-server -detached``) unless OPENKEEL_SKIP_RABBITMQ=1.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import kombu
import kombu.exceptions
from oslo_config import cfg

from openkeel_compute.notifications import FlavorNotifier
from tests.notifications.conftest import SAMPLE_FLAVOR, SAMPLE_FLAVOR_AFTER_UPDATES
from tests.notifications.flavor_payloads import (
    EXPECTED_CREATE_PAYLOAD,
    EXPECTED_DELETE_PAYLOAD,
    EXPECTED_UPDATE_PAYLOAD,
    assert_same_payload,
)
from tests.notifications.rabbitmq import (
    TRANSPORT_URL,
    receive,
)


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


