"""Versioned flavor notifications: ``flavor.create``, ``flavor.update``, ``flavor.delete``.

The messages are byte-compatible with what Nova 34.0.0 publishes: event type
``flavor.<action>``, priority ``INFO``, publisher id ``nova-api:<host>`` and a
``FlavorPayload`` 1.4 object in Nova's versioned-object envelope.

Which flavor operation sends what (as Nova's Flavor object does):

=======================================================  ==========================
Operation (API)                                          Call
=======================================================  ==========================
``POST /flavors`` (create)                               ``flavor_create``
``PUT /flavors/{id}`` (description, 2.55+)               ``flavor_update``
``POST /flavors/{id}/os-extra_specs`` (add / replace)    ``flavor_update``
``PUT /flavors/{id}/os-extra_specs/{key}``               ``flavor_update``
``DELETE /flavors/{id}/os-extra_specs/{key}``            ``flavor_update``
``POST /flavors/{id}/action`` ``addTenantAccess``        ``flavor_update``
``POST /flavors/{id}/action`` ``removeTenantAccess``     ``flavor_update``
``DELETE /flavors/{id}``                                 ``flavor_delete``
=======================================================  ==========================

Call the method after the change is committed, with the flavor as it is *after* the
change (for delete: as it was just before it disappeared). Reads and failed operations
(404, 409, validation errors) never notify. The fine print of Nova's ``save()``:

* a description ``PUT`` always notifies, even when the value is unchanged;
* an extra-specs ``POST``/``PUT`` notifies whenever the flavor ends up with at least one
  extra spec, even if no value changed (Nova re-writes the whole dict); only a ``POST {}``
  on a flavor without extra specs sends nothing;
* an extra-spec ``DELETE`` of an existing key always notifies;
* ``addTenantAccess`` / ``removeTenantAccess`` notify on every success.

What the payload carries differs by event, because Nova builds it from whatever its
Flavor object had loaded at that moment:

* ``flavor.create``: ``extra_specs`` is ``null`` (never loaded at creation; flavors
  are created without extra specs), ``projects`` is the access list (``[]`` for a
  freshly created flavor).
* ``flavor.update``: ``extra_specs`` is the full dict and ``projects`` the full list.
* ``flavor.delete``: both ``extra_specs`` and ``projects`` are ``null``.

Integer sizes that are unset are sent as ``0`` (``vcpu_weight`` included), as Nova
coerces them when it reads the database row.
"""

from __future__ import annotations

import enum
import logging
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from oslo_config import cfg

from openkeel_compute.notifications import options

if TYPE_CHECKING:  # oslo.messaging is imported only when a notifier really sends
    import oslo_messaging

LOG = logging.getLogger(__name__)

PAYLOAD_NAME = "FlavorPayload"
PAYLOAD_VERSION = "1.4"
PAYLOAD_NAMESPACE = "nova"
# Nova's publisher "source" for notifications emitted by the API service.
PUBLISHER_SOURCE = "nova-api"

FlavorDict = Mapping[str, Any]


