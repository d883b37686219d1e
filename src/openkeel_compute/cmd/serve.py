"""`openkeel-compute serve`: run the API with granian (or gunicorn gthread)."""

from __future__ import annotations

import logging
import os
import sys

from openkeel_compute.cmd.common import add_config_args, load_conf
from openkeel_compute.startup import collector_paused

LOG = logging.getLogger(__name__)


def register(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run the compute API")
    add_config_args(parser)
    parser.add_argument("--host", help="listen address (default: [wsgi] host)")
    parser.add_argument("--port", type=int, help="listen port (default: [wsgi] port)")
    parser.add_argument("--workers", type=int, help="worker processes (default: [wsgi] workers)")
    parser.add_argument("--server", choices=["granian", "gunicorn"], help="default: [wsgi] server")
    parser.set_defaults(func=_serve)


def _serve(args) -> int:
    conf = load_conf(args)
    host = args.host or conf.wsgi.host
    port = args.port or conf.wsgi.port
    workers = args.workers or conf.wsgi.workers
    server = args.server or conf.wsgi.server
    threads = conf.wsgi.threads
    # Workers rebuild the app from the same configuration files.
    os.environ["OPENKEEL_CONFIG_FILES"] = os.pathsep.join(os.path.abspath(p) for p in args.config_file)
    LOG.info("OpenKeel compute API on http://%s:%s/ (%s, %d worker(s) x %d thread(s), auth %s)", host, port,
             server, workers, threads, conf.api.auth_strategy)
    if server == "gunicorn":
        return _gunicorn(host, port, workers, threads)
    return _granian(host, port, workers, threads)


def _granian(host: str, port: int, workers: int, threads: int) -> int:
    with collector_paused():
        from granian import Granian
        from granian.constants import Interfaces

    Granian(
        "openkeel_compute.wsgi:application",
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=workers,
        blocking_threads=threads,
        log_access=False,
    ).serve()
    return 0


def _gunicorn(host: str, port: int, workers: int, threads: int) -> int:
    from gunicorn.app.wsgiapp import run

    sys.argv = [
        "gunicorn", "-k", "gthread", "--threads", str(threads), "-w", str(workers), "-b", f"{host}:{port}",
        "--no-control-socket", "openkeel_compute.wsgi:application",
    ]
    run()
    return 0
