"""Real OpenStack services for the tests, started from ../shared's recipes (reference/tempest/keystone-up.sh
and a service's ``<service>-up.sh``): what tests/network/shared_neutron.py and tests/volume/shared_cinder.py
have in common.

A throw-away Keystone (free port) and the service are started in a temporary directory with the recipes'
environment, their bring-up written to ``bring-up.log`` there, and stopped when the session ends. Their
virtualenvs are kept below ``$OPENKEEL_CACHE`` (default ~/.cache/openkeel). ``session`` decides between
using one already running (its services dir named by an environment variable), starting one, skipping and
failing: absent recipes skip even under OPENKEEL_REQUIRE_SHARED=1; recipes that cannot start skip with the
reason (and the log's tail), and fail under OPENKEEL_REQUIRE_SHARED=1.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator

import pytest

from tests._shared import SHARED

RECIPES = SHARED / "reference" / "tempest"
START_TIMEOUT = 1200  # the first session installs Keystone's and the service's virtualenvs


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("OPENKEEL_CACHE", pathlib.Path.home() / ".cache" / "openkeel"))


@contextlib.contextmanager
def locked(path: pathlib.Path) -> Iterator[None]:
    """Held by one process at a time (an exclusive lock on ``path``): the recipes build a virtualenv that
    is missing, and two test processes building the same one at once (two workers, or two runs on one
    machine) break each other's pip."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def missing_services() -> str | None:
    """Why the recipes cannot start here: the MariaDB and RabbitMQ every service uses (None when there)."""
    if shutil.which("rabbitmqctl") is None:
        return "RabbitMQ (rabbitmqctl) is not installed"
    if shutil.which("mysql") is None or subprocess.run(["mysql", "-uroot", "-e", "select 1"], capture_output=True,
                                                       check=False).returncode != 0:
        return "MariaDB does not answer as root on its socket"
    return None


class RecipeStack:
    """A Keystone and one service started from the recipes in ``recipes``; ``services`` is the recipes'
    services dir. ``script``: the service's recipe; ``steps``: its arguments run in turn to start it;
    ``env``: the service's own variables."""

    script = ""
    steps: tuple[tuple[str, ...], ...] = (("start",),)

    def __init__(self, recipes: pathlib.Path, prefix: str, env: dict[str, str]) -> None:
        self.recipes = recipes
        self.cache = cache_dir()
        self.services = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
        self.harness = self.services / "harness"
        self.log = self.services / "bring-up.log"
        self.seconds = 0.0
        harness_venv = str(self.cache / "shared-neutron" / "harness-venv")  # one Keystone venv for every service
        self.env = {
            **os.environ, "OKC_SERVICES_DIR": str(self.services), "HARNESS_DIR": str(self.harness),
            "VENV": harness_venv, "HVENV": harness_venv, "KS_PORT": str(free_port()), "PYTHONWARNINGS": "ignore",
            **env}
        for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_TOKEN", "OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME"):
            self.env.pop(name, None)

    def _run(self, script: str, *args: str, timeout: float = START_TIMEOUT) -> None:
        with self.log.open("a") as out:
            out.write(f"$ {script} {' '.join(args)}\n")
            out.flush()
            subprocess.run([str(self.recipes / script), *args], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout, check=True)

    def start(self, compute_url: str) -> None:
        """``compute_url``: the compute API Keystone's catalog names (none answers there in these tests)."""
        started = time.monotonic()
        with locked(self.cache / "shared-neutron" / ".harness.lock"):  # Keystone's venv, every service's
            self._run("keystone-up.sh", compute_url)
        with locked(self.cache / f".{self.script}.lock"):  # the service's own venv
            for args in self.steps:
                self._run(self.script, *args)
        self.seconds = time.monotonic() - started

    def stop(self) -> None:
        for script, arg in ((self.script, "stop"), ("keystone-up.sh", "stop")):
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


def session(name: str, script: str, given_env: str, recipes: pathlib.Path, missing: Callable[[], str | None],
            make: Callable[[], RecipeStack]) -> Iterator[pathlib.Path]:
    """The generator behind a session fixture: yields the services dir of ``name``'s stack (one named by
    ``given_env``, else one ``make`` starts with the recipe ``script``)."""
    given = os.environ.get(given_env)
    if given:
        yield pathlib.Path(given)
        return
    scripts = [recipes / "keystone-up.sh", recipes / script]
    if not all(path.exists() for path in scripts):
        pytest.skip(f"no real {name}: {recipes} has no keystone-up.sh and {script} (../shared is absent), "
                    f"and {given_env} names none")
    required = os.environ.get("OPENKEEL_REQUIRE_SHARED") == "1"
    why = missing()
    if why:
        reason = f"the shared {name} cannot start here: {why}"
        if required:
            pytest.fail(reason + " and OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    stack = make()
    try:
        stack.start(f"http://127.0.0.1:{free_port()}/v2.1")
    except (subprocess.SubprocessError, OSError) as exc:
        tail = stack.tail()
        stack.stop()
        reason = f"the shared {name} did not start ({exc}):\n{tail}"
        if required:
            pytest.fail(reason + "\nand OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    try:
        yield stack.services
    finally:
        stack.stop()
