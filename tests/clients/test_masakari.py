"""Masakari's own compute client (masakari 22.0.0, masakari/compute/nova.py: novaclient at 2.53, the compute
endpoint from the catalog) runs its recovery calls against a real ``scripts/serve`` with three nodes, through
../shared's ``reference/masakari/masakari-calls.py``: a node whose server is recovered on another one.

The script's sequence, in Masakari's order: the failed host's service looked up, disabled with Masakari's
reason and checked, its servers listed, the target added to an aggregate, then per server lock, reset state
(error), evacuate to the target, show, unlock, stop, show, start, and the service enabled again. Before it
runs, the node turns NotReady and its service goes down (the controller's heartbeat, with a short
``service_down_time``): Nova evacuates only from a host whose service is down. Masakari's flows wait for each
evacuation and each stop to end before they go on (``_wait_for_evacuation``, ``_wait_for_power_off``,
polling the server); the script does not, so its ``evacuate_instance`` and ``stop_server`` are followed by
those same waits here, and nothing else of it is changed.

Keystone: the client authenticates with keystoneauth's password plugin against a stand-in
(tests/clients/keystone_tokens.py) whose token is the stack's noauth2 admin token and whose catalog lists
the stack's compute API. Skips with the reason without ../shared; the Masakari environment is built on
first use in ~/.cache/okc-services/masakari-venv (MASAKARI_VENV names another), as ../shared's
networking-storage.md describes it (about two minutes).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import time

import pytest

from tests._shared import shared_path
from tests.clients.keystone_tokens import KeystoneTokens
from tests.scripts.checkout import free_port
from tests.shared_recipes import locked

CACHE = pathlib.Path(os.environ.get("OKC_SERVICES_CACHE", pathlib.Path.home() / ".cache" / "okc-services"))
NODES = ("emulated-node-1", "emulated-node-2", "emulated-node-3")

# masakari-calls.py run as Masakari's flows run its calls: each evacuation waited for (host failure's
# _wait_for_evacuation), each stop waited for until the server is stopped (instance failure's
# _wait_for_power_off), by polling the server with Masakari's own client
RUNNER = '''
import runpy, sys, time
from masakari.compute import nova

evacuate, stop = nova.API.evacuate_instance, nova.API.stop_server


def _settled(self, context, uuid, vm_state=None):
    deadline = time.monotonic() + 120
    while True:
        server = self.get_server(context, uuid)
        if getattr(server, "OS-EXT-STS:task_state") is None and vm_state in (None, getattr(server, "OS-EXT-STS:vm_state")):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"server {uuid} not settled in 120 s")
        time.sleep(0.5)


def evacuate_and_wait(self, context, uuid, target=None):
    answer = evacuate(self, context, uuid, target=target)
    _settled(self, context, uuid)
    return answer


def stop_and_wait(self, context, uuid):
    answer = stop(self, context, uuid)
    _settled(self, context, uuid, "stopped")
    return answer


nova.API.evacuate_instance, nova.API.stop_server = evacuate_and_wait, stop_and_wait
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def _masakari_python(tmp_path) -> pathlib.Path:
    venv = pathlib.Path(os.environ.get("MASAKARI_VENV", CACHE / "masakari-venv"))
    python = venv / "bin" / "python"
    if (python.exists() and subprocess.run([str(python), "-c", "import masakari.compute.nova"],
                                           capture_output=True, check=False).returncode == 0):
        return python
    constraints = shared_path("reference/tempest/services-constraints.txt")
    log = tmp_path / "masakari-venv.log"
    with locked(venv.parent / ".masakari-venv.lock"), log.open("w") as out:
        for argv in (["python3.11", "-m", "venv", str(venv)],
                     [str(venv / "bin" / "pip"), "install", "-q", "-c", str(constraints), "masakari==22.0.0"]):
            if subprocess.run(argv, stdout=out, stderr=out, timeout=900, check=False).returncode:
                pytest.fail(f"the Masakari environment could not be built ({' '.join(argv)}):\n"
                            + log.read_text()[-3000:], pytrace=False)
    return python


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from tests.scripts.stack import Stack

    shared_path("reference/masakari/masakari-calls.py")  # without ../shared: skipped before anything starts
    home = tmp_path_factory.mktemp("masakari-stack")
    conf = home / "three-nodes.conf"
    # a node's service is down 5 s after its last heartbeat (Nova's default: 60 s, every 10 s)
    conf.write_text("[DEFAULT]\nreport_interval = 1\nservice_down_time = 5\n[controller]\nemulator_nodes = 3\n")
    emulator = free_port()
    stack = Stack(home, "--config-file", str(conf), "--emulator-port", str(emulator)).start()
    stack.emulator = f"http://127.0.0.1:{emulator}"
    try:
        yield stack
    finally:
        stack.stop()


def _node_not_ready(stack, node: str) -> None:
    import json
    import urllib.request

    body = json.dumps({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}).encode()
    req = urllib.request.Request(f"{stack.emulator}/api/v1/nodes/{node}/status", data=body, method="PATCH",
                                 headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200


def _services(stack) -> list[dict]:
    deadline = time.monotonic() + 60
    while True:
        status, body = stack.call("GET", "/v2.1/os-services?binary=nova-compute", version="2.53")
        if status == 200 and len(body["services"]) == len(NODES) or time.monotonic() > deadline:
            return body["services"]
        time.sleep(0.5)


def test_masakaris_recovery_calls_recover_a_server_of_a_failed_node(stack, tmp_path):
    script = shared_path("reference/masakari/masakari-calls.py")
    python = _masakari_python(tmp_path)
    assert {s["host"] for s in _services(stack)} == set(NODES)
    status, body = stack.call("POST", "/v2.1/servers", {"server": {
        "name": "ha-1", "imageRef": _image(stack), "flavorRef": "1", "networks": "none"}}, version="2.53")
    assert status == 202, body
    uuid = body["server"]["id"]
    server = stack.wait_status(uuid, "ACTIVE", timeout=90, version="2.53")
    source = server["OS-EXT-SRV-ATTR:host"]
    target = next(n for n in NODES if n != source)
    status, body = stack.call("POST", "/v2.1/os-aggregates", {"aggregate": {"name": "okc-agg"}}, version="2.53")
    assert status == 200, body

    _node_not_ready(stack, source)
    deadline = time.monotonic() + 60  # the controller's heartbeat sees it NotReady: its service goes down
    while [s["state"] for s in _services(stack) if s["host"] == source] != ["down"]:
        assert time.monotonic() < deadline, _services(stack)
        time.sleep(0.5)

    runner = tmp_path / "run-masakari-calls.py"
    runner.write_text(RUNNER)
    with KeystoneTokens(f"{stack.url}/v2.1") as keystone:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env.update(OS_AUTH_URL=keystone.url, OS_REGION_NAME="RegionOne", ADMIN_PASSWORD="admin-secret",
                   PYTHONWARNINGS="ignore")
        env.pop("PYTHONPATH", None)  # Masakari's own environment, nothing of ours
        done = subprocess.run([str(python), str(runner), str(script), "--host", source, "--target", target,
                               "--aggregate", "okc-agg"], env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        assert keystone.authentications  # it found the compute API through the catalog
    lines = [line for line in done.stdout.splitlines() if line.startswith(("OK", "FAILED"))]
    assert done.returncode == 0 and not [line for line in lines if line.startswith("FAILED")], (
        done.stdout + done.stderr[-3000:])
    called = [line.split()[1].split("(")[0] for line in lines]
    assert called == ["find_compute_service", "enable_disable_service", "is_service_disabled", "get_servers",
                      "get_aggregate_list", "add_host_to_aggregate", "lock_server", "reset_instance_state",
                      "evacuate_instance", "get_server", "unlock_server", "stop_server", "get_server",
                      "start_server", "enable_disable_service"]

    recovered = stack.wait_status(uuid, "ACTIVE", timeout=90, version="2.53")
    assert recovered["OS-EXT-SRV-ATTR:host"] == target and recovered["locked"] is False
    status, body = stack.call("GET", f"/v2.1/os-migrations?instance_uuid={uuid}", version="2.80")
    assert [(m["migration_type"], m["status"], m["dest_compute"]) for m in body["migrations"]] == [
        ("evacuation", "done", target)]
    status, body = stack.call("GET", "/v2.1/os-aggregates", version="2.53")
    assert [a["hosts"] for a in body["aggregates"] if a["name"] == "okc-agg"] == [[target]]
    (service,) = [s for s in _services(stack) if s["host"] == source]
    assert (service["status"], service["forced_down"], service["state"]) == ("enabled", False, "down")


def _image(stack) -> str:
    status, body = stack.call("GET", "/v2.1/images", version="2.1")
    assert status == 200 and body["images"], body
    return body["images"][0]["id"]
