"""A real Cinder 29 for the tests, from ../shared's recipes (reference/tempest/keystone-up.sh and
cinder-up.sh), started once per test session.

``OPENKEEL_TEST_CINDER_DIR`` names one already running (cinder-up.sh's services dir, with
harness/keystone.env): it is used as it is. Otherwise, when the recipes are there, a throw-away Keystone
(free port) and Cinder (free port, its own MariaDB database and RabbitMQ vhost ``okc_test_cinder_<pid>``,
the ``okc-nfs`` backend only: volumes are sparse files in a bind-mounted folder and their
``connection_info`` is Cinder's real NFS one) are started in a temporary directory, and stopped (database,
vhost and mount gone) when the session ends. Their virtualenvs are kept in ``$OPENKEEL_CACHE`` (default
~/.cache/openkeel): the Keystone harness venv is the one the shared Neutron uses, Cinder's is
``shared-cinder/cinder-venv``; the first session builds them (a few minutes).

When the recipes are absent the tests skip with the reason. When they are there but cannot start (no
MariaDB, RabbitMQ or qemu-img, not root, a failed install…) the tests skip with the reason and the log's
tail, and fail under OPENKEEL_REQUIRE_SHARED=1.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from tests._shared import SHARED
from tests.network.shared_neutron import _free_port
from tests.network.shared_neutron import missing_prerequisite as _missing_services

RECIPES = SHARED / "reference" / "tempest"
START_TIMEOUT = 1200  # the first session installs Keystone's and Cinder's virtualenvs


class SharedCinder:
    """A Keystone and a Cinder started from the recipes; ``services`` is cinder-up.sh's services dir."""

    def __init__(self) -> None:
        cache = pathlib.Path(os.environ.get("OPENKEEL_CACHE", pathlib.Path.home() / ".cache" / "openkeel"))
        self.cache = cache
        self.services = pathlib.Path(tempfile.mkdtemp(prefix="openkeel-cinder-"))
        self.harness = self.services / "harness"
        self.log = self.services / "bring-up.log"
        self.seconds = 0.0
        harness_venv = str(cache / "shared-neutron" / "harness-venv")
        self.env = {
            **os.environ, "OKC_SERVICES_DIR": str(self.services), "HARNESS_DIR": str(self.harness),
            "VENV": harness_venv, "HVENV": harness_venv, "CINDER_VENV": str(cache / "shared-cinder" / "cinder-venv"),
            "KS_PORT": str(_free_port()), "CINDER_PORT": str(_free_port()),
            "CINDER_DB_NAME": f"okc_test_cinder_{os.getpid()}", "CINDER_BACKENDS": "okc-nfs",
            "CINDER_NFS_DIR": str(self.services / "nfs-export"), "PYTHONWARNINGS": "ignore"}
        for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_TOKEN", "OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME"):
            self.env.pop(name, None)

    def _run(self, script: str, *args: str, timeout: float = START_TIMEOUT) -> None:
        with self.log.open("a") as out:
            out.write(f"$ {script} {' '.join(args)}\n")
            out.flush()
            subprocess.run([str(RECIPES / script), *args], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout, check=True)

    def start(self) -> None:
        (self.cache / "shared-neutron").mkdir(parents=True, exist_ok=True)
        (self.cache / "shared-cinder").mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        # no compute API listens there: the controller deletes attachments with a service token, so Cinder
        # does not ask the compute API about them
        self._run("keystone-up.sh", f"http://127.0.0.1:{_free_port()}/v2.1")
        self._run("cinder-up.sh", "start")
        self.seconds = time.monotonic() - started

    def stop(self) -> None:
        for script, arg in (("cinder-up.sh", "stop"), ("keystone-up.sh", "stop")):
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
    why = _missing_services()
    if why:
        return why
    if shutil.which("qemu-img") is None:
        return "qemu-img (Debian's qemu-utils) is not installed: Cinder's NFS driver reads each volume with it"
    if os.geteuid() != 0:
        return "not root: the NFS backend bind-mounts its folder"
    return None


def session_cinder():
    """The generator behind the session fixture: yields cinder-up.sh's services dir."""
    given = os.environ.get("OPENKEEL_TEST_CINDER_DIR")
    if given:
        yield pathlib.Path(given)
        return
    scripts = [RECIPES / "keystone-up.sh", RECIPES / "cinder-up.sh"]
    if not all(path.exists() for path in scripts):
        pytest.skip(f"no real Cinder: {RECIPES} has no keystone-up.sh and cinder-up.sh (../shared is absent), "
                    "and OPENKEEL_TEST_CINDER_DIR names none")
    required = os.environ.get("OPENKEEL_REQUIRE_SHARED") == "1"
    why = missing_prerequisite()
    if why:
        reason = f"the shared Cinder cannot start here: {why}"
        if required:
            pytest.fail(reason + " and OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    cinder = SharedCinder()
    try:
        cinder.start()
    except (subprocess.SubprocessError, OSError) as exc:
        tail = cinder.tail()
        cinder.stop()
        reason = f"the shared Cinder did not start ({exc}):\n{tail}"
        if required:
            pytest.fail(reason + "\nand OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    try:
        yield cinder.services
    finally:
        cinder.stop()
