"""The live Nova 34.0.0 oracles of ../shared/nova-oracle for differential tests: start one on a free
port (or use one already running, given by URL), ask it, and compare its answers with OpenKeel's.

Skips with the reason when ../shared or the oracle's virtualenv is absent (a failure under
OPENKEEL_REQUIRE_SHARED=1 for ../shared, as tests/_shared.py does).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from tests._shared import shared_path

HOME = pathlib.Path(os.environ.get("HOME", "/root"))
FLAVOR_ORACLE_VENV = pathlib.Path(os.environ.get("NOVA_ORACLE_VENV", HOME / ".cache" / "nova-oracle" / "venv"))
SERVERS_ORACLE_VENV = pathlib.Path(os.environ.get("NOVA_SERVERS_ORACLE_VENV",
                                                  HOME / ".cache" / "nova-servers-oracle" / "venv"))
# Headers that differ by nature between two answers (time, request ids, the server's software).
_VOLATILE = {"date", "server", "connection", "x-openstack-request-id", "x-compute-request-id", "content-length"}


def free_port() -> int:
    """A port the system says is free: oracles started by parallel test workers never share one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(script: str, venv: pathlib.Path, url_variable: str) -> Iterator[str]:
    """The URL of a fresh oracle started with ../shared/nova-oracle/``script`` (stopped afterwards),
    or of the one named by the environment variable ``url_variable``."""
    if os.environ.get(url_variable):
        yield os.environ[url_variable].rstrip("/")
        return
    path = shared_path(f"nova-oracle/{script}")
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"the Nova oracle's virtualenv {venv} is absent: run ../shared/nova-oracle/{script} start once")
    port = free_port()
    subprocess.run([str(path), "start", str(port)], check=True, capture_output=True, timeout=600)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run([str(path), "stop", str(port)], check=False, capture_output=True, timeout=120)


def flavor_oracle() -> contextlib.AbstractContextManager[str]:
    """nova-api alone (no compute service, no Glance, Neutron, Cinder, Ironic or Manila)."""
    return running("run-oracle.sh", FLAVOR_ORACLE_VENV, "OPENKEEL_NOVA_ORACLE_URL")


def servers_oracle() -> contextlib.AbstractContextManager[str]:
    """nova-api with conductor, scheduler, fake computes, Placement and Neutron/Glance/Cinder fixtures."""
    return running("run-servers-oracle.sh", SERVERS_ORACLE_VENV, "OPENKEEL_SERVERS_ORACLE_URL")


class Answer:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self):
        return json.loads(self.body)

    def comparable(self) -> tuple[int, list[tuple[str, str]], object]:
        """Status, the headers that do not vary by nature (sorted), and the body (decoded if JSON)."""
        headers = sorted((k.lower(), v) for k, v in self.headers if k.lower() not in _VOLATILE)
        try:
            body = json.loads(self.body) if self.body else None
        except ValueError:
            body = self.body.decode("utf-8", "replace")
        return self.status, headers, body


def request_headers(token: str, version: str | None, body: bytes | None) -> dict[str, str]:
    headers = {"X-Auth-Token": token}
    if version:
        headers["OpenStack-API-Version"] = f"compute {version}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    return headers


def ask_nova(base: str, method: str, path: str, *, token: str = "admin:admin", version: str | None = None,
             body: bytes | None = None) -> Answer:
    """``path`` from the root (/v2.1/… or /v2/…)."""
    req = urllib.request.Request(base + path, method=method, data=body,
                                 headers=request_headers(token, version, body))
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return Answer(resp.status, list(resp.headers.items()), resp.read())
    except urllib.error.HTTPError as err:
        return Answer(err.code, list(err.headers.items()), err.read())


def ask_openkeel(client, method: str, path: str, *, token: str = "admin:admin", version: str | None = None,
                 body: bytes | None = None) -> Answer:
    """``path`` as sent over HTTP: its percent-escapes are decoded into PATH_INFO, as a server does."""
    route, _, query = path.partition("?")
    route = urllib.parse.unquote(route, encoding="latin-1")
    result = client.request(method, route, query=query, headers=request_headers(token, version, body), body=body)
    return Answer(result.status_code, result.header_list, result.content)
