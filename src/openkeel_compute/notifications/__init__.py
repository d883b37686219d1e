"""Nova-compatible versioned notifications sent through oslo.messaging.

``FlavorNotifier`` publishes ``flavor.create``, ``flavor.update`` and ``flavor.delete``
with a FlavorPayload 1.4; see :mod:`openkeel_compute.notifications.flavor` for which API
operation calls which method. ``register_opts`` / ``list_opts`` cover the
``[notifications]`` and ``[oslo_messaging_notifications]`` options.
"""

from openkeel_compute.notifications.flavor import (
    FlavorAction,
    FlavorNotifier,
    build_flavor_payload,
    notifications_enabled,
)
from openkeel_compute.notifications.options import list_opts, register_opts

__all__ = [
    "FlavorAction",
    "FlavorNotifier",
    "build_flavor_payload",
    "list_opts",
    "notifications_enabled",
    "register_opts",
]
