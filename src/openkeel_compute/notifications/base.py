"""What every versioned notification shares: the gate, the transport and the envelope.

Nova's API service publishes its versioned notifications with priority ``INFO`` and publisher id
``nova-api:<host>``; each payload is a versioned object (``nova_object.name``, ``.namespace``,
``.version``, ``.data``) without ``nova_object.changes``, because Nova resets the change tracking
before it serialises. ``VersionedNotifier`` holds the one oslo.messaging notifier of a process;
the per-object modules (flavor, keypair) only build payloads and name events.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from openkeel_compute.conf import notifications as options
from openkeel_compute.notifications.sender import TRANSPORT_DRIVERS, BackgroundSender

if TYPE_CHECKING:  # oslo.messaging is imported only when a notifier really sends
    import oslo_messaging

LOG = logging.getLogger(__name__)

PAYLOAD_NAMESPACE = "nova"
OSLO_GROUP = options.OSLO_NOTIFICATIONS_GROUP
# Nova's publisher "source" for notifications emitted by the API service.
PUBLISHER_SOURCE = "nova-api"


def envelope(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    """A payload object in Nova's versioned-object envelope."""
    return {
        "nova_object.name": name,
        "nova_object.namespace": PAYLOAD_NAMESPACE,
        "nova_object.version": version,
        "nova_object.data": data,
    }


def _request_context_serializer() -> oslo_messaging.Serializer:
    """An oslo.messaging serializer (built on first use: the import is heavy)."""
    import oslo_messaging

    class _RequestContextSerializer(oslo_messaging.Serializer):
        """Send the payload as is and the request context as its dict.

        oslo.messaging hands us a redacted copy of the context (or ``{}`` when there is
        none); the AMQP drivers flatten the dict into ``_context_*`` message keys.
        """

        def serialize_entity(self, ctxt: Any, entity: Any) -> Any:
            return entity

        def deserialize_entity(self, ctxt: Any, entity: Any) -> Any:
            return entity

        def serialize_context(self, ctxt: Any) -> dict[str, Any]:
            to_dict = getattr(ctxt, "to_dict", None)
            return to_dict() if callable(to_dict) else dict(ctxt or {})

        def deserialize_context(self, ctxt: Any) -> Any:
            return ctxt

    return _RequestContextSerializer()


def _ensure_registered(conf: cfg.ConfigOpts, *, legacy: bool = False) -> None:
    """Register the options unless the configuration owner already did (and maybe re-defaulted them).

    oslo.messaging's are needed (and imported) only when something could be sent: versioned
    notifications, or (``legacy``) the server notifications of the unversioned format."""
    try:
        conf.notifications.notification_format  # noqa: B018 - probing for registration
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        options.register_opts(conf)
    if conf.notifications.notification_format not in ("versioned", "both") and not (
            legacy and conf.notifications.notification_format == "unversioned" and _driver_configured(conf)):
        return
    try:
        conf.oslo_messaging_notifications.driver  # noqa: B018
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        options.register_messaging_opts(conf)


def _driver_configured(conf: cfg.ConfigOpts) -> bool:
    """Whether a notification driver could be set (without importing oslo.messaging to read its option):
    the [oslo_messaging_notifications] section, or [DEFAULT] notification_driver, its old name. With
    Nova's default format and neither, nothing is sent and oslo.messaging need not be loaded."""
    try:
        conf.oslo_messaging_notifications.driver  # noqa: B018 - registered already: read it
        return True
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        pass
    if OSLO_GROUP in conf.list_all_sections():
        return True
    namespace: Any = getattr(conf, "_namespace", None)
    try:
        namespace._get_file_value([("DEFAULT", "notification_driver")])
    except (AttributeError, KeyError, LookupError, TypeError):
        return False
    return True


def notifications_enabled(conf: cfg.ConfigOpts) -> bool:
    """Whether versioned notifications would leave the process with this configuration.

    Flavor and key pair events are sent only in the versioned format, so ``notification_format``
    must be ``versioned`` or ``both``; and a driver other than ``noop`` must be configured.
    """
    _ensure_registered(conf)
    if conf.notifications.notification_format not in ("versioned", "both"):
        return False
    drivers = set(conf.oslo_messaging_notifications.driver) - {"noop"}
    return bool(drivers)


