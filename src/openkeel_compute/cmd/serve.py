"""`openkeel-compute serve`: run the API with granian (or gunicorn gthread).

Before it listens, the master checks what would make every request fail (cmd/status.py's
preflight: policy, authentication, database at head) and that the port is free, and refuses to
start with one line otherwise.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import sys

from openkeel_compute.cmd.common import OperatorError, add_config_args, load_conf, port_number, positive_int
from openkeel_compute.startup import collector_paused

LOG = logging.getLogger(__name__)


def register(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run the compute API")
    add_config_args(parser)
    parser.add_argument("--host", help="listen address (default: [wsgi] host)")
    parser.add_argument("--port", type=port_number, help="listen port (default: [wsgi] port)")
    parser.add_argument("--workers", type=positive_int, help="worker processes (default: [wsgi] workers)")
    parser.add_argument("--server", choices=["granian", "gunicorn"], help="default: [wsgi] server")
    parser.set_defaults(func=_serve)


def _serve(args) -> int:
    conf = load_conf(args)
    host = args.host or conf.wsgi.host
    port = args.port or conf.wsgi.port
    workers = args.workers or conf.wsgi.workers
    server = args.server or conf.wsgi.server
    threads = conf.wsgi.threads
    from openkeel_compute.cmd.status import preflight

    preflight(conf)
    check_port_free(host, port)
    # Workers rebuild the app from the same configuration files.
    os.environ["OPENKEEL_CONFIG_FILES"] = os.pathsep.join(os.path.abspath(p) for p in args.config_file)
    LOG.info("OpenKeel compute API on http://%s:%s/ (%s, %d worker(s) x %d thread(s), auth %s)", host, port,
             server, workers, threads, conf.api.auth_strategy)
    bound_malloc_retention(os.environ)
    if server == "gunicorn":
        return _gunicorn(host, port, workers, threads)
    return _granian(host, port, workers, threads)


def check_port_free(host: str, port: int) -> None:
    """OperatorError unless ``host``:``port`` can be listened on by this process alone.

    granian listens with SO_REUSEPORT, so a second server on a busy port would share it with the
    first (the kernel spreads connections over both). A plain bind, without SO_REUSEPORT, fails
    on a port someone listens on; the socket is closed again before the server binds.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OperatorError(f"cannot listen on {host}: {exc.strerror} (check --host or [wsgi] host)") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no obstacle
        try:
            sock.bind(address)
            sock.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise OperatorError(f"port {port} on {host} is already in use (stop the other server, or "
                                    "choose another port with --port or [wsgi] port)") from None
            raise OperatorError(f"cannot listen on {host} port {port}: {exc.strerror}") from None


# glibc's mallopt() parameters, and the environment settings (variable, tunable) that take precedence.
_MALLOPT = {
    "M_ARENA_MAX": (-8, 1, "MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),
    "M_MMAP_THRESHOLD": (-3, 128 * 1024, "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold"),
}


def bound_malloc_retention(environ) -> dict[str, int]:
    """On glibc: one malloc arena and a fixed mmap threshold, unless the environment sets either.

    Every thread of a worker (granian's runtime, its blocking threads, libpq's calls) would get a
    glibc arena of its own, and glibc raises its mmap threshold to the largest block freed so far;
    both keep the freed buffers of large answers (a 1,000-flavor list is half a megabyte) resident.
    Here: ~2 MiB less RSS for a PostgreSQL worker after bench/compare's operations, with no
    measurable change in req/s. Called in the master before workers and threads exist; returns
    what it set.
    """
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return {}  # not glibc
    tunables = environ.get("GLIBC_TUNABLES", "")
    applied = {}
    for name, (param, value, variable, tunable) in _MALLOPT.items():
        if variable in environ or tunable in tunables:
            continue
        if mallopt(param, value) == 1:
            applied[name] = value
    return applied


def _granian(host: str, port: int, workers: int, threads: int) -> int:
    with collector_paused():
        from granian import Granian
        from granian.constants import Interfaces

    Granian(
        "openkeel_compute.wsgi:granian_application",
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
