"""How many processes serve the API: one with one worker; a small supervisor and its workers otherwise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.processes import tree as process_tree
from tests.processes import tree_of
from tests.serve.helpers import cmdline_of, expected_root_document, root_document, serve_with_workers


def test_one_worker_is_one_process(tmp_path):
    port, server = serve_with_workers(tmp_path, 1)
    with server as proc:
        assert root_document(port) == expected_root_document(port)
        assert process_tree(proc.pid) == [proc.pid]


def test_several_workers_run_under_a_supervisor_without_the_application(tmp_path):
    port, server = serve_with_workers(tmp_path, 2)
    with server as proc:
        assert root_document(port) == expected_root_document(port)
        tree = tree_of(proc.pid, 3)
        assert len(tree) == 3, tree
        # the server's own process became the supervisor: the standard library and nothing else
        assert "-m openkeel_compute.serving" in cmdline_of(proc.pid)
        with open(f"/proc/{proc.pid}/maps") as f:
            maps = f.read()
        assert "_granian" not in maps and "sqlalchemy" not in maps
        for _ in range(20):
            assert root_document(port) == expected_root_document(port)
    assert proc.returncode == 0
    assert all(not os.path.exists(f"/proc/{pid}") or _zombie(pid) for pid in tree)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


_FAKE = """
import os, signal, sys, time
from openkeel_compute import serving
serving._STARTING_S = float(sys.argv[1])
def worker(host, port, threads):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.write(1, f"worker {os.getpid()}\\n".encode())
    time.sleep(120)
serving._worker = worker
sys.exit(serving.Supervisor("127.0.0.1", 0, 2, 1).run())
"""


def _workers(proc, count: int) -> list[int]:
    return [int(proc.stdout.readline().split()[1]) for _ in range(count)]


def test_the_supervisor_replaces_a_worker_that_dies_after_starting_and_stops_on_sigterm():
    proc = subprocess.Popen([sys.executable, "-c", _FAKE, "0"], stdout=subprocess.PIPE, text=True)
    try:
        first = _workers(proc, 2)
        os.kill(first[0], signal.SIGKILL)
        [replacement] = _workers(proc, 1)
        assert replacement not in first
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert all(_zombie(pid) for pid in (first[1], replacement))
    finally:
        proc.kill()
        proc.wait()


_STOP_DURING_FORK = """
import os, signal, sys, time
from openkeel_compute import serving
serving._STARTING_S = 0.0
def worker(host, port, threads):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.write(1, f"worker {os.getpid()}\\n".encode())
    time.sleep(120)
serving._worker = worker
real_fork = os.fork
def fork():
    pid = real_fork()
    if pid:  # the stop signal comes at the worst moment: the worker forked, its pid not yet recorded
        os.kill(os.getpid(), signal.SIGTERM)
    return pid
os.fork = fork
sys.exit(serving.Supervisor("127.0.0.1", 0, 1, 1).run())
"""


def test_a_stop_signal_during_a_fork_stops_the_new_worker_too():
    """A signal the supervisor gets between a fork and recording the new worker's pid stopped every worker but
    that one, and the supervisor waited for it (a shutdown that hung during a respawn)."""
    proc = subprocess.Popen([sys.executable, "-c", _STOP_DURING_FORK], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_the_supervisor_stops_when_a_worker_dies_while_starting():
    proc = subprocess.Popen([sys.executable, "-c", _FAKE, "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = _workers(proc, 2)
        os.kill(first[0], signal.SIGKILL)
        assert proc.wait(timeout=30) == 1
        assert "a worker exited with -9 while starting; stopping" in proc.stderr.read()
        assert _zombie(first[1])
    finally:
        proc.kill()
        proc.wait()


def test_several_workers_stop_when_every_process_gets_the_signal_twice(tmp_path):
    """systemd signals every process of a unit, Ctrl-C every process of the terminal's group, and the
    supervisor forwards the signal too: each worker gets it twice in a row, and still stops."""
    port, server = serve_with_workers(tmp_path, 2)
    with server as proc:
        tree = tree_of(proc.pid, 3)
        assert root_document(port) == expected_root_document(port)
        for _ in range(3):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 20 s after SIGTERM to every process") from None
    assert code == 0
    assert all(not os.path.exists(f"/proc/{pid}") or _zombie(pid) for pid in tree)
