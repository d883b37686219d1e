"""oslo.policy's extension checks (rules such as ``http://…``), imported when a rule first uses one.

oslo.policy finds them through the ``oslo.policy.rule_checks`` entry points and imports every one
the first time it parses any rule; its ``http``/``https`` checks import requests (urllib3,
charset_normalizer, idna with it), which would stay resident in every API worker although Nova's
rules never use them. Here the same entry points are listed without importing them; each is
imported the first time a rule of its kind is parsed, and behaves as oslo.policy's own loading
would from then on.
"""

from __future__ import annotations

import threading
from importlib.metadata import EntryPoint
from typing import Any

import stevedore
from oslo_policy import _checks

GROUP = "oslo.policy.rule_checks"


# Set once any rule parsed in this process uses an extension check: their answers (a remote
# server's, for http/https) are not a function of the rule, target and credentials alone, so the
# policy module stops remembering decisions (openkeel_compute.policies.authorize).
_used = threading.Event()


def any_used() -> bool:
    """Whether a rule parsed in this process uses an extension check."""
    return _used.is_set()


def forget_use() -> None:
    """For a new enforcer, whose rules are parsed again."""
    _used.clear()


class DeferredCheck:
    """Builds the check of one entry point, importing its class on the first call."""

    def __init__(self, entry_point: EntryPoint):
        self.entry_point = entry_point
        self._class: Any = None
        self._lock = threading.Lock()

    def __call__(self, kind: str, match: str):
        _used.set()
        if self._class is None:
            with self._lock:
                if self._class is None:
                    self._class = self.entry_point.load()
        return self._class(kind, match)


def defer() -> None:
    """List the extension checks for oslo.policy without importing them (once per process; a no-op
    when oslo.policy has loaded them already)."""
    if _checks.extension_checks is not None:
        return
    # The entry points come from stevedore's cache of them, as oslo.policy's own loading reads them
    # (and the health check's, at the same start-up): scanning every installed distribution's
    # metadata again took ~35 ms of each start. A manager of no names imports none of them.
    listing = stevedore.NamedExtensionManager(GROUP, names=[]).list_entry_points()
    _checks.extension_checks = {ep.name: DeferredCheck(ep) for ep in listing}
