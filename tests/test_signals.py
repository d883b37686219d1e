"""A second signal arriving while the first one's handler sets the stop event does not hang the process.

The moment is produced, not waited for: the event's ``set`` calls the handler again while it holds
the event's lock, as a signal arriving in that instant does.
"""

from __future__ import annotations

import signal
import threading

from openkeel_compute import serving
from openkeel_compute.signals import setter


class _SignalledWhileSetting(threading.Event):
    """An event whose first ``set`` is interrupted, under its lock, by ``again()``."""

    def __init__(self):
        super().__init__()
        self.again = None
        self.interrupted = False

    def set(self) -> None:
        with self._cond:
            if not self.interrupted and self.again is not None:
                self.interrupted = True
                self.again()
            self._flag = True
            self._cond.notify_all()


def _returns(call) -> bool:
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout=5)
    return not thread.is_alive()


def test_the_control_case_hangs():
    """Without the guard the moment above deadlocks: the test below can fail."""
    event = _SignalledWhileSetting()
    event.again = event.set
    assert not _returns(event.set)


def test_a_setter_survives_a_second_signal():
    event = _SignalledWhileSetting()
    handler = setter(event)
    event.again = lambda: handler(signal.SIGTERM, None)
    assert _returns(lambda: handler(signal.SIGTERM, None))
    assert event.interrupted and event.is_set()


def test_the_api_process_survives_a_second_signal():
    """The API worker's server (granian's loop in this process) with SIGTERM twice in a row."""
    server = serving.in_process_server("127.0.0.1", 0, 1)
    event = _SignalledWhileSetting()
    server.main_loop_interrupt = event
    event.again = lambda: server.signal_handler_interrupt(signal.SIGTERM, None)
    assert _returns(lambda: server.signal_handler_interrupt(signal.SIGTERM, None))
    assert event.interrupted and event.is_set() and server.interrupt_signal


def test_a_reload_signal_during_a_stop_signal():
    server = serving.in_process_server("127.0.0.1", 0, 1)
    event = _SignalledWhileSetting()
    server.main_loop_interrupt = event
    event.again = lambda: server.signal_handler_reload(signal.SIGHUP, None)
    assert _returns(lambda: server.signal_handler_interrupt(signal.SIGTERM, None))
    assert event.is_set() and server.interrupt_signal and server.reload_signal