def legacy_notifications_enabled(conf: cfg.ConfigOpts) -> bool:
    """Whether the legacy (unversioned) server notifications would leave the process."""
    _ensure_registered(conf, legacy=True)
    if conf.notifications.notification_format not in ("unversioned", "both"):
        return False
    try:
        conf.oslo_messaging_notifications.driver  # noqa: B018
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return False  # no driver configured (see _driver_configured): the default, noop
    return bool(set(conf.oslo_messaging_notifications.driver) - {"noop"})


class VersionedNotifier:
    """Publishes Nova-compatible versioned notifications through oslo.messaging, in the background.

    When notifications are disabled no transport is created and every send returns after one
    attribute check. When they are enabled, the request builds the payload and hands it to the
    process's background sender (``sender.BackgroundSender``), which publishes it from its own
    thread: a broker outage never makes a request wait, and a notification that cannot be sent
    is counted as dropped, never turned into an error of the request that caused it.
    """

    def __init__(self, conf: cfg.ConfigOpts, host: str | None = None) -> None:
        self.host = host or socket.gethostname()
        self.publisher_id = f"{PUBLISHER_SOURCE}:{self.host}"
        self.enabled = notifications_enabled(conf)
        self._transport: oslo_messaging.Transport | None = None
        self._serializer: oslo_messaging.Serializer | None = None
        self.sender: BackgroundSender | None = None
        if self.enabled:
            self.sender = self._make_sender(conf, list(conf.notifications.versioned_notifications_topics))

    def _make_sender(self, conf: cfg.ConfigOpts, topics: list[str]) -> BackgroundSender:
        """A background sender publishing on ``topics`` through the process's one transport."""
        import oslo_messaging

        if self._transport is None:
            self._transport = oslo_messaging.get_notification_transport(conf)
            self._serializer = _request_context_serializer()
        drivers = [d for d in conf.oslo_messaging_notifications.driver if d != "noop"]
        on_transport = [d for d in drivers if d in TRANSPORT_DRIVERS]
        others = [d for d in drivers if d not in TRANSPORT_DRIVERS]
        retry = conf.oslo_messaging_notifications.retry
        other_notifiers = [oslo_messaging.Notifier(self._transport, publisher_id=self.publisher_id, driver=name,
                                                   serializer=self._serializer, topics=topics, retry=retry)
                           for name in others]
        # "messaging" and "messagingv2" both listed would send every notification twice, as
        # oslo.messaging does; the version of the last one listed is used for both copies.
        return BackgroundSender(
            self._transport,
            transport_topics=topics * len(on_transport),
            transport_version=TRANSPORT_DRIVERS[on_transport[-1]] if on_transport else 2.0,
            other_notifiers=other_notifiers,
            retry=retry,
            queue_size=conf.notifications.send_queue_size,
            max_wait=conf.notifications.send_max_wait,
            flush_seconds=conf.notifications.send_flush_seconds,
        )

    def close(self, flush_seconds: float | None = None) -> None:
        """Send what is queued (for up to ``flush_seconds``), then release the broker connections."""
        self.enabled = False
        if self.sender is not None:
            self.sender.close(flush_seconds)
        if self._transport is not None:
            self._transport.cleanup()
            self._transport = None

    def _contexts(self, context: Any) -> tuple[Any, dict]:
        """The request context's redacted copy (no token) and that copy as sent; ({}, {}) without one."""
        if context is None or type(context) is dict:
            return {}, {}
        redacted = getattr(context, "redacted_copy", None)
        if not callable(redacted):
            return {}, {}
        assert self._serializer is not None
        copy = redacted()
        return copy, self._serializer.serialize_context(copy)

    def _send(self, event_type: str, build_payload, context: Any, subject: Any) -> None:
        """Build the payload and queue it at INFO; ``subject`` names the object in a failure's log line."""
        if not self.enabled or self.sender is None:
            return
        try:
            # Built here, in the request: a malformed object is logged now and never becomes a 500
            # after the commit; the payload is plain data from then on.
            payload = build_payload()
            self.sender.submit(*self._contexts(context), event_type, payload, publisher_id=self.publisher_id)
        except Exception:
            LOG.exception("Could not send %s notification for %s", event_type, subject)
