"""Nova-compatible versioned notifications sent through oslo.messaging.

``ApiNotifier`` is the API process's one notifier (one transport): ``flavor.create``,
``flavor.update`` and ``flavor.delete`` with a FlavorPayload 1.4 (see
:mod:`openkeel_compute.notifications.flavor`) and ``keypair.{create,import,delete}.{start,end}``
with a KeypairPayload 1.0 (see :mod:`openkeel_compute.notifications.keypair`); and the server
notifications (:mod:`openkeel_compute.notifications.server`), which the controller sends too.
``register_opts`` / ``list_opts`` cover the ``[notifications]`` and
``[oslo_messaging_notifications]`` options.
"""

from openkeel_compute.conf.notifications import list_opts, register_opts
from openkeel_compute.notifications.base import notifications_enabled
from openkeel_compute.notifications.flavor import FlavorAction, FlavorNotifier, build_flavor_payload
from openkeel_compute.notifications.keypair import (
    KeypairAction,
    KeypairNotifier,
    Phase,
    build_keypair_payload,
)
from openkeel_compute.notifications.server import ServerNotifier


class ApiNotifier(FlavorNotifier, KeypairNotifier, ServerNotifier):
    """Every event the API sends, over one oslo.messaging transport."""


__all__ = [
    "ApiNotifier",
    "FlavorAction",
    "FlavorNotifier",
    "KeypairAction",
    "KeypairNotifier",
    "Phase",
    "ServerNotifier",
    "build_flavor_payload",
    "build_keypair_payload",
    "list_opts",
    "notifications_enabled",
    "register_opts",
]
