"""Ctrl-C and a new ``scripts/serve``: every server is found in the state it had (ACTIVE, SHUTOFF, PAUSED,
VERIFY_RESIZE), a build cut off finishes, and ``openstack server resize revert`` works after the restart:
the built-in cluster outlives its process as a real cluster outlives the controller."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import yaml

from openkeel_compute.controller.kube import make_client
from openkeel_compute.images import local
from tests.emulator.conftest import DV
from tests.scripts.checkout import clean_env
from tests.scripts.stack import Stack, free_port

STATES = {"web": "ACTIVE", "off": "SHUTOFF", "still": "PAUSED", "grown": "VERIFY_RESIZE"}


@pytest.fixture
def stack(tmp_path):
    # the image service keeps its port across the restart, as Glance keeps its endpoint: the import cut off
    # reads the image from it again (the built-in cluster's imports read their images)
    stack = Stack(tmp_path, "--image-port", str(free_port()))
    yield stack
    if stack.proc is not None and stack.proc.poll() is None:
        stack.stop()


def _boot(stack: Stack, name: str) -> str:
    status, body = stack.call("POST", "/v2.1/servers", {"server": {
        "name": name, "flavorRef": "quick", "imageRef": local.DEFAULT_IMAGE_ID, "networks": "auto"}})
    assert status == 202, body
    return body["server"]["id"]


def _action(stack: Stack, server: str, body: dict) -> None:
    status, answer = stack.call("POST", f"/v2.1/servers/{server}/action", body)
    assert status == 202, answer


def _shown(stack: Stack, server: str) -> dict:
    status, body = stack.call("GET", f"/v2.1/servers/{server}")
    assert status == 200, body
    return body["server"]


def _wait_for_import(stack: Stack, server: str, timeout: float = 30) -> None:
    """Until the server's root disk is being imported in the built-in cluster (read with its kubeconfig)."""
    kubeconfig = yaml.safe_load((stack.checkout / "var/emulator.kubeconfig").read_text())
    client = make_client(kubeconfig, timeout=5)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for dv in client.list(DV, namespace="*"):
                if dv.metadata.name.startswith(server) and (dv.status or {}).get("phase") in (
                        "Pending", "ImportScheduled", "ImportInProgress"):
                    return
            time.sleep(0.05)
    finally:
        client.close()


def _openstack(stack: Stack, *args: str) -> str:
    got = subprocess.run([str(stack.checkout / "scripts/openstack"), *args], cwd=stack.checkout,
                         env=clean_env(stack.home), capture_output=True, text=True, timeout=120, check=False)
    assert got.returncode == 0, f"openstack {' '.join(args)}: {got.stdout}\n{got.stderr}"
    return got.stdout


def test_servers_keep_their_states_across_a_restart_of_scripts_serve(stack):
    stack.start()
    for flavor, ram, vcpus, disk in (("quick", 512, 1, 1), ("grown", 1024, 2, 2)):
        status, body = stack.call("POST", "/v2.1/flavors", {"flavor": {
            "name": f"m1.{flavor}", "ram": ram, "vcpus": vcpus, "disk": disk, "id": flavor}})
        assert status == 200, body
    servers = {name: _boot(stack, name) for name in STATES}
    for server in servers.values():
        stack.wait_status(server, "ACTIVE", timeout=60)
    _action(stack, servers["off"], {"os-stop": None})
    _action(stack, servers["still"], {"pause": None})
    _action(stack, servers["grown"], {"resize": {"flavorRef": "grown"}})
    for name, state in STATES.items():
        stack.wait_status(servers[name], state, timeout=60)
    before = {name: _shown(stack, server) for name, server in servers.items()}
    building = _boot(stack, "building")
    _wait_for_import(stack, building)
    assert stack.stop(signal.SIGINT) == 0, stack.log()  # Ctrl-C
    assert (stack.checkout / "var/emulator/snapshot.json").is_file()
    stack.log_path.rename(stack.home / "serve-first.log")

    stack.start()
    stack.wait_status(building, "ACTIVE", timeout=60)  # the build cut off finished
    assert "objects read back from" in stack.log()
    for _ in range(3):  # the controller's passes over servers it finds running find nothing to change
        for name, server in servers.items():
            shown = _shown(stack, server)
            assert shown["status"] == STATES[name], (name, shown.get("fault"), stack.log())
            assert shown["addresses"] == before[name]["addresses"]  # the same guests, not new ones
            assert shown["OS-EXT-STS:power_state"] == before[name]["OS-EXT-STS:power_state"]
        time.sleep(1)
    assert _shown(stack, servers["grown"])["flavor"]["original_name"] == "m1.grown"

    _openstack(stack, "server", "resize", "revert", servers["grown"])
    reverted = stack.wait_status(servers["grown"], "ACTIVE", timeout=60)
    assert reverted["flavor"]["original_name"] == "m1.quick"
    # and the others go on from where they were
    _action(stack, servers["off"], {"os-start": None})
    _action(stack, servers["still"], {"unpause": None})
    for name in ("off", "still"):
        stack.wait_status(servers[name], "ACTIVE", timeout=60)
    status, console = stack.call("POST", f"/v2.1/servers/{servers['web']}/action", {"os-getConsoleOutput": {}})
    assert status == 200 and "web login: " in console["output"]  # the guest's console from before the restart
    assert stack.stop(signal.SIGINT) == 0, stack.log()
