"""Masakari's own compute client (masakari 22.0.0, masakari/compute/nova.py: novaclient at 2.53, the compute
endpoint from the catalog) runs its recovery calls against the tier's OpenKeel with the tier's real Keystone:
../shared's ``reference/masakari/masakari-calls.py``, as tests/clients/test_masakari.py runs it against
``scripts/serve`` with a token stand-in, here with a Keystone token of the cloud admin and the catalog
Keystone serves. A node whose server is recovered on the other one.

scripts/conformance's ``masakari`` phase runs it on OpenKeel's two-node configuration and exports the built-in
cluster's address (OPENKEEL_CONFORMANCE_CLUSTER: the node is made NotReady there, as a failed host), the
image (OPENKEEL_CONFORMANCE_IMAGE_REF) and the nodes (OPENKEEL_CONFORMANCE_NODES). Nova evacuates only from a
host whose service is down: the test waits for the controller's heartbeat to see it ([DEFAULT]
service_down_time, 60 s). The node is made Ready again at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request

import pytest

from tests._shared import shared_path

MV = "2.53"


def _cluster() -> str:
    url = os.environ.get("OPENKEEL_CONFORMANCE_CLUSTER")
    if not url:
        pytest.skip("needs scripts/conformance's masakari phase (OPENKEEL_CONFORMANCE_CLUSTER: the built-in cluster)")
    return url


def _node_ready(cluster: str, node: str, status: str) -> None:
    body = json.dumps({"status": {"conditions": [{"type": "Ready", "status": status}]}}).encode()
    req = urllib.request.Request(f"{cluster}/api/v1/nodes/{node}/status", data=body, method="PATCH",
                                 headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200


class Compute:
    """The compute API as the cloud admin, with a token of the tier's Keystone (keystoneauth)."""

    def __init__(self, conformance) -> None:
        from keystoneauth1 import session
        from keystoneauth1.identity import v3

        auth = conformance.clouds["conformance-admin"]["auth"]
        self.password = auth["password"]
        self.url = conformance.compute_url
        self.session = session.Session(auth=v3.Password(
            auth_url=conformance.keystone_url, username=auth["username"], password=auth["password"],
            project_name=auth["project_name"], user_domain_name="Default", project_domain_name="Default"))

    def call(self, method: str, path: str, body=None, version: str = MV):
        resp = self.session.request(self.url + path, method, json=body, raise_exc=False,
                                    headers={"OpenStack-API-Version": f"compute {version}"})
        return resp.status_code, (resp.json() if resp.content else {})

    def wait(self, uuid: str, done, timeout: float = 120):
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.call("GET", f"/servers/{uuid}")
            if status == 200 and done(body["server"]):
                return body["server"]
            assert time.monotonic() < deadline, body
            time.sleep(1)

    def services(self) -> list[dict]:
        status, body = self.call("GET", "/os-services?binary=nova-compute")
        assert status == 200, body
        return body["services"]


def test_masakaris_recovery_calls_recover_a_server_of_a_failed_node(conformance, tmp_path):
    from tests.clients.test_masakari import RUNNER, _masakari_python

    cluster = _cluster()
    script = shared_path("reference/masakari/masakari-calls.py")
    python = _masakari_python(tmp_path)
    nodes = os.environ["OPENKEEL_CONFORMANCE_NODES"].split()
    compute = Compute(conformance)
    assert {s["host"] for s in compute.services()} >= set(nodes)
    status, body = compute.call("POST", "/servers", {"server": {
        "name": "masakari-ha-1", "imageRef": os.environ["OPENKEEL_CONFORMANCE_IMAGE_REF"], "flavorRef": "1",
        "networks": "none"}})
    assert status == 202, body
    uuid = body["server"]["id"]
    aggregate = f"okc-masakari-{os.getpid()}"
    source = None
    try:
        server = compute.wait(uuid, lambda s: s["status"] == "ACTIVE")
        source = server["OS-EXT-SRV-ATTR:host"]
        target = next(n for n in nodes if n != source)
        status, body = compute.call("POST", "/os-aggregates", {"aggregate": {"name": aggregate}})
        assert status == 200, body
        aggregate_id = body["aggregate"]["id"]

        _node_ready(cluster, source, "Unknown")
        deadline = time.monotonic() + 150  # the controller's heartbeat sees it NotReady: its service goes down
        while [s["state"] for s in compute.services() if s["host"] == source] != ["down"]:
            assert time.monotonic() < deadline, compute.services()
            time.sleep(2)

        runner = tmp_path / "run-masakari-calls.py"
        runner.write_text(RUNNER)
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env.update(OS_AUTH_URL=conformance.keystone_url, OS_REGION_NAME="RegionOne", ADMIN_USERNAME="admin",
                   ADMIN_PASSWORD=compute.password, ADMIN_PROJECT_NAME="admin", PYTHONWARNINGS="ignore")
        env.pop("PYTHONPATH", None)  # Masakari's own environment, nothing of ours
        done = subprocess.run([str(python), str(runner), str(script), "--host", source, "--target", target,
                               "--aggregate", aggregate], env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith(("OK", "FAILED"))]
        assert done.returncode == 0 and not [line for line in lines if line.startswith("FAILED")], (
            done.stdout + done.stderr[-3000:])
        called = [line.split()[1].split("(")[0] for line in lines]
        assert called == ["find_compute_service", "enable_disable_service", "is_service_disabled", "get_servers",
                          "get_aggregate_list", "add_host_to_aggregate", "lock_server", "reset_instance_state",
                          "evacuate_instance", "get_server", "unlock_server", "stop_server", "get_server",
                          "start_server", "enable_disable_service"]

        recovered = compute.wait(uuid, lambda s: s["status"] == "ACTIVE")
        assert recovered["OS-EXT-SRV-ATTR:host"] == target and recovered["locked"] is False
        status, body = compute.call("GET", f"/os-migrations?instance_uuid={uuid}", version="2.80")
        assert [(m["migration_type"], m["status"], m["dest_compute"]) for m in body["migrations"]
                if m["migration_type"] == "evacuation"] == [("evacuation", "done", target)]
        status, body = compute.call("GET", f"/os-aggregates/{aggregate_id}")
        assert body["aggregate"]["hosts"] == [target]
        (service,) = [s for s in compute.services() if s["host"] == source]
        assert (service["status"], service["forced_down"], service["state"]) == ("enabled", False, "down")
        compute.call("POST", f"/os-aggregates/{aggregate_id}/action", {"remove_host": {"host": target}})
        compute.call("DELETE", f"/os-aggregates/{aggregate_id}")
    finally:
        if source is not None:
            _node_ready(cluster, source, "True")
        compute.call("DELETE", f"/servers/{uuid}")
