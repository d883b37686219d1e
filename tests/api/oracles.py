"""The live Nova 34.0.0 oracles of ../shared/nova-oracle for differential tests: start one on a free
port (or use one already running, given by URL), ask it, and compare its answers with OpenKeel's.

An oracle's virtualenv is made by its own script the first time a test needs it (``oracle_script``):
one test makes it while the other workers wait for it, whichever test comes first. Skips with the reason
when ../shared is absent or the virtualenv cannot be made (a failure under OPENKEEL_REQUIRE_SHARED=1, as
tests/_shared.py does).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

from tests._shared import shared_path, unavailable

HOME = pathlib.Path(os.environ.get("HOME", "/root"))
FLAVOR_ORACLE_VENV = pathlib.Path(os.environ.get("NOVA_ORACLE_VENV", HOME / ".cache" / "nova-oracle" / "venv"))
SERVERS_ORACLE_VENV = pathlib.Path(os.environ.get("NOVA_SERVERS_ORACLE_VENV",
                                                  HOME / ".cache" / "nova-servers-oracle" / "venv"))
# Each script of ../shared/nova-oracle, its virtualenv and the variable that names that virtualenv to it.
_VENVS = {"run-oracle.sh": (FLAVOR_ORACLE_VENV, "NOVA_ORACLE_VENV"),
          "run-servers-oracle.sh": (SERVERS_ORACLE_VENV, "NOVA_SERVERS_ORACLE_VENV")}
# Written into a virtualenv once its script started an oracle from it.
_READY = ".openkeel-oracle-started"
# Headers that differ by nature between two answers (time, request ids, the server's software).
_VOLATILE = {"date", "server", "connection", "x-openstack-request-id", "x-compute-request-id", "content-length"}


def free_port() -> int:
    """A port the system says is free: oracles started by parallel test workers never share one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _script_env(script: str) -> dict[str, str]:
    """The environment ``script`` runs in: the variable that names its virtualenv set to the one used here."""
    venv, variable = _VENVS[script]
    return {**os.environ, variable: str(venv)}


def oracle_script(script: str) -> pathlib.Path:
    """../shared/nova-oracle/``script``, with its oracle's virtualenv made when it was never started here.

    The script makes its virtualenv itself when it starts an oracle and finds none (a minute or two of pip);
    two test workers doing it at once would write the same virtualenv, so the first one here starts and
    stops an oracle under a lock and marks the virtualenv, and the others wait for it.
    """
    path = shared_path(f"nova-oracle/{script}")
    venv = _VENVS[script][0]
    if (venv / _READY).exists():
        return path
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.openkeel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / _READY).exists():
            port, env = free_port(), _script_env(script)
            try:
                done = subprocess.run([str(path), "start", str(port)], capture_output=True, text=True, timeout=900,
                                      env=env, check=False)
            except subprocess.TimeoutExpired:
                done = subprocess.CompletedProcess([], 1, "", "did not start within 900 s")
            finally:
                subprocess.run([str(path), "stop", str(port)], capture_output=True, timeout=120, env=env,
                               check=False)
            if done.returncode != 0:
                unavailable(f"the Nova oracle's virtualenv {venv} could not be made by ../shared/nova-oracle/"
                            f"{script} start: {done.stderr.strip()[-1500:]}")
            (venv / _READY).write_text(f"{script} started an oracle from this virtualenv\n")
    return path


def oracle_python(script: str) -> pathlib.Path:
    """The Python of ``script``'s oracle virtualenv (Nova 34.0.0 installed), made when absent."""
    oracle_script(script)
    return _VENVS[script][0] / "bin" / "python"


@contextlib.contextmanager
def running(script: str, url_variable: str) -> Iterator[str]:
    """The URL of a fresh oracle started with ../shared/nova-oracle/``script`` (stopped afterwards),
    or of the one named by the environment variable ``url_variable``."""
    if os.environ.get(url_variable):
        yield os.environ[url_variable].rstrip("/")
        return
    path, env, port = oracle_script(script), _script_env(script), free_port()
    subprocess.run([str(path), "start", str(port)], check=True, capture_output=True, timeout=600, env=env)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        subprocess.run([str(path), "stop", str(port)], check=False, capture_output=True, timeout=120, env=env)


def flavor_oracle() -> contextlib.AbstractContextManager[str]:
    """nova-api alone (no compute service, no Glance, Neutron, Cinder, Ironic or Manila)."""
    return running("run-oracle.sh", "OPENKEEL_NOVA_ORACLE_URL")


def servers_oracle() -> contextlib.AbstractContextManager[str]:
    """nova-api with conductor, scheduler, fake computes, Placement and Neutron/Glance/Cinder fixtures."""
    return running("run-servers-oracle.sh", "OPENKEEL_SERVERS_ORACLE_URL")


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
