"""Versioned key pair notifications: ``keypair.{create,import,delete}.{start,end}``.

As Nova 34.0.0's API sends them: priority ``INFO``, publisher ``nova-api:<host>``, a
``KeypairPayload`` 1.0 (``user_id``, ``name``, ``fingerprint``, ``public_key``, ``type``).

Which key pair operation sends what, and with which payload:

==================================  ===================  =====================================
Operation (API)                     Event                Payload
==================================  ===================  =====================================
``POST /os-keypairs`` (generated)   ``keypair.create``   start: ``fingerprint`` and
                                                         ``public_key`` null (nothing is
                                                         generated yet); end: the stored pair
``POST /os-keypairs`` (public key)  ``keypair.import``   start: the given ``public_key``,
                                                         ``fingerprint`` null; end: the stored
                                                         pair
``DELETE /os-keypairs/{name}``      ``keypair.delete``   start and end: the pair as it was
==================================  ===================  =====================================

``start`` goes out once the request has passed its checks (schema, policy, name, quota; an
unknown key pair's 404 for delete), ``end`` after the commit. A failure between the two (an
unreadable public key's 400, a duplicate name's 409) leaves a ``start`` without its ``end``,
exactly as in Nova.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from openkeel_compute.notifications.base import VersionedNotifier, envelope

PAYLOAD_NAME = "KeypairPayload"
PAYLOAD_VERSION = "1.0"


class KeypairAction(enum.StrEnum):
    CREATE = "create"
    IMPORT = "import"
    DELETE = "delete"


class Phase(enum.StrEnum):
    START = "start"
    END = "end"


def event_type(action: KeypairAction, phase: Phase) -> str:
    """The wire event type, e.g. ``keypair.import.start``."""
    return f"keypair.{action.value}.{phase.value}"


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def build_keypair_payload(keypair: Mapping[str, Any]) -> dict[str, Any]:
    """The KeypairPayload 1.0 envelope for a key pair dict (``fingerprint``/``public_key`` may be absent)."""
    return envelope(PAYLOAD_NAME, PAYLOAD_VERSION, {
        "user_id": _optional_str(keypair.get("user_id")),
        "name": str(keypair["name"]),
        "fingerprint": _optional_str(keypair.get("fingerprint")),
        "public_key": _optional_str(keypair.get("public_key")),
        "type": str(keypair["type"]),
    })


class KeypairNotifier(VersionedNotifier):
    """Sends the key pair events; see the table at the top of this module for which call is whose."""

    def keypair(self, action: KeypairAction, phase: Phase, keypair: Mapping[str, Any],
                context: Any = None) -> None:
        if not self.enabled:
            return
        subject = "key pair " + str(keypair.get("name") if isinstance(keypair, Mapping) else keypair)
        self._send(event_type(action, phase), lambda: build_keypair_payload(keypair), context, subject)
