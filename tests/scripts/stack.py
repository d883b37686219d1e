"""A real ``scripts/serve`` (API, controller, local image service) in a throwaway checkout, as a user runs it.

Started on a free port with its image service on any free port (``--image-port 0``: not Glance's 9292,
which a running scripts/serve may hold), stopped with SIGTERM to the supervisor alone, as Ctrl-C reaches
it; ``descendants`` lists the processes it started.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
import urllib.request

from tests.processes import tree
from tests.scripts.checkout import clean_env, free_port, make_checkout

START_TIMEOUT = 120


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    return set(tree(pid)) - {pid}


def alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Stack:
    def __init__(self, home: pathlib.Path, *args: str):
        """``args``: more options for scripts/serve (after ``--port`` and ``--image-port 0``, which they override)."""
        self.home = home
        self.checkout = make_checkout(home / "openkeel-compute")
        self.port = free_port()
        self.env = clean_env(home)
        self.log_path = home / "serve.log"
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--port", str(self.port), "--image-port", "0", "--console-port", "0", *args]

    def start(self) -> Stack:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen([str(self.checkout / "scripts/serve"), *self.args],
                                         cwd=self.checkout, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self.proc.poll() is None, f"scripts/serve exited {self.proc.returncode}:\n{self.log()}"
            if "serve: ready" in self.log():  # the API answered and var/clouds.yaml is written
                break
            assert time.monotonic() < deadline, f"not ready in {START_TIMEOUT} s:\n{self.log()}"
            time.sleep(0.2)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def call(self, method: str, path: str, body=None, token: str = "admin:admin",
             version: str = "2.104") -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, {"raw": raw.decode(errors="replace")}

    def wait_status(self, server_id: str, want: str, timeout: float = 30.0, **kw) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.call("GET", f"/v2.1/servers/{server_id}", **kw)
            if status == 200 and body["server"]["status"] == want:
                return body["server"]
            assert time.monotonic() < deadline, f"server {server_id} not {want} in {timeout} s: {status} {body}"
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal the supervisor alone (as Ctrl-C does: its children lead their own groups); its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in descendants(self.proc.pid):
                os.kill(pid, signal.SIGKILL)
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            raise
