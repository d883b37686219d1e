"""The embedded Placement process stops on SIGTERM or SIGINT whatever it is doing, a request included.

The supervisor of scripts/serve ends it with SIGTERM (also through the parent-death signal when the
supervisor itself is killed); a stop that waited for an idle moment, or that a request in flight
could swallow, would leave a Placement running with nobody to stop it.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from openkeel_compute.placement import embedded

HEADERS = {"X-Auth-Token": embedded.TOKEN, "OpenStack-API-Version": "placement latest"}


def _hammer(url: str, stop: threading.Event) -> None:
    """Requests back to back, so that a signal most likely arrives while Placement answers one."""
    while not stop.is_set():
        req = urllib.request.Request(url + "/resource_providers", headers=HEADERS)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                resp.read()
        except OSError:
            return


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_while_it_answers_requests(tmp_path, sig):
    for attempt in range(2):
        running = embedded.start(tmp_path / f"p{attempt}")
        stop = threading.Event()
        clients = [threading.Thread(target=_hammer, args=(running.url, stop), daemon=True) for _ in range(2)]
        for client in clients:
            client.start()
        time.sleep(0.5)
        running.process.send_signal(sig)
        try:
            code = running.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            running.process.kill()
            running.process.wait()
            raise AssertionError(f"still serving 5 s after signal {sig.name} (attempt {attempt + 1})") from None
        finally:
            stop.set()
            for client in clients:
                client.join(timeout=10)
        assert code == 0, f"exit status {code} after {sig.name}"
