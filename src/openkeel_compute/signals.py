"""Signal handlers that set a ``threading.Event``, safe against a second signal.

Python runs a signal handler in the main thread between two bytecodes, including the bytecodes of
another handler. ``Event.set()`` holds the event's (non-reentrant) lock while it wakes the waiters: a
second signal arriving in that moment runs the handler again, which waits for the lock its own
thread holds, forever. Two signals in a row are ordinary: Ctrl-C reaches every process of the
terminal's group while a supervisor forwards it too, and systemd signals every process of a unit.

A handler made here skips the ``set()`` when it interrupted one already under way: that one
completes and wakes the waiters. This module imports only the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def guarded(wake: Callable[[], object]) -> Callable[[], None]:
    """``wake`` (an ``Event.set`` or the like) that a call interrupting an unfinished call skips."""
    busy = False

    def call() -> None:
        nonlocal busy
        if busy:  # a signal within the call below: that call ends and wakes the waiters itself
            return
        busy = True
        try:
            wake()
        finally:
            busy = False

    return call


def setter(event: threading.Event) -> Callable[..., None]:
    """A handler for ``signal.signal`` that sets ``event``."""
    wake = guarded(event.set)
    return lambda _signum=None, _frame=None: wake()
