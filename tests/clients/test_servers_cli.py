"""The openstack CLI's server commands against a real ``scripts/serve`` (API, controller, image service).

Each command runs as a user types it, with the var/clouds.yaml scripts/serve wrote (the client
authenticates at the noauth2 identity answer and finds compute and image in its catalog). A watcher
polls the server over plain HTTP meanwhile, so the test sees the states the server passes through,
not only where it ends.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from openkeel_compute.images import local
from tests.clients.watch import Watcher

CLI_TIMEOUT = 120


class Cli:
    def __init__(self, stack):
        self.env = dict(stack.env, OS_CLOUD="openkeel")
        self.exe = str(stack.checkout / "scripts/openstack")
        self.cwd = stack.checkout

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([self.exe, *args], env=self.env, cwd=self.cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.exe, *args], check=False, env=self.env, cwd=self.cwd, capture_output=True,
                              text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)

    def ok(self, *args: str):
        got = self.run(*args)
        assert got.returncode == 0, f"openstack {' '.join(args)} -> {got.returncode}\n{got.stdout}\n{got.stderr}"
        return json.loads(got.stdout) if "-f" in args and "json" in args else got.stdout


@pytest.fixture(scope="module")
def cli(stack):
    cli = Cli(stack)
    cli.ok("flavor", "create", "--ram", "512", "--vcpus", "1", "--disk", "1", "--id", "cli-1", "m1.cli")
    return cli


def _find(stack, name: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = stack.call("GET", f"/v2.1/servers?name=^{name}$")
        if status == 200 and body["servers"]:
            return body["servers"][0]["id"]
        time.sleep(0.05)
    raise AssertionError(f"no server {name}")


def test_the_cli_drives_a_server_through_its_life(stack, cli):
    creating = cli.start("server", "create", "--flavor", "m1.cli", "--image", local.DEFAULT_IMAGE_NAME, "--wait",
                         "-f", "json", "cli-web")
    server_id = _find(stack, "cli-web")
    watcher = Watcher(stack).watch(server_id)
    try:
        out, err = creating.communicate(timeout=CLI_TIMEOUT)
        assert creating.returncode == 0, err
        created = json.loads(out)
        assert (created["id"], created["status"]) == (server_id, "ACTIVE")  # --wait waited for ACTIVE
        assert created["image"] == f"{local.DEFAULT_IMAGE_NAME} ({local.DEFAULT_IMAGE_ID})"  # found by name
        assert created["addresses"]["pod-network"][0].startswith("10.244.")  # networks auto: the pod network
        watcher.wait_for(lambda seen: seen[0] == "ACTIVE")  # the watcher polls on its own: let it see it
        assert watcher.statuses()[:2] == ["BUILD", "ACTIVE"]

        listed = cli.ok("server", "list", "-f", "json")
        assert [(s["ID"], s["Name"], s["Status"], s["Image"], s["Flavor"]) for s in listed] == [
            (server_id, "cli-web", "ACTIVE", local.DEFAULT_IMAGE_NAME, "m1.cli")]
        shown = cli.ok("server", "show", "cli-web", "-f", "json")
        assert (shown["id"], shown["OS-EXT-STS:vm_state"], shown["OS-EXT-STS:power_state"]) == (
            server_id, "active", 1)

        cli.ok("server", "set", "--name", "cli-db", "--property", "role=db", "cli-web")
        got = stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]
        assert (got["name"], got["metadata"]) == ("cli-db", {"role": "db"})

        def step(args, transient, final):
            mark = watcher.mark()
            cli.ok("server", *args, "cli-db")
            watcher.passes(mark, transient, final)

        step(["stop"], ("ACTIVE", "powering-off", False), "SHUTOFF")
        step(["start"], ("SHUTOFF", "powering-on", False), "ACTIVE")
        step(["reboot"], ("REBOOT", "rebooting", False), "ACTIVE")
        step(["reboot", "--hard"], ("HARD_REBOOT", "rebooting_hard", False), "ACTIVE")
        step(["pause"], ("ACTIVE", "pausing", False), "PAUSED")
        step(["unpause"], ("PAUSED", "unpausing", False), "ACTIVE")

        cli.ok("server", "lock", "cli-db")
        assert stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]["locked"] is True
        refused = cli.run("server", "stop", "cli-db", "--os-cloud", "openkeel-demo")  # another project
        assert refused.returncode != 0
        cli.ok("server", "unlock", "cli-db")
        assert stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]["locked"] is False

        cli.ok("server", "delete", "--wait", "cli-db")
        assert stack.call("GET", f"/v2.1/servers/{server_id}")[0] == 404
        assert watcher.wait_for(lambda seen: seen[0] == "404")
        assert ("ACTIVE", "deleting", False) in watcher.seen, watcher.seen
    finally:
        watcher.stop()
    actions = stack.call("GET", f"/v2.1/servers/{server_id}/os-instance-actions")[1]["instanceActions"]
    assert sorted(a["action"] for a in actions) == sorted(
        ["create", "stop", "start", "reboot", "reboot", "pause", "unpause", "lock", "unlock", "delete"]), actions
    for action in actions:  # every step the controller did ended well (what the watcher may have missed)
        detail = stack.call("GET", f"/v2.1/servers/{server_id}/os-instance-actions/{action['request_id']}")[1]
        events = detail["instanceAction"].get("events") or []
        assert all(e["result"] == "Success" for e in events), detail


def test_no_network_and_the_network_flags(stack, cli):
    """No network service: --nic none boots without addresses. A named network makes the CLI look it up in
    compute's network proxy (no network service in the catalog), which lists the pod network only: an
    unknown network is not found and nothing is booted."""
    created = cli.ok("server", "create", "--flavor", "m1.cli", "--image", local.DEFAULT_IMAGE_NAME, "--nic", "none",
                     "--wait", "-f", "json", "cli-isolated")
    assert (created["status"], created["addresses"]) == ("ACTIVE", {})
    named = cli.run("server", "create", "--flavor", "m1.cli", "--image", local.DEFAULT_IMAGE_NAME, "--nic",
                    "net-id=2d5b2b5e-27d2-4d41-9b8e-a3a8c8b0e1f4", "cli-named")
    assert named.returncode != 0
    assert "2d5b2b5e-27d2-4d41-9b8e-a3a8c8b0e1f4 not found (HTTP 404)" in named.stderr, named.stderr
    assert stack.call("GET", "/v2.1/servers?name=^cli-named$")[1]["servers"] == []
    cli.ok("server", "delete", "--wait", "cli-isolated")
    assert stack.call("GET", "/v2.1/servers?name=^cli-")[1]["servers"] == []


def test_an_unknown_image_name_is_the_clients_own_error(cli):
    got = cli.run("server", "create", "--flavor", "m1.cli", "--image", "no-such-image", "cli-x")
    assert got.returncode == 1
    assert "No Image found for no-such-image" in got.stderr, got.stderr



def test_console_log_show_prints_the_guests_console(stack, cli):
    """``openstack console log show``: the last lines of the guest's serial console, its login prompt last."""
    cli.ok("server", "create", "--flavor", "m1.cli", "--image", local.DEFAULT_IMAGE_NAME, "--nic", "none", "--wait",
           "-f", "json", "cli-console")
    shown = cli.ok("console", "log", "show", "--lines", "5", "cli-console")
    assert shown.rstrip("\n").split("\n")[-1] == "cli-console login: ", shown
    assert len(shown.rstrip("\n").split("\n")) == 4, shown  # Nova's 5 pieces: 4 lines and the end after them
    whole = cli.ok("console", "log", "show", "cli-console")
    assert "Hostname set to <cli-console>" in whole and "\r" not in whole
    cli.ok("server", "delete", "--wait", "cli-console")
