"""A real Neutron 29 for the tests, from ../shared's recipes (reference/tempest/keystone-up.sh and
neutron-up.sh), started once per test session.

``OPENKEEL_TEST_NEUTRON_DIR`` names one already running (neutron-up.sh's services dir, with
harness/keystone.env and networks.env): it is used as it is. Otherwise, when the recipes are there, a
throw-away Keystone (free port) and Neutron (free port, its own MariaDB database and RabbitMQ vhost
``okc_test_<pid>``) are started in a temporary directory, with the networks ``public`` (external) and
``private`` (shared), and stopped (database and vhost dropped) when the session ends. Their virtualenvs
are kept in ``$OPENKEEL_CACHE/shared-neutron`` (default ~/.cache/openkeel): the first session builds them
(a few minutes), later ones start in about half a minute.

When the recipes are absent the tests skip with the reason. When they are there but cannot start
(no MariaDB or RabbitMQ, a failed install…) the tests skip with the reason and the log's tail, and fail
under OPENKEEL_REQUIRE_SHARED=1.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from tests._shared import SHARED

RECIPES = SHARED / "reference" / "tempest"
START_TIMEOUT = 1200  # the first session installs Keystone's and Neutron's virtualenvs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SharedNeutron:
    """A Keystone and a Neutron started from the recipes; ``services`` is neutron-up.sh's services dir."""

    def __init__(self) -> None:
        cache = pathlib.Path(os.environ.get("OPENKEEL_CACHE", pathlib.Path.home() / ".cache" / "openkeel"))
        self.cache = cache / "shared-neutron"
        self.services = pathlib.Path(tempfile.mkdtemp(prefix="openkeel-neutron-"))
        self.harness = self.services / "harness"
        self.log = self.services / "bring-up.log"
        self.seconds = 0.0
        self.env = {
            **os.environ, "OKC_SERVICES_DIR": str(self.services), "HARNESS_DIR": str(self.harness),
            "VENV": str(self.cache / "harness-venv"), "HVENV": str(self.cache / "harness-venv"),
            "NEUTRON_VENV": str(self.cache / "neutron-venv"), "KS_PORT": str(_free_port()),
            "NEUTRON_PORT": str(_free_port()), "NEUTRON_DB_NAME": f"okc_test_{os.getpid()}",
            "PYTHONWARNINGS": "ignore"}
        for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_TOKEN", "OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME"):
            self.env.pop(name, None)

    def _run(self, script: str, *args: str, timeout: float = START_TIMEOUT) -> None:
        with self.log.open("a") as out:
            out.write(f"$ {script} {' '.join(args)}\n")
            out.flush()
            subprocess.run([str(RECIPES / script), *args], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout, check=True)

    def start(self) -> None:
        self.cache.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        # no compute API answers there: these tests call Neutron only (its events to compute are not awaited)
        self._run("keystone-up.sh", f"http://127.0.0.1:{_free_port()}/v2.1")
        self._run("neutron-up.sh", "start")
        self._run("neutron-up.sh", "networks")
        self.seconds = time.monotonic() - started

    def stop(self) -> None:
        for script, arg in (("neutron-up.sh", "stop"), ("keystone-up.sh", "stop")):
            try:
                self._run(script, arg, timeout=120)
            except (subprocess.SubprocessError, OSError):
                pass
        shutil.rmtree(self.services, ignore_errors=True)

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text().splitlines()[-lines:])
        except OSError:
            return ""


def missing_prerequisite() -> str | None:
    """Why the recipes cannot start here (None when they can be tried)."""
    if shutil.which("rabbitmqctl") is None:
        return "RabbitMQ (rabbitmqctl) is not installed"
    if shutil.which("mysql") is None or subprocess.run(["mysql", "-uroot", "-e", "select 1"], capture_output=True,
                                                       check=False).returncode != 0:
        return "MariaDB does not answer as root on its socket"
    return None


def session_neutron():
    """The generator behind the session fixture: yields neutron-up.sh's services dir."""
    given = os.environ.get("OPENKEEL_TEST_NEUTRON_DIR")
    if given:
        yield pathlib.Path(given)
        return
    scripts = [RECIPES / "keystone-up.sh", RECIPES / "neutron-up.sh"]
    if not all(path.exists() for path in scripts):
        pytest.skip(f"no real Neutron: {RECIPES} has no keystone-up.sh and neutron-up.sh (../shared is absent), "
                    "and OPENKEEL_TEST_NEUTRON_DIR names none")
    required = os.environ.get("OPENKEEL_REQUIRE_SHARED") == "1"
    why = missing_prerequisite()
    if why:
        reason = f"the shared Neutron cannot start here: {why}"
        if required:
            pytest.fail(reason + " and OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    neutron = SharedNeutron()
    try:
        neutron.start()
    except (subprocess.SubprocessError, OSError) as exc:
        tail = neutron.tail()
        neutron.stop()
        reason = f"the shared Neutron did not start ({exc}):\n{tail}"
        if required:
            pytest.fail(reason + "\nand OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    try:
        yield neutron.services
    finally:
        neutron.stop()
