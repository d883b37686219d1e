"""Watch a server's status and task state over plain HTTP while a client works on it."""

from __future__ import annotations

import threading
import time


class Watcher:
    """Polls GET /servers/{id} every ``interval`` and records each change of (status, task_state, locked).

    ``seen`` is the list of distinct consecutive observations; 404 is recorded as ("404", None, None).
    Clients take seconds per command, the watcher tens of milliseconds: it sees the transient states
    (BUILD, powering-off, REBOOT, ...) that the API shows between a request and the controller's work.
    """

    def __init__(self, stack, token: str = "admin:admin", interval: float = 0.05):
        self.stack, self.token, self.interval = stack, token, interval
        self.server_id: str | None = None
        self.seen: list[tuple] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def watch(self, server_id: str) -> Watcher:
        self.server_id = server_id
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            status, body = self.stack.call("GET", f"/v2.1/servers/{self.server_id}", token=self.token)
            if status == 200:
                server = body["server"]
                got = (server["status"], server["OS-EXT-STS:task_state"], server["locked"])
            else:
                got = (str(status), None, None)
            with self._lock:
                if not self.seen or self.seen[-1] != got:
                    self.seen.append(got)
            if got[0] == "404":
                return
            time.sleep(self.interval)

    def statuses(self) -> list[str]:
        with self._lock:
            out = []
            for status, *_ in self.seen:
                if not out or out[-1] != status:
                    out.append(status)
            return out

    def mark(self) -> int:
        with self._lock:
            return len(self.seen)

    def since(self, mark: int) -> list[tuple]:
        with self._lock:
            return self.seen[max(0, mark - 1):]

    def wait_for(self, predicate, timeout: float = 30.0) -> tuple:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.seen and predicate(self.seen[-1]):
                    return self.seen[-1]
            time.sleep(0.05)
        raise AssertionError(f"not reached in {timeout} s; seen {self.seen}")

    def passes(self, mark: int, transient: tuple, final: str, timeout: float = 30.0, quiet: float = 2.0) -> bool:
        """Wait until, after ``mark``, the server showed ``transient`` and then settled in ``final`` (no
        task): True. A step the controller finishes within one poll of the watcher (a soft reboot on the
        built-in cluster can) shows no transient state at all: when the server stays settled in ``final``
        for ``quiet`` seconds without it, False, and the caller proves the step by its instance action."""
        deadline = time.monotonic() + timeout
        settled_since = None
        while time.monotonic() < deadline:
            states = self.since(mark)
            if transient in states and states[states.index(transient):][-1][:2] == (final, None):
                return True
            if states and states[-1][:2] == (final, None):
                settled_since = settled_since or time.monotonic()
                if time.monotonic() - settled_since >= quiet:
                    return False
            else:
                settled_since = None
            time.sleep(0.05)
        raise AssertionError(f"not {transient} then {final} in {timeout} s; seen since: {self.since(mark)}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
