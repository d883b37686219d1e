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
from collections.abc import Mapping
from typing import Any

from openkeel_compute.notifications.base import VersionedNotifier, envelope, notifications_enabled

__all__ = ["FlavorAction", "FlavorNotifier", "build_flavor_payload", "notifications_enabled"]

PAYLOAD_NAME = "FlavorPayload"
PAYLOAD_VERSION = "1.4"

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
    """Return the complete FlavorPayload 1.4 envelope Nova puts in the message's ``payload``."""
    return envelope(PAYLOAD_NAME, PAYLOAD_VERSION, build_flavor_payload_data(flavor, action))


class FlavorNotifier(VersionedNotifier):
    """Sends the flavor events; see the table at the top of this module for which call is whose."""

    def flavor_create(self, flavor: FlavorDict, context: Any = None) -> None:
        """Send ``flavor.create`` for a flavor that has just been created."""
        self._emit(FlavorAction.CREATE, flavor, context)

    def flavor_update(self, flavor: FlavorDict, context: Any = None) -> None:
        """Send ``flavor.update`` after a description, extra-spec or access change."""
        self._emit(FlavorAction.UPDATE, flavor, context)

    def flavor_delete(self, flavor: FlavorDict, context: Any = None) -> None:
        """Send ``flavor.delete`` with the flavor as it was before deletion."""
        self._emit(FlavorAction.DELETE, flavor, context)

    def _emit(self, action: FlavorAction, flavor: FlavorDict, context: Any) -> None:
        if not self.enabled:  # the common case: one attribute check and nothing else
            return
        subject = "flavor " + str(flavor.get("flavorid") if isinstance(flavor, Mapping) else flavor)
        self._send(action.event_type, lambda: build_flavor_payload(flavor, action), context, subject)
