"""A scripts/serve stack (the API, the controller on its built-in cluster, the console proxy, Placement and the
image service) for the console tests: scripts/_stack.py itself, run from a throwaway checkout with this tree's
``src`` first on the path (scripts/serve would reinstall the virtual environment when pyproject.toml changed;
_stack.py is what it runs after that)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

from tests.scripts.checkout import ROOT, clean_env, free_port
from tests.scripts.stack import START_TIMEOUT, Stack


class ConsoleStack(Stack):
    def __init__(self, home: pathlib.Path, *args: str) -> None:
        self.home = home
        self.checkout = home / "openkeel-compute"
        self.checkout.mkdir(parents=True)
        for name in ("scripts", "etc", "src", "pyproject.toml"):
            os.symlink(ROOT / name, self.checkout / name)
        self.port = free_port()
        self.console_port = free_port()
        self.env = {**clean_env(home), "PYTHONPATH": str(ROOT / "src")}
        self.log_path = home / "serve.log"
        self.proc = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--port", str(self.port), "--image-port", "0", "--console-port", str(self.console_port),
                     "--emulator-port", "0", *args]

    def start(self) -> ConsoleStack:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "_stack.py"), *self.args],
                                         cwd=self.checkout, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while "serve: ready" not in self.log():
            assert self.proc.poll() is None, f"scripts/_stack.py exited {self.proc.returncode}:\n{self.log()}"
            assert time.monotonic() < deadline, f"not ready in {START_TIMEOUT} s:\n{self.log()}"
            time.sleep(0.2)
        return self