class FlavorAction(enum.StrEnum):
    """The action part of a flavor event type."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"

    @property
    def event_type(self) -> str:
        """The wire event type, e.g. ``flavor.create``."""
        return f"flavor.{self.value}"


# Which of the two collections Nova has loaded on its Flavor object when it emits each
# event; the ones not loaded go out as null.
_LOADED_COLLECTIONS: dict[FlavorAction, frozenset[str]] = {
    FlavorAction.CREATE: frozenset({"projects"}),
    FlavorAction.UPDATE: frozenset({"extra_specs", "projects"}),
    FlavorAction.DELETE: frozenset(),
}


def _size(value: Any) -> int:
    """Nova turns a NULL integer column into 0 when it loads a flavor."""
    return 0 if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def build_flavor_payload_data(flavor: FlavorDict, action: FlavorAction) -> dict[str, Any]:
    """Return the ``nova_object.data`` of a FlavorPayload 1.4 for ``action``.

    ``flavor`` is the catalogue's flavor dict; the optional keys take the defaults a
    Nova flavor row has (ephemeral_gb/swap 0, rxtx_factor 1.0, not disabled, public).
    """
    loaded = _LOADED_COLLECTIONS[action]
    rxtx_factor = flavor.get("rxtx_factor", 1.0)
    extra_specs: dict[str, str] | None = None
    if "extra_specs" in loaded:
        extra_specs = {str(key): str(value) for key, value in (flavor.get("extra_specs") or {}).items()}
    projects: list[str] | None = None
    if "projects" in loaded:
        projects = [str(project) for project in flavor.get("projects") or []]
    return {
        "flavorid": _optional_str(flavor["flavorid"]),
        "name": str(flavor["name"]),
        "memory_mb": _size(flavor["memory_mb"]),
        "vcpus": _size(flavor["vcpus"]),
        "root_gb": _size(flavor["root_gb"]),
        "ephemeral_gb": _size(flavor.get("ephemeral_gb")),
        "swap": _size(flavor.get("swap")),
        "rxtx_factor": None if rxtx_factor is None else float(rxtx_factor),
        "vcpu_weight": _size(flavor.get("vcpu_weight")),
        "disabled": bool(flavor.get("disabled", False)),
        "is_public": bool(flavor.get("is_public", True)),
        "extra_specs": extra_specs,
        "projects": projects,
        "description": _optional_str(flavor.get("description")),
    }


def build_flavor_payload(flavor: FlavorDict, action: FlavorAction) -> dict[str, Any]:
    """Return the complete FlavorPayload 1.4 envelope Nova puts in the message's ``payload``.

    Nova resets the change tracking before serialising, so no ``nova_object.changes``
    key is ever present.
    """
    return {
        "nova_object.name": PAYLOAD_NAME,
        "nova_object.namespace": PAYLOAD_NAMESPACE,
        "nova_object.version": PAYLOAD_VERSION,
        "nova_object.data": build_flavor_payload_data(flavor, action),
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


def _ensure_registered(conf: cfg.ConfigOpts) -> None:
    """Register the options unless the configuration owner already did (and maybe re-defaulted them)."""
    try:
        conf.notifications.notification_format  # noqa: B018 - probing for registration
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        options.register_opts(conf)
    if conf.notifications.notification_format not in ("versioned", "both"):
        return
    try:
        conf.oslo_messaging_notifications.driver  # noqa: B018
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        options.register_messaging_opts(conf)


def notifications_enabled(conf: cfg.ConfigOpts) -> bool:
    """Whether flavor notifications would leave the process with this configuration.

    Flavor events exist only in the versioned format, so ``notification_format`` must
    be ``versioned`` or ``both``; and a driver other than ``noop`` must be configured.
    """
    _ensure_registered(conf)
    if conf.notifications.notification_format not in ("versioned", "both"):
        return False
    drivers = set(conf.oslo_messaging_notifications.driver) - {"noop"}
    return bool(drivers)


class FlavorNotifier:
    """Publishes Nova-compatible versioned flavor notifications through oslo.messaging.

    When notifications are disabled no transport is created and every method returns
    after one attribute check. When they are enabled, a failure to publish is logged and
    swallowed: a notification must never fail the API request that caused it.
    """

    def __init__(self, conf: cfg.ConfigOpts, host: str | None = None) -> None:
        self.publisher_id = f"{PUBLISHER_SOURCE}:{host or socket.gethostname()}"
        self.enabled = notifications_enabled(conf)
        self._transport: oslo_messaging.Transport | None = None
        self._notifier: oslo_messaging.Notifier | None = None
        if self.enabled:
            import oslo_messaging

            self._transport = oslo_messaging.get_notification_transport(conf)
            self._notifier = oslo_messaging.Notifier(
                self._transport,
                publisher_id=self.publisher_id,
                serializer=_request_context_serializer(),
                topics=conf.notifications.versioned_notifications_topics,
            )

    def flavor_create(self, flavor: FlavorDict, context: Any = None) -> None:
        """Send ``flavor.create`` for a flavor that has just been created."""
        self._emit(FlavorAction.CREATE, flavor, context)

    def flavor_update(self, flavor: FlavorDict, context: Any = None) -> None:
        """Send ``flavor.update`` after a description, extra-spec or access change."""
        self._emit(FlavorAction.UPDATE, flavor, context)

    def flavor_delete(self, flavor: FlavorDict, context: Any = None) -> None:
        """Send ``flavor.delete`` with the flavor as it was before deletion."""
        self._emit(FlavorAction.DELETE, flavor, context)

    def close(self) -> None:
        """Release the broker connections; the notifier sends nothing afterwards."""
        self.enabled = False
        if self._transport is not None:
            self._transport.cleanup()
            self._transport = None
            self._notifier = None

    def _emit(self, action: FlavorAction, flavor: FlavorDict, context: Any) -> None:
        if not self.enabled or self._notifier is None:
            return
        try:
            payload = build_flavor_payload(flavor, action)
            # oslo.messaging already logs and swallows driver errors; this also covers
            # a malformed flavor dict, which must not turn into a 500 after the commit.
            self._notifier.info(context, action.event_type, payload)
        except Exception:
            LOG.exception(
                "Could not send %s notification for flavor %s",
                action.event_type,
                flavor.get("flavorid") if isinstance(flavor, Mapping) else flavor,
            )
