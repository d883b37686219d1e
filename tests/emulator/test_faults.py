"""Injected faults: API errors, unschedulable VMIs, failed imports, lost nodes — through Python and over HTTP."""

from __future__ import annotations

import pytest
from lightkube import ApiError

from openkeel_compute.controller.kube import http_of
from openkeel_compute.emulator import Fault
from tests.emulator.conftest import (
    CIT,
    CPREF,
    NS,
    VM,
    VM_NAME,
    instancetype,
    phase,
    preference,
    printable,
    put,
    running,
    server_vm,
)


@pytest.fixture
def vm(cluster, client):
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    return VM_NAME


def test_api_error_answers_the_status_then_recovers(cluster, client):
    cluster.inject(Fault(503, method="POST", plural="virtualmachineclusterinstancetypes", times=2))
    for _ in range(2):
        with pytest.raises(ApiError) as caught:
            client.create(CIT.from_dict(instancetype()))
        assert caught.value.status.code == 503
        assert caught.value.status.reason == "ServiceUnavailable"
    client.create(CIT.from_dict(instancetype()))
    assert cluster.get("VirtualMachineClusterInstancetype", "m1.small") is not None


def test_faults_over_http(cluster, client):
    http = http_of(client)
    answer = http.post("/emulator/v1/faults", json={"kind": "api-error", "status": 429, "method": "GET"})
    assert answer.status_code == 201
    assert http.get("/emulator/v1/faults").json()["faults"][0]["status"] == 429
    throttled = http.get(f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines")
    assert throttled.status_code == 429 and throttled.headers["Retry-After"] == "1"
    assert http.get(f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines").status_code == 200
    assert http.post("/emulator/v1/faults", json={"kind": "meteor"}).status_code == 400
    assert http.delete("/emulator/v1/faults").json() == {"faults": []}


def test_unschedulable_until_cleared(cluster, client, vm):
    cluster.inject(Fault(kind="unschedulable", namespace=NS, name=vm))
    put(client, "virtualmachines", vm, "start")
    obj = cluster.wait_for("VirtualMachine", vm, NS, lambda o: printable(o) == "ErrorUnschedulable")
    vmi = cluster.get("VirtualMachineInstance", vm, NS)
    assert phase(vmi) == "Scheduling"
    cond = next(c for c in vmi["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert any(c["type"] == "PodScheduled" for c in obj["status"]["conditions"])
    cluster.clear_faults()
    running(cluster)


def test_import_failure(cluster, client, vm):
    cluster.inject(Fault(kind="import-failure", name=vm, reason="Error",
                         message="Unable to connect to http data source: expected status code 200, got 401. "
                                 "Status: 401 Unauthorized"))
    put(client, "virtualmachines", vm, "start")
    dv = cluster.wait_for("DataVolume", f"{vm}-root", NS, lambda o: phase(o) == "Failed")
    running_cond = next(c for c in dv["status"]["conditions"] if c["type"] == "Running")
    assert running_cond["reason"] == "Error" and "401 Unauthorized" in running_cond["message"]
    cluster.wait_for("VirtualMachine", vm, NS, lambda o: printable(o) == "DataVolumeError")
    assert cluster.get("VirtualMachineInstance", vm, NS) is None


def test_node_loss(cluster, client, vm):
    put(client, "virtualmachines", vm, "start")
    running(cluster)
    http = http_of(client)
    assert http.post("/emulator/v1/faults", json={"kind": "node-loss", "namespace": NS}).json()["affected"] == 1
    vmi = cluster.get("VirtualMachineInstance", vm, NS)
    assert (phase(vmi), vmi["status"]["reason"]) == ("Failed", "NodeUnresponsive")
    cluster.wait_for("VirtualMachine", vm, NS, lambda o: printable(o) == "Stopped")
    assert put(client, "virtualmachines", vm, "start").status_code == 202  # Manual: stop + start
    cluster.wait_for("VirtualMachineInstance", vm, NS,
                     lambda o: o is not None and o["metadata"]["uid"] != vmi["metadata"]["uid"]
                     and phase(o) == "Running")


def test_down_and_up_refuses_then_serves(cluster, client):
    import httpx2

    cluster.down()
    with pytest.raises(httpx2.TransportError):
        list(client.list(CIT))
    cluster.up()
    assert list(client.list(CIT)) == []
