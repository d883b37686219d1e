"""A real ``openkeel-compute serve`` for the client tests, started the way scripts/serve starts it.

A temp state dir with a SQLite file and noauth2, ``openkeel-compute db sync`` then
``openkeel-compute serve --port <free port>`` as a subprocess of the venv this runs from; the
server is stopped (by its own process group id) when the session ends. Clients reach it with the
noauth2 token ``admin:admin`` (admin) or ``project:project`` (a member) and an endpoint override,
as ../shared/reference/clients.md describes.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.processes import stop_group

BIN = pathlib.Path(sys.executable).parent
START_TIMEOUT = 90


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Api:
    """Plain HTTP against the server, to check what the clients did."""

    def __init__(self, url: str):
        self.url = url  # http://127.0.0.1:PORT/v2.1

    def call(self, method: str, path: str, *, token: str = "admin:admin", version: str = "2.86",
             body=None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("X-Auth-Token", token)
        req.add_header("OpenStack-API-Version", f"compute {version}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def get(self, path: str, **kw):
        return self.call("GET", path, **kw)


class Server:
    def __init__(self, root: pathlib.Path):
        self.root = root
        self.port = _free_port()
        self.conf = root / "openkeel-compute.conf"
        self.conf.write_text(
            f"[DEFAULT]\nstate_path = {root}\n"
            "[api]\nauth_strategy = noauth2\n"
            f"[database]\nconnection = sqlite:///{root}/openkeel.sqlite\n"
        )
        self.log = root / "serve.log"
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}/v2.1"
        self.api = Api(self.url)

    def start(self) -> None:
        exe = str(BIN / "openkeel-compute")
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        sync = subprocess.run([exe, "db", "sync", "--config-file", str(self.conf)], check=False, env=env,
                              capture_output=True, text=True, timeout=120)
        assert sync.returncode == 0, f"db sync failed:\n{sync.stdout}\n{sync.stderr}"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [exe, "serve", "--config-file", str(self.conf), "--host", "127.0.0.1",
                 "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"openkeel-compute serve exited {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.3)
        self.stop()
        pytest.fail(f"openkeel-compute serve did not answer in {START_TIMEOUT} s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        stop_group(self.proc)  # start_new_session: the server leads its own process group


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("openkeel-serve"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """A real ``scripts/serve`` (API, controller on its built-in cluster, local image service) for the server
    scenarios; the clients use the var/clouds.yaml it wrote."""
    from tests.scripts.stack import Stack

    stack = Stack(tmp_path_factory.mktemp("serve-stack")).start()
    try:
        yield stack
    finally:
        stack.stop()
