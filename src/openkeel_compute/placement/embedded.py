"""Placement's own WSGI application (openstack-placement) on a loopback port, for development and tests.

``python -m openkeel_compute.placement.embedded --state-path DIR [--host H] [--port P]`` keeps Placement's
database in ``DIR/placement.sqlite`` (created and upgraded by Placement's own migrations at start), lets
anyone in with Placement's ``noauth2`` strategy (the token ``admin:admin`` is an admin; never expose it
beyond loopback), prints ``PLACEMENT READY http://H:P`` on stdout once it serves, and serves until SIGTERM or SIGINT.

Placement configures its database engine once per process, hence a process of its own. Requests are
served one at a time: SQLite has one writer anyway, and Placement's answers take milliseconds.

``start(state_path)`` runs it as a child process and returns once it serves; ``config_lines(url)`` is the
``[placement]`` section that points OpenKeel at it (keystoneauth's ``admin_token`` plugin).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from wsgiref import simple_server

from openkeel_compute import signals

READY = "PLACEMENT READY "
TOKEN = "admin:admin"
_POLL_S = 0.2  # how long a stop may wait for the next look at the signal flag


def _app(state_path: pathlib.Path):
    from oslo_config import cfg
    from placement import conf as placement_conf
    from placement import db_api, deploy

    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.set_default("connection", f"sqlite:///{state_path / 'placement.sqlite'}", group="placement_database")
    conf([], project="placement", default_config_files=[])
    conf.set_override("sync_on_startup", True, group="placement_database")
    conf.set_override("auth_strategy", "noauth2", group="api")
    db_api.configure(conf)
    return deploy.loadapp(conf)


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):
        logging.getLogger("placement.access").debug(format, *args)


def serve(state_path: str, host: str = "127.0.0.1", port: int = 0) -> None:
    path = pathlib.Path(state_path)
    path.mkdir(parents=True, exist_ok=True)
    app = _app(path)
    server = simple_server.make_server(host, port, app, handler_class=_QuietHandler)
    # A signal only asks the loop below to end. An exception raised from the handler would not do: when
    # it lands while a request is being answered, wsgiref's handler takes it for the application's error,
    # answers 500 and serves on.
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signals.setter(stopping))
    server.timeout = _POLL_S
    print(f"{READY}http://{host}:{server.server_port}", flush=True)
    # Whatever might still be printed goes to stderr: the starter reads stdout only up to the line above,
    # and a pipe nobody reads stops its writer once full.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        while not stopping.is_set():
            server.handle_request()
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="openkeel_compute.placement.embedded",
                                     description="Placement for development: SQLite, noauth2, loopback.")
    parser.add_argument("--state-path", required=True, help="directory of its SQLite database")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, stream=sys.stderr)
    serve(args.state_path, args.host, args.port)
    return 0


def config_lines(url: str) -> str:
    """The ``[placement]`` section that points OpenKeel at an embedded Placement."""
    return (f"[placement]\nauth_type = admin_token\nendpoint = {url}\ntoken = {TOKEN}\n"
            f"endpoint_override = {url}\n")


@dataclasses.dataclass
class Running:
    process: subprocess.Popen
    url: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start(state_path: str | os.PathLike, host: str = "127.0.0.1", port: int = 0, timeout: float = 60.0,
          **popen) -> Running:
    """Run the embedded Placement as a child process; returns once it serves (RuntimeError if it cannot)."""
    command = [sys.executable, "-m", "openkeel_compute.placement.embedded", "--state-path", str(state_path),
               "--host", host, "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, **popen)
    deadline = time.monotonic() + timeout
    line = ""
    assert process.stdout is not None  # stdout=PIPE
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(READY):
            process.stdout.close()
            process.stdout = None
            return Running(process, line[len(READY):].strip())
        if not line and process.poll() is not None:
            break
    with contextlib.suppress(Exception):
        Running(process, "").stop()
    raise RuntimeError(f"the embedded Placement did not start (exit status {process.poll()}): {line.strip()}")


if __name__ == "__main__":
    sys.exit(main())
