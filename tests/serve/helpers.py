"""Shared helpers of the serve tests: a free port, a server process run until its root document answers,
its configuration file, the root document Nova answers, an unreachable cluster's kubeconfig."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

from tests.conftest import ROOT
from tests.processes import stop_group

NOVA_ROOT_DOCUMENT = {"versions": [
    {"id": "v2.0", "status": "DEPRECATED", "version": "", "min_version": "", "updated": "2025-07-04T12:00:00Z",
     "links": [{"rel": "self", "href": "http://127.0.0.1:{port}/v2/"}]},
    {"id": "v2.1", "status": "CURRENT", "version": "2.104", "min_version": "2.1", "updated": "2013-07-23T11:33:21Z",
     "links": [{"rel": "self", "href": "http://127.0.0.1:{port}/v2.1/"}]},
]}


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(port: int, proc: subprocess.Popen, timeout: float = 60) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}: {proc.stdout.read()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as resp:
                if resp.status == 200:
                    return time.monotonic() - started
        except OSError:
            time.sleep(0.1)
    raise AssertionError("server did not answer in time")


@contextlib.contextmanager
def running(cmd, port, env=None, cwd=ROOT):
    """The server runs with its output in a file, never a pipe: a pipe nobody drains fills up after a few
    hundred access-log lines and stops the server in the middle of a request. ``proc.stdout`` reads the file."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        proc.stdout = open(f"/proc/self/fd/{log.fileno()}")  # noqa: SIM115 - closed with the process below
        try:
            wait_until_up(port, proc)
            yield proc
        finally:
            stop_group(proc)


def root_document(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as resp:
        return json.loads(resp.read())


def expected_root_document(port):
    return json.loads(json.dumps(NOVA_ROOT_DOCUMENT).replace("{port}", str(port)))


def serve_conf(tmp_path, extra=""):
    path = tmp_path / "serve.conf"
    path.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\n[api]\nauth_strategy = noauth2\n{extra}")
    return str(path)


def unreachable_kubeconfig(tmp_path) -> str:
    path = tmp_path / "down.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }))
    return str(path)


CLI = [sys.executable, "-m", "openkeel_compute.cmd.main"]


def cmdline_of(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def serve_with_workers(tmp_path, workers: int):
    conf = serve_conf(tmp_path)
    subprocess.run(CLI + ["db", "sync", "--config-file", conf], check=True, capture_output=True)
    port = free_port()
    return port, running(CLI + ["serve", "--config-file", conf, "--port", str(port), "--workers", str(workers)], port)