def test_resize_confirm_and_revert_with_the_cli(stack, cli):
    cli.ok("flavor", "create", "--ram", "1024", "--vcpus", "2", "--disk", "2", "--id", "cli-2", "m1.cli2")
    created = cli.ok("server", "create", "--flavor", "m1.cli", "--image", local.DEFAULT_IMAGE_NAME, "--nic", "none",
                     "--wait", "-f", "json", "cli-grow")
    server_id = created["id"]
    cli.ok("server", "resize", "--flavor", "m1.cli2", "--wait", "cli-grow")  # waits for VERIFY_RESIZE
    got = stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]
    assert (got["status"], got["flavor"]["original_name"]) == ("VERIFY_RESIZE", "m1.cli2")
    cli.ok("server", "resize", "confirm", "cli-grow")
    deadline = time.monotonic() + 60
    while stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]["status"] != "ACTIVE":
        assert time.monotonic() < deadline, "never ACTIVE after the confirm"
        time.sleep(0.1)
    assert stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"]["flavor"]["original_name"] == "m1.cli2"

    cli.ok("flavor", "create", "--ram", "768", "--vcpus", "1", "--disk", "2", "--id", "cli-3", "m1.cli3")
    cli.ok("server", "resize", "--flavor", "m1.cli3", "--wait", "cli-grow")
    cli.ok("server", "resize", "revert", "cli-grow")
    deadline = time.monotonic() + 60
    while (shown := stack.call("GET", f"/v2.1/servers/{server_id}")[1]["server"])["status"] != "ACTIVE":
        assert time.monotonic() < deadline, "never ACTIVE after the revert"
        time.sleep(0.1)
    assert shown["flavor"]["original_name"] == "m1.cli2"
    actions = stack.call("GET", f"/v2.1/servers/{server_id}/os-instance-actions")[1]["instanceActions"]
    assert sorted(a["action"] for a in actions) == ["confirmResize", "create", "resize", "resize", "revertResize"]
    cli.ok("server", "delete", "--wait", "cli-grow")
