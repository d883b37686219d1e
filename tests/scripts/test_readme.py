"""The README's commands, run as written against a real ``scripts/serve``.

``scripts/serve`` runs in a throwaway checkout (tests/scripts/checkout.py) on a free port. Every
``curl`` and ``scripts/openstack`` line of the README's bash blocks then runs verbatim with bash from
that checkout; only the port in the curl URLs is changed (scripts/openstack finds the port in the
``var/clouds.yaml`` that scripts/serve wrote). Each command must exit 0, and the state they leave is
checked through the API.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.scripts.checkout import ROOT, clean_env, make_checkout
from tests.scripts.stack import Stack

COMMAND_TIMEOUT = 120


def readme_commands(text: str) -> list[str]:
    """The curl and scripts/openstack commands of the README's bash blocks, continuations joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.strip()
            if command.startswith(("curl ", "scripts/openstack ")):
                commands.append(command)
    return commands


def _get(url: str, token: str = "admin:admin") -> tuple[int, dict]:
    req = urllib.request.Request(url, headers={"X-Auth-Token": token, "OpenStack-API-Version": "compute 2.104"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def _settled(port: int, timeout: float = 60.0) -> None:
    """Wait until no server has a task running: the pace of someone typing the README's commands one
    after another (an action without --wait answers before the controller has done it, as on Nova)."""
    deadline = time.monotonic() + timeout
    while True:
        _status, body = _get(f"http://127.0.0.1:{port}/v2.1/servers/detail")
        busy = [s["name"] for s in body.get("servers", []) if s.get("OS-EXT-STS:task_state")]
        if not busy:
            return
        assert time.monotonic() < deadline, f"still busy after {timeout} s: {busy}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """scripts/serve in a throwaway checkout, ready (its var/clouds.yaml written); its image service on a
    free port: the tests must not take Glance's 9292 from a running scripts/serve."""
    home = tmp_path_factory.mktemp("readme")
    stack = Stack(home).start()
    try:
        yield stack.checkout, stack.port, home
    finally:
        stack.stop()


def test_readme_shows_every_flavor_command_the_cli_needs():
    subcommands = {" ".join(c.split()[1:3]) for c in readme_commands((ROOT / "README.md").read_text())
                   if c.startswith("scripts/openstack")}
    wanted = {"flavor create", "flavor set", "flavor unset", "flavor show", "flavor list", "flavor delete"}
    assert wanted <= subcommands, wanted - subcommands
    text = (ROOT / "README.md").read_text()
    assert "flavor set --property" in text and "flavor set --description" in text


def test_readme_shows_every_server_command_of_the_issue():
    commands = [c for c in readme_commands((ROOT / "README.md").read_text()) if c.startswith("scripts/openstack server")]
    subcommands = {c.split()[2] for c in commands}
    wanted = {"create", "list", "show", "set", "stop", "start", "reboot", "pause", "unpause", "lock", "unlock",
              "delete"}
    assert wanted <= subcommands, wanted - subcommands
    assert any("--wait" in c for c in commands if c.split()[2] == "create")
    assert any("--hard" in c for c in commands if c.split()[2] == "reboot")


def test_readme_commands_work_as_written(served):
    checkout, port, home = served
    commands = readme_commands((ROOT / "README.md").read_text())
    assert any(c.startswith("curl ") for c in commands) and any(c.startswith("scripts/openstack") for c in commands)
    outputs = {}
    for command in commands:
        run = command.replace("127.0.0.1:8774", f"127.0.0.1:{port}")
        got = subprocess.run(["bash", "-c", run], check=False, cwd=checkout, env=clean_env(home), capture_output=True,
                             text=True, timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)
        assert got.returncode == 0, f"{command}\n-> exit {got.returncode}\n{got.stdout}\n{got.stderr}"
        outputs[command] = got.stdout
        if command.startswith("scripts/openstack server"):
            _settled(port)

    def output_of(*words: str) -> str:
        return next(out for cmd, out in outputs.items() if all(w in cmd for w in words))

    assert "versions" in json.loads(output_of("curl", ":8774/ "))
    assert "flavors" in json.loads(output_of("curl", "/v2.1/flavors"))
    shown = output_of("flavor show")
    assert "hw:cpu_policy='dedicated'" in shown and "hw:mem_page_size" not in shown, shown
    assert "2 dedicated vCPUs on huge pages" in shown and "demo" in shown, shown
    assert "m1.dedicated" in output_of("flavor list --all")
    assert "m1.xlarge" in output_of("flavor list --all")  # devstack's, written by scripts/serve
    assert "m1.dedicated" in output_of("openkeel-demo flavor list")
    # the last flavor command deleted the flavor
    assert _get(f"http://127.0.0.1:{port}/v2.1/flavors/42")[0] == 404

    assert "openkeel-tiny" in output_of("image list")
    created = output_of("server create")
    assert re.search(r"\|\s*status\s*\|\s*ACTIVE\s*\|", created), created  # --wait waited for ACTIVE
    assert re.search(r"\|\s*image\s*\|\s*openkeel-tiny \(", created), created
    assert "web-1" in output_of("server list") and "ACTIVE" in output_of("server list")
    assert "pod-network=10.244." in output_of("server show web-1")
    assert "SHUTOFF" in output_of("server show web-2 -c status")
    assert "/vnc_auto.html?path=%3Ftoken%3D" in output_of("console url show")
    console = output_of("console log show")
    assert re.fullmatch(r"web-1 login: ", console.rstrip("\n").split("\n")[-1]), console  # renamed, same hostname
    assert "emulated-node-1" in output_of("resource provider list")
    # the server went through every command (its instance actions) and the last one deleted it
    [server_id] = re.findall(r"\|\s*id\s*\|\s*([0-9a-f-]{36})\s*\|", created)
    assert _get(f"http://127.0.0.1:{port}/v2.1/servers/{server_id}")[0] == 404
    assert _get(f"http://127.0.0.1:{port}/v2.1/servers")[1]["servers"] == []
    status, body = _get(f"http://127.0.0.1:{port}/v2.1/servers/{server_id}/os-instance-actions")
    assert status == 200, body
    actions = sorted(a["action"] for a in body["instanceActions"])
    assert {"create", "stop", "start", "reboot", "pause", "unpause", "resize", "confirmResize",
            "delete"} <= set(actions), actions
    assert actions.count("reboot") == 2, actions


def test_scripts_openstack_says_to_run_scripts_serve_first(tmp_path):
    checkout = make_checkout(tmp_path / "co")
    got = subprocess.run([str(checkout / "scripts/openstack"), "flavor", "list"], check=False,
                         cwd=tmp_path,
                         env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert got.returncode == 1
    assert got.stderr.strip().splitlines() == [
        f"error: {checkout}/var/clouds.yaml is missing: run scripts/serve first (it writes it for its endpoint)"]
