"""scripts/serve as one command: the API, the controller on its built-in cluster and the local image
service; a server boots to ACTIVE within seconds, and Ctrl-C or SIGTERM leaves no process behind."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time

import pytest
import yaml

from openkeel_compute.images import local
from tests.scripts.stack import Stack, alive, descendants

BOOT_SECONDS = 10  # the serve defaults make the built-in cluster's build take about two seconds


def _boot(stack: Stack, name: str = "quick") -> tuple[str, float]:
    status, _ = stack.call("POST", "/v2.1/flavors", {"flavor": {"name": "m1.quick", "ram": 512, "vcpus": 1,
                                                                 "disk": 1, "id": "quick"}})
    assert status == 200
    started = time.monotonic()
    status, body = stack.call("POST", "/v2.1/servers", {"server": {
        "name": name, "flavorRef": "quick", "imageRef": local.DEFAULT_IMAGE_ID, "networks": "none"}})
    assert status == 202, body
    server_id = body["server"]["id"]
    stack.wait_status(server_id, "ACTIVE", timeout=60)
    return server_id, time.monotonic() - started


@pytest.fixture
def stack(tmp_path):
    stack = Stack(tmp_path).start()
    try:
        yield stack
    finally:
        if stack.proc.poll() is None:
            stack.stop()


def test_a_server_boots_to_active_in_seconds_with_nothing_but_scripts_serve(stack):
    server_id, took = _boot(stack)
    assert took < BOOT_SECONDS, f"ACTIVE after {took:.1f} s"
    server = stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]
    assert server["OS-EXT-STS:vm_state"] == "active" and server["OS-EXT-STS:power_state"] == 1
    assert (server["progress"], server["addresses"]) == (0, {})  # as Nova: 0 once ACTIVE; networks none
    assert server["image"]["id"] == local.DEFAULT_IMAGE_ID
    log = stack.log()
    assert "taken by the local image service: http://127.0.0.1:" in log
    assert "built-in KubeVirt cluster listening" in log  # the controller drives the emulator
    assert "HTTP Request:" not in log  # the controller's Kubernetes requests are not logged one by one


def test_the_tiny_image_the_catalog_and_the_flavors_are_there_on_first_start(stack):
    clouds = yaml.safe_load((stack.checkout / "var/clouds.yaml").read_text())["clouds"]["openkeel"]
    assert clouds["auth"]["auth_url"] == f"{stack.url}/identity/v3"
    token = json.dumps({"auth": {"identity": {"methods": ["token"], "token": {"id": "admin:admin"}},
                                 "scope": {"project": {"id": "admin"}}}}).encode()
    import urllib.request

    req = urllib.request.Request(f"{stack.url}/identity/v3/auth/tokens", data=token, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 201 and resp.headers["X-Subject-Token"] == "admin:admin"
        catalog = {entry["type"]: entry["endpoints"][0]["url"] for entry in json.loads(resp.read())["token"]["catalog"]}
    assert catalog["compute"] == f"{stack.url}/v2.1"
    with urllib.request.urlopen(catalog["image"] + "/v2/images?name=" + local.DEFAULT_IMAGE_NAME, timeout=10) as resp:
        [image] = json.loads(resp.read())["images"]
    assert image["id"] == local.DEFAULT_IMAGE_ID and image["disk_format"] == "raw" and image["status"] == "active"
    conf = (stack.checkout / "var/serve-images.conf").read_text()
    assert f"api_servers = {catalog['image']}" in conf
    # devstack's flavors, written into the new database (tests/scripts/test_serve_flavors.py: when exactly)
    flavors = stack.call("GET", "/v2.1/flavors/detail")[1]["flavors"]
    assert [(f["id"], f["name"], f["ram"], f["vcpus"], f["disk"], f["os-flavor-access:is_public"],
             f["extra_specs"]) for f in flavors] == [
        (i, n, ram, cpu, disk, True, {"hw_rng:allowed": "True"}) for i, n, ram, cpu, disk in (
            ("1", "m1.tiny", 512, 1, 1), ("2", "m1.small", 2048, 1, 20), ("3", "m1.medium", 4096, 2, 40),
            ("4", "m1.large", 8192, 4, 80), ("5", "m1.xlarge", 16384, 8, 160))]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_every_process_it_started(stack, sig):
    _boot(stack)
    started = descendants(stack.proc.pid)
    commands = " ".join(pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") for pid in started
                        if alive(pid))
    assert "controller" in commands and "serve" in commands, commands
    assert len(started) >= 3  # controller, API master, its worker
    assert stack.stop(sig) == 0, stack.log()
    deadline = time.monotonic() + 10
    while [pid for pid in started if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in started if alive(pid)], stack.log()


def test_children_die_with_a_killed_supervisor(stack):
    started = descendants(stack.proc.pid)
    assert started
    os.kill(stack.proc.pid, signal.SIGKILL)
    stack.proc.wait(timeout=10)
    deadline = time.monotonic() + 15
    while [pid for pid in started if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in started if alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_when_the_api_cannot_start_nothing_stays_running(tmp_path):
    """The API refuses to start (noauth2 on every address, which scripts/serve's own checks leave to it):
    scripts/serve stops the controller and Placement it started, exits non-zero and writes no clouds.yaml."""
    stack = Stack(tmp_path, "--host", "0.0.0.0")
    with stack.log_path.open("wb") as log:
        proc = subprocess.Popen([str(stack.checkout / "scripts/serve"), *stack.args], cwd=stack.checkout,
                                env=stack.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = set()
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        started |= descendants(proc.pid)
        time.sleep(0.05)
    if proc.poll() is None:  # it kept running: stop it, then fail
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        pytest.fail(f"scripts/serve ran with noauth2 on 0.0.0.0:\n{stack.log()}")
    assert proc.returncode != 0
    assert "never on '0.0.0.0'" in stack.log()
    assert "`openkeel-compute serve` exited with status 1: stopping the rest" in stack.log()
    assert started and not [pid for pid in started if alive(pid)]  # the controller and Placement were stopped
    assert not (stack.checkout / "var/clouds.yaml").exists()  # written only once a start succeeded
