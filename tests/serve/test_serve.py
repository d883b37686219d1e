"""`openkeel-compute serve` and scripts/serve answer as Nova does, on a real socket."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

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


def _root(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as resp:
        return json.loads(resp.read())


def _expected_root(port):
    return json.loads(json.dumps(NOVA_ROOT_DOCUMENT).replace("{port}", str(port)))


def _conf(tmp_path, extra=""):
    path = tmp_path / "serve.conf"
    path.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\n[api]\nauth_strategy = noauth2\n{extra}")
    return str(path)


@pytest.mark.parametrize("server", ["granian", "gunicorn"])
def test_serve_answers_the_version_document_and_flavors(tmp_path, server):
    conf = _conf(tmp_path)
    cli = [sys.executable, "-m", "openkeel_compute.cmd.main"]
    subprocess.run(cli + ["db", "sync", "--config-file", conf], check=True, capture_output=True)
    port = free_port()
    with running(cli + ["serve", "--config-file", conf, "--port", str(port), "--server", server], port):
        assert _root(port) == _expected_root(port)
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v2.1/flavors",
            data=json.dumps({"flavor": {"name": "s", "ram": 1, "vcpus": 1, "disk": 1, "id": "s"}}).encode(),
            headers={"X-Auth-Token": "admin:admin", "Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req) as resp:
            assert resp.status == 200
            assert resp.headers.get_all("Vary") == ["OpenStack-API-Version", "X-OpenStack-Nova-API-Version"]
        listed = urllib.request.Request(f"http://127.0.0.1:{port}/v2.1/flavors",
                                        headers={"X-Auth-Token": "demo:demo"})
        with urllib.request.urlopen(listed) as resp:
            assert [f["id"] for f in json.loads(resp.read())["flavors"]] == ["s"]


def test_scripts_serve_syncs_the_database_and_passes_arguments_through(tmp_path):
    if not (ROOT / ".venv/bin/openkeel-compute").exists():
        pytest.skip("scripts/serve uses the project's .venv, which this run does not have")
    port = free_port()
    conf = tmp_path / "mine.conf"
    conf.write_text(f"[DEFAULT]\nstate_path = {tmp_path}/state\n")
    # its image service on a free port, not Glance's 9292
    with running([str(ROOT / "scripts/serve"), "--port", str(port), "--image-port", "0", "--config-file", str(conf)],
                 port):
        assert _root(port) == _expected_root(port)
        flavors = urllib.request.Request(f"http://127.0.0.1:{port}/v2.1/flavors",
                                         headers={"X-Auth-Token": "admin:admin"})
        with urllib.request.urlopen(flavors) as resp:
            assert json.loads(resp.read()) == {"flavors": []}  # a database elsewhere: no devstack flavors
    assert (tmp_path / "state/openkeel.sqlite").exists(), "the --config-file given to scripts/serve was used"


def test_a_server_started_for_a_test_keeps_answering_past_a_pipe_buffer_of_log(tmp_path):
    """Each request writes an access-log line: 1,000 of them are more than a pipe holds (64 KiB), so a
    server whose output went to a pipe nobody reads would stop answering part-way."""
    conf = _conf(tmp_path)
    cli = [sys.executable, "-m", "openkeel_compute.cmd.main"]
    subprocess.run(cli + ["db", "sync", "--config-file", conf], check=True, capture_output=True)
    port = free_port()
    with running(cli + ["serve", "--config-file", conf, "--port", str(port)], port) as proc:
        for _ in range(1000):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2.1/", timeout=30) as resp:
                assert resp.status == 200
    assert proc.stdout.read().count('"GET /v2.1/"') == 1000
