"""`openkeel-compute serve` and scripts/serve answer as Nova does, on a real socket."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from tests.conftest import ROOT
from tests.serve.helpers import expected_root_document, free_port, root_document, running, serve_conf


@pytest.mark.parametrize("server", ["granian", "gunicorn"])
def test_serve_answers_the_version_document_and_flavors(tmp_path, server):
    conf = serve_conf(tmp_path)
    cli = [sys.executable, "-m", "openkeel_compute.cmd.main"]
    subprocess.run(cli + ["db", "sync", "--config-file", conf], check=True, capture_output=True)
    port = free_port()
    with running(cli + ["serve", "--config-file", conf, "--port", str(port), "--server", server], port):
        assert root_document(port) == expected_root_document(port)
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
    with running([str(ROOT / "scripts/serve"), "--port", str(port), "--image-port", "0", "--console-port", "0",
                  "--config-file", str(conf)],
                 port):
        assert root_document(port) == expected_root_document(port)
        flavors = urllib.request.Request(f"http://127.0.0.1:{port}/v2.1/flavors",
                                         headers={"X-Auth-Token": "admin:admin"})
        with urllib.request.urlopen(flavors) as resp:
            assert json.loads(resp.read()) == {"flavors": []}  # a database elsewhere: no devstack flavors
    assert (tmp_path / "state/openkeel.sqlite").exists(), "the --config-file given to scripts/serve was used"


def test_a_server_started_for_a_test_keeps_answering_past_a_pipe_buffer_of_log(tmp_path):
    """Each request writes an access-log line: 1,000 of them are more than a pipe holds (64 KiB), so a
    server whose output went to a pipe nobody reads would stop answering part-way."""
    conf = serve_conf(tmp_path)
    cli = [sys.executable, "-m", "openkeel_compute.cmd.main"]
    subprocess.run(cli + ["db", "sync", "--config-file", conf], check=True, capture_output=True)
    port = free_port()
    with running(cli + ["serve", "--config-file", conf, "--port", str(port)], port) as proc:
        for _ in range(1000):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2.1/", timeout=30) as resp:
                assert resp.status == 200
    assert proc.stdout.read().count('"GET /v2.1/"') == 1000
