"""The processes that serve the API with granian, and the small supervisor of several workers.

Memory is counted per process, for every process of every replica, so:

- ``workers = 1``: ONE process. The process that checked the configuration builds the
  application and serves it itself (granian's worker runs as a thread of it); nothing is
  imported twice and no master holds a copy of the application.
- ``workers > 1``: ``openkeel-compute serve`` checks what it must, then replaces itself
  (``exec``) with ``python -m openkeel_compute.serving``: a supervisor that imports only the
  standard library, forks the workers, forwards SIGTERM/SIGINT/SIGHUP to them and restarts a
  worker that dies after it was up. Each worker builds the application after the fork and
  serves on the same address (granian binds with SO_REUSEPORT, the kernel spreads the
  connections over the workers). Where the installation holds optimized bytecode, the
  supervisor runs with Python's ``-OO`` and so do the workers it forks (``supervisor_argv``).

This module imports only the standard library at import time: the supervisor runs it as a
program.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import NoReturn

# A worker that dies within this many seconds of its start is taken as failing to start (a
# configuration or code error every new worker would repeat): the supervisor then stops.
_STARTING_S = 10.0

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
    Called before the serving threads exist (the settings are per process and do not survive
    ``exec``); returns what it set.
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


def in_process_server(host: str, port: int, threads: int):
    """granian's server for one process: its worker runs as a thread of this process.

    granian's thread-worker server is made for free-threaded Python and refuses a build with the
    GIL; with a single worker the GIL is no obstacle (the main thread only waits for signals).
    Its signal handlers set the main loop's event; here a second signal arriving while the first
    one sets it no longer waits forever for the event's lock (openkeel_compute.signals).
    """
    from granian.constants import Interfaces
    from granian.server import MTServer

    from openkeel_compute.signals import guarded

    class OneProcess(MTServer):
        def _check_gil(self) -> None:
            return None

        def signal_handler_interrupt(self, *args, **kwargs):
            self.interrupt_signal = True
            self._wake()

        def signal_handler_reload(self, *args, **kwargs):
            self.reload_signal = True
            self._wake()

    server = OneProcess("openkeel_compute.wsgi:application", address=host, port=port, interface=Interfaces.WSGI,
                        workers=1, blocking_threads=threads, log_access=False)
    server._wake = guarded(lambda: server.main_loop_interrupt.set())  # type: ignore[attr-defined]
    return server


def serve_in_process(host: str, port: int, threads: int, application) -> None:
    """Serve ``application`` from this process until SIGTERM/SIGINT (granian's worker as a thread)."""
    from granian.server.common import AbstractServer

    server = in_process_server(host, port, threads)
    # AbstractServer's serve: MTServer's own only adds a warning about free-threaded builds.
    try:
        AbstractServer.serve(server, target_loader=lambda: application, wrap_loader=False)
    finally:
        # A clean stop: the notifications still queued go out (within [notifications]
        # send_flush_seconds) before the process ends; a forked worker ends with os._exit, which
        # runs no atexit handler.
        from openkeel_compute.notifications import sender

        sender.close_all()


def _worker(host: str, port: int, threads: int) -> None:
    """A forked worker: build the application here, then serve it until told to stop."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    from openkeel_compute.wsgi import granian_application

    serve_in_process(host, port, threads, granian_application)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Supervisor:
    """Forks ``workers`` worker processes and keeps them running; stops them all on a signal."""

    def __init__(self, host: str, port: int, workers: int, threads: int):
        self.host, self.port, self.workers, self.threads = host, port, workers, threads
        self.children: dict[int, float] = {}  # pid -> start time (monotonic)
        self.stopping = False
        self.status = 0

    def _spawn(self) -> None:
        # A stop signal must find every worker in ``children``: held from before the fork until the new pid is
        # recorded (it arriving in between left that worker running and the supervisor waiting for it).
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                for sig in _STOP_SIGNALS:  # the worker's own: a signal held for it now ends it as by default
                    signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
                self._work()
            self.children[pid] = time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _work(self) -> NoReturn:
        """The forked child: run the worker, exit with its status, never return into the supervisor's loop."""
        code = 0
        try:
            _worker(self.host, self.port, self.threads)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - a worker reports and exits, never returns into the loop
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

    def _stop(self, signum, _frame) -> None:
        self.stopping = True
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM if signum == signal.SIGHUP else signum)
            except ProcessLookupError:
                pass

    def run(self) -> int:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, self._stop)
        for _ in range(self.workers):
            self._spawn()
        while self.children:
            try:
                pid, wstatus = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
                continue
            started = self.children.pop(pid, None)
            if started is None or self.stopping:
                continue
            code = os.waitstatus_to_exitcode(wstatus)
            if time.monotonic() - started < _STARTING_S:
                print(f"openkeel-compute serve: a worker exited with {code} while starting; stopping",
                      file=sys.stderr, flush=True)
                self.status = 1
                self._stop(signal.SIGTERM, None)
                continue
            print(f"openkeel-compute serve: worker {pid} exited with {code}; starting another",
                  file=sys.stderr, flush=True)
            self._spawn()
        return self.status


# Modules whose optimized bytecode shows that the installation has it for the standard library, the
# dependencies and OpenKeel (scripts/_bootstrap.sh and the Containerfile compile it).
_OPTIMIZED_PROBES = ("typing", "sqlalchemy.sql.compiler", "openkeel_compute.wsgi")


def optimized_bytecode(modules=_OPTIMIZED_PROBES) -> bool:
    """Whether ``-OO`` bytecode (``*.opt-2.pyc``) is there for each of ``modules``.

    Workers run with ``-OO`` only then: without it, each worker would compile every module it
    imports from source at each start (seconds), as an installation that cannot write bytecode
    (a read-only image, PYTHONDONTWRITEBYTECODE) never keeps what it compiled.
    """
    import importlib.util

    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return False
        if spec is None or not spec.has_location or spec.origin is None or not spec.origin.endswith(".py"):
            return False
        if not os.path.exists(importlib.util.cache_from_source(spec.origin, optimization=2)):
            return False
    return True


def supervisor_argv(host: str, port: int, workers: int, threads: int, optimized: bool) -> list[str]:
    """The supervisor's command line: with ``optimized``, Python's ``-OO``, which its forked workers inherit.

    ``-OO`` leaves docstrings and ``assert`` statements out of the bytecode: about 5 MiB less per
    worker, the docstrings of the ~850 modules a worker imports. Nothing a worker runs reads them.
    """
    return [sys.executable, *(["-OO"] if optimized else []), "-m", "openkeel_compute.serving", host, str(port),
            str(workers), str(threads)]


def exec_supervisor(host: str, port: int, workers: int, threads: int, optimized: bool) -> None:
    """Replace this process by the supervisor (same pid: a service manager keeps tracking it)."""
    argv = supervisor_argv(host, port, workers, threads, optimized)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)


def main(argv: list[str]) -> int:
    host, port, workers, threads = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    bound_malloc_retention(os.environ)
    return Supervisor(host, port, workers, threads).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
