"""FlavorNotifier behaviour without a broker: option gating, message shape, failure isolation."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pytest
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_messaging import opts as messaging_opts
from oslo_messaging.notify import _impl_test as in_memory_driver

from openkeel_compute.notifications import FlavorNotifier, list_opts, notifications_enabled
from tests.notifications.conftest import SAMPLE_FLAVOR

MakeConf = Callable[..., cfg.ConfigOpts]


@pytest.fixture
def sent_messages() -> Iterator[list]:
    """Messages captured by oslo.messaging's in-memory 'test' driver."""
    in_memory_driver.reset()
    yield in_memory_driver.NOTIFICATIONS
    in_memory_driver.reset()


@pytest.fixture
def in_memory_conf(make_conf: MakeConf) -> cfg.ConfigOpts:
    return make_conf(
        oslo_messaging_notifications__driver=["test"],
        oslo_messaging_notifications__transport_url="fake:/",
        notifications__notification_format="versioned",
    )


def test_defaults_keep_notifications_off(make_conf: MakeConf) -> None:
    conf = make_conf()
    assert conf.oslo_messaging_notifications.driver == ["noop"]
    assert conf.oslo_messaging_notifications.retry == 1
    assert conf.notifications.notification_format == "unversioned"
    assert conf.notifications.versioned_notifications_topics == ["versioned_notifications"]
    assert conf.control_exchange == "nova"
    assert notifications_enabled(conf) is False


@pytest.mark.parametrize(
    ("notification_format", "driver", "enabled"),
    [
        ("unversioned", ["messagingv2"], False),  # flavors have no legacy notification in Nova
        ("versioned", ["messagingv2"], True),
        ("both", ["messagingv2"], True),
        ("versioned", ["noop"], False),
        ("versioned", [], False),
    ],
)
def test_notification_format_and_driver_gate_flavor_notifications(
    make_conf: MakeConf, notification_format: str, driver: list[str], enabled: bool
) -> None:
    conf = make_conf(
        notifications__notification_format=notification_format,
        oslo_messaging_notifications__driver=driver,
    )
    assert notifications_enabled(conf) is enabled


def test_list_opts_shows_openkeel_defaults_without_changing_oslo_messaging() -> None:
    listed = {group: {opt.name: opt.default for opt in opts} for group, opts in list_opts()}
    assert listed["notifications"] == {
        "notification_format": "unversioned",
        "versioned_notifications_topics": ["versioned_notifications"],
        "notify_on_state_change": None,
        "default_level": "INFO",
        "send_queue_size": 10000,
        "send_max_wait": 300.0,
        "bdms_in_notifications": False,
        "send_flush_seconds": 10.0,
    }
    assert listed["oslo_messaging_notifications"]["driver"] == ["noop"]
    assert listed["oslo_messaging_notifications"]["retry"] == 1
    assert listed["DEFAULT"] == {"control_exchange": "nova"}
    library = {g: {o.name: o.default for o in opts} for g, opts in messaging_opts.list_opts()}
    assert library["oslo_messaging_notifications"]["driver"] == []


def test_notifier_can_register_its_own_options() -> None:
    conf = cfg.ConfigOpts()
    conf([], project="openkeel-test")
    notifier = FlavorNotifier(conf, host="api-1")
    assert notifier.enabled is False


def test_disabled_notifier_creates_no_transport_and_costs_next_to_nothing(
    make_conf: MakeConf,
) -> None:
    notifier = FlavorNotifier(make_conf(), host="api-1")
    assert notifier._transport is None
    started = time.perf_counter()
    for _ in range(10_000):
        notifier.flavor_update(SAMPLE_FLAVOR)
    per_call = (time.perf_counter() - started) / 10_000
    assert per_call < 20e-6, f"a disabled notification took {per_call * 1e6:.1f} µs"


def test_messages_carry_nova_s_event_type_publisher_and_priority(
    in_memory_conf: cfg.ConfigOpts, sent_messages: list
) -> None:
    notifier = FlavorNotifier(in_memory_conf, host="fake-mini")
    notifier.flavor_create(SAMPLE_FLAVOR)
    notifier.flavor_update(SAMPLE_FLAVOR)
    notifier.flavor_delete(SAMPLE_FLAVOR)
    notifier.close()

    assert [message["event_type"] for _, message, _, _ in sent_messages] == [
        "flavor.create",
        "flavor.update",
        "flavor.delete",
    ]
    for _context, message, priority, retry in sent_messages:
        assert priority == "INFO"
        assert message["priority"] == "INFO"
        assert message["publisher_id"] == "nova-api:fake-mini"
        assert message["payload"]["nova_object.name"] == "FlavorPayload"
        assert message["payload"]["nova_object.version"] == "1.4"
        assert retry == 1
    payloads = [message["payload"]["nova_object.data"] for _, message, _, _ in sent_messages]
    assert [(p["extra_specs"], p["projects"]) for p in payloads] == [(None, []), ({}, []), (None, None)]


def test_request_context_is_sent_redacted_as_a_dict(
    in_memory_conf: cfg.ConfigOpts, sent_messages: list
) -> None:
    request_context = oslo_context.RequestContext(
        auth_token="secret-token", project_id="p1", user_id="u1", request_id="req-1"
    )
    notifier = FlavorNotifier(in_memory_conf, host="api-1")
    notifier.flavor_create(SAMPLE_FLAVOR, context=request_context)
    notifier.close()

    sent_context = sent_messages[0][0]
    assert sent_context["project_id"] == "p1"
    assert sent_context["request_id"] == "req-1"
    assert sent_context["auth_token"] is None


def test_a_malformed_flavor_is_logged_not_raised(
    in_memory_conf: cfg.ConfigOpts, sent_messages: list, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = FlavorNotifier(in_memory_conf, host="api-1")
    with caplog.at_level(logging.ERROR):
        notifier.flavor_create({"flavorid": "broken"})
    notifier.close()
    assert sent_messages == []
    assert "flavor.create" in caplog.text and "broken" in caplog.text


def test_an_unreachable_broker_is_logged_and_counted_not_raised(
    make_conf: MakeConf, caplog: pytest.LogCaptureFixture
) -> None:
    conf = make_conf(
        oslo_messaging_notifications__driver=["messagingv2"],
        # Port 1 refuses connections; no retry keeps the test fast.
        oslo_messaging_notifications__transport_url="rabbit://guest:guest@127.0.0.1:1/",
        oslo_messaging_notifications__retry=0,
        notifications__notification_format="versioned",
    )
    notifier = FlavorNotifier(conf, host="api-1")
    with caplog.at_level(logging.WARNING):
        notifier.flavor_delete(SAMPLE_FLAVOR)
        assert notifier.sender.stats().delivered == 0
        notifier.close(flush_seconds=1.0)
    stats = notifier.sender.stats()
    assert (stats.delivered, stats.dropped, stats.queued) == (0, 1, 0)
    assert "Cannot send notifications" in caplog.text
    assert "dropped=1" in caplog.text


def test_closed_notifier_sends_nothing(in_memory_conf: cfg.ConfigOpts, sent_messages: list) -> None:
    notifier = FlavorNotifier(in_memory_conf, host="api-1")
    notifier.close()
    notifier.flavor_create(SAMPLE_FLAVOR)
    assert sent_messages == []
