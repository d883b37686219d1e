"""Run ``openkeel-compute`` as an operator does (a process of its own) and read its one error line."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(sys.executable).parent / "openkeel-compute"


def command() -> list[str]:
    """The console script next to this interpreter, else the module (same entry point, run())."""
    if SCRIPT.exists():
        return [str(SCRIPT)]
    return [sys.executable, "-c", "import sys; from openkeel_compute.cmd.main import run; sys.exit(run())"]


def run(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([*command(), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def error_line(done: subprocess.CompletedProcess, status: int = 1) -> str:
    """The one ``error:`` line, asserted to be stderr's last line, with no traceback and ``status``."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], done.stderr
    assert done.returncode == status, (done.returncode, done.stderr)
    return errors[0]


def write_conf(tmp_path, text: str, name: str = "openkeel.conf") -> str:
    path = tmp_path / name
    path.write_text(f"[DEFAULT]\nstate_path = {tmp_path}/state\n" + text)
    return str(path)
