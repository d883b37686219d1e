"""`openkeel-compute serve`: run the API with granian (or gunicorn gthread).

Before it listens, serve checks what would make every request fail (cmd/status.py's preflight:
policy, authentication, database at head) and that the port is free, and refuses to start with
one line otherwise. Then, with one worker, this process serves the application itself; with
more, it becomes the supervisor of openkeel_compute/serving.py, which forks the workers.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import sys
import sysconfig

from openkeel_compute.cmd.common import OperatorError, add_config_args, load_conf, port_number, positive_int
from openkeel_compute.serving import (
    bound_malloc_retention,
    exec_supervisor,
    optimized_bytecode,
    serve_in_process,
)

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

    check_noauth2_bind(conf, host)
    preflight(conf)
    check_port_free(host, port)
    # Workers rebuild the app from the same configuration files, and know the address checked here.
    os.environ["OPENKEEL_CONFIG_FILES"] = os.pathsep.join(os.path.abspath(p) for p in args.config_file)
    os.environ[LISTEN_HOST_ENV] = host
    LOG.info("OpenKeel compute API on http://%s:%s/ (%s, %d worker(s) x %d thread(s), auth %s)", host, port,
             server, workers, threads, conf.api.auth_strategy)
    bound_malloc_retention(os.environ)
    if server == "gunicorn":
        return _gunicorn(host, port, workers, threads)
    return _granian(host, port, workers, threads)


# Where `serve` listens, for its workers' own noauth2 check (openkeel_compute.wsgi).
LISTEN_HOST_ENV = "OPENKEEL_LISTEN_HOST"


def check_noauth2_bind(conf, host: str) -> None:
    """OperatorError when noauth2 would listen on anything but loopback addresses; says so when it does not.

    However noauth2 was chosen (a configuration file, scripts/serve's defaults, OS_API__AUTH_STRATEGY
    in the environment), the address decides: any token is trusted, so nobody off this host may connect.
    """
    if conf.api.auth_strategy != "noauth2":
        return
    try:
        socket.getaddrinfo(host, None)
    except OSError:
        return  # an address that does not resolve: check_port_free's refusal says so
    from openkeel_compute.api.auth import noauth2_bind_error

    error = noauth2_bind_error(host)
    if error is not None:
        raise OperatorError(error)
    LOG.warning("[api] auth_strategy = noauth2 (development only): listening on the loopback address %s only; "
                "any 'X-Auth-Token: user:project' is trusted", host)


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


def _granian(host: str, port: int, workers: int, threads: int) -> int:
    if workers > 1:
        optimized = optimized_bytecode()
        if optimized:
            LOG.info("the workers run with Python's -OO (no docstrings: less memory per worker)")
        else:
            LOG.info("the workers keep their docstrings: this installation has no -OO bytecode (to compile it "
                     "once: %s -OO -m compileall -q %s)", sys.executable, sysconfig.get_path("purelib"))
        exec_supervisor(host, port, workers, threads, optimized)  # does not return
    from openkeel_compute.wsgi import granian_application  # built here, with the collector paused

    serve_in_process(host, port, threads, granian_application)
    return 0


def _gunicorn(host: str, port: int, workers: int, threads: int) -> int:
    from gunicorn.app.wsgiapp import run

    sys.argv = [
        "gunicorn", "-k", "gthread", "--threads", str(threads), "-w", str(workers), "-b", f"{host}:{port}",
        "--no-control-socket", "openkeel_compute.wsgi:application",
    ]
    run()
    return 0
