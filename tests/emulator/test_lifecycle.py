"""Lifecycle through lightkube: VM → DataVolumes → VMI phases → Running with an IP; revisions; stop; restart."""

from __future__ import annotations

import time

import pytest
from lightkube import ApiError

from openkeel_compute.controller.kube import http_of
from openkeel_compute.emulator import Delays
from tests.emulator.conftest import (
    CIT,
    CPREF,
    NS,
    VM,
    VM_NAME,
    header_secret,
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


def test_boot_goes_through_every_phase(cluster, client):
    # Slow enough for polling to see every phase.
    cluster.lifecycle.delays = Delays(import_scheduled=0.3, import_duration=0.3, pending=0.15, scheduling=0.15,
                                      scheduled=0.15, stopping=0.05)
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    vm = VM_NAME
    seen_dv, seen_vmi, seen_vm = set(), set(), set()

    def watch(kind, name, into, key):
        def predicate(obj):
            if obj is not None and key(obj):
                into.add(key(obj))
            return False
        try:
            cluster.wait_for(kind, name, NS, predicate, timeout=0)
        except AssertionError:
            pass

    assert put(client, "virtualmachines", vm, "start").status_code == 202
    for _ in range(2000):
        watch("DataVolume", f"{vm}-root", seen_dv, phase)
        watch("VirtualMachineInstance", vm, seen_vmi, phase)
        watch("VirtualMachine", vm, seen_vm, printable)
        if printable(cluster.get("VirtualMachine", vm, NS)) == "Running":
            break
        import time
        time.sleep(0.002)
    assert {"ImportScheduled", "ImportInProgress", "Succeeded"} <= seen_dv
    assert {"Pending", "Scheduling", "Scheduled", "Running"} <= seen_vmi
    assert {"Provisioning", "Starting", "Running"} <= seen_vm
    vmi = cluster.get("VirtualMachineInstance", vm, NS)
    iface = vmi["status"]["interfaces"][0]
    assert iface["name"] == "default" and iface["ipAddress"].startswith("10.244.")
    assert iface["ipAddresses"] == [iface["ipAddress"]]
    assert vmi["status"]["nodeName"]
    assert vmi["metadata"]["ownerReferences"][0]["uid"] == cluster.get("VirtualMachine", vm, NS)["metadata"]["uid"]
    vm_obj = cluster.get("VirtualMachine", vm, NS)
    assert vm_obj["status"]["ready"] is True
    assert {"type": "Ready", "status": "True"}.items() <= next(
        c for c in vm_obj["status"]["conditions"] if c["type"] == "Ready").items()
    dv = cluster.get("DataVolume", f"{vm}-root", NS)
    assert dv["status"]["progress"] == "100.0%"
    assert dv["spec"]["source"]["http"]["secretExtraHeaders"] == [f"{vm}-glance"]


def test_controller_revisions_recorded_as_kubevirt_does(cluster, client, vm):
    obj = cluster.wait_for("VirtualMachine", vm, NS,
                           lambda o: "preferenceRef" in ((o or {}).get("status") or {}))
    it = cluster.get("VirtualMachineClusterInstancetype", "m1.small")
    ref = obj["status"]["instancetypeRef"]
    assert ref["name"] == "m1.small" and ref["kind"] == "VirtualMachineClusterInstancetype"
    revision = cluster.get("ControllerRevision", ref["controllerRevisionRef"]["name"], NS)
    assert revision["data"]["spec"] == it["spec"]
    assert revision["metadata"]["labels"]["instancetype.kubevirt.io/object-uid"] == it["metadata"]["uid"]
    assert revision["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    assert "spec" in obj and "revisionName" not in obj["spec"]["instancetype"]
    pref_rev = obj["status"]["preferenceRef"]["controllerRevisionRef"]["name"]
    assert cluster.get("ControllerRevision", pref_rev, NS)["data"]["kind"] == "VirtualMachineClusterPreference"


def test_missing_instancetype_is_a_failure_condition(cluster, client):
    client.create(VM.from_dict(server_vm(flavor="nope")), namespace=NS)
    obj = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: any(
        c["type"] == "Failure" for c in ((o or {}).get("status") or {}).get("conditions", [])))
    failure = next(c for c in obj["status"]["conditions"] if c["type"] == "Failure")
    assert "virtualmachineclusterinstancetypes.instancetype.kubevirt.io \"nope\" not found" in failure["message"]
    assert failure["reason"] == "FailedFindInstancetype"  # KubeVirt v1.9's VM controller: admitted, then waiting


def test_a_vm_admitted_before_its_instancetype_starts_once_it_exists(cluster, client):
    """As KubeVirt's own test (a VM referencing a missing instancetype is created, does not start, and
    starts once the instancetype is made): the order in which OpenKeel applies a new VM and its sizing."""
    client.create(VM.from_dict(server_vm()), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: any(
        c["type"] == "Failure" and c["reason"] == "FailedFindInstancetype"
        for c in ((o or {}).get("status") or {}).get("conditions", [])))
    assert cluster.get("VirtualMachineInstance", VM_NAME, NS) is None
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    obj = running(cluster)
    assert not any(c["type"] == "Failure" for c in obj["status"].get("conditions", []))


def test_stop_start_restart(cluster, client, vm):
    assert put(client, "virtualmachines", vm, "stop").status_code == 409
    put(client, "virtualmachines", vm, "start")
    running(cluster)
    again = put(client, "virtualmachines", vm, "start")
    assert again.status_code == 409
    assert again.json()["message"] == f'Operation cannot be fulfilled on virtualmachine.kubevirt.io "{vm}": ' \
                                      "VM is already running"
    first_uid = cluster.get("VirtualMachineInstance", vm, NS)["metadata"]["uid"]
    assert put(client, "virtualmachines", vm, "restart", {"gracePeriodSeconds": 0}).status_code == 202
    cluster.wait_for("VirtualMachineInstance", vm, NS,
                     lambda o: o is not None and o["metadata"]["uid"] != first_uid and phase(o) == "Running")
    assert put(client, "virtualmachines", vm, "stop", {"gracePeriod": 0}).status_code == 202
    cluster.wait_for("VirtualMachineInstance", vm, NS, lambda o: o is None)
    stopped = cluster.wait_for("VirtualMachine", vm, NS, lambda o: printable(o) == "Stopped")
    assert "ready" not in stopped["status"] and "stateChangeRequests" not in stopped["status"]
    bad = put(client, "virtualmachines", vm, "restart", {"gracePeriodSeconds": 5})
    assert bad.status_code == 400
    assert bad.json()["message"] == "For force restart, only gracePeriod=0 is supported for now"
    assert put(client, "virtualmachines", vm, "restart").json()["message"].endswith("VM is not running: Halted")


def test_pause_unpause(cluster, client, vm):
    paused = put(client, "virtualmachineinstances", vm, "pause")
    assert paused.status_code == 404
    assert paused.json()["message"] == f'virtualmachineinstance.kubevirt.io "{vm}" not found'
    put(client, "virtualmachines", vm, "start")
    running(cluster)
    assert put(client, "virtualmachineinstances", vm, "unpause").json()["message"].endswith("VMI is not paused")
    assert put(client, "virtualmachineinstances", vm, "pause").status_code == 202
    assert put(client, "virtualmachineinstances", vm, "pause").status_code == 409
    obj = cluster.wait_for("VirtualMachine", vm, NS, lambda o: printable(o) == "Paused")
    cond = next(c for c in obj["status"]["conditions"] if c["type"] == "Paused")
    assert cond["reason"] == "PausedByUser"
    assert put(client, "virtualmachineinstances", vm, "unpause").status_code == 202
    running(cluster)
    assert put(client, "virtualmachineinstances", vm, "softreboot").status_code == 202


def test_steady_state_writes_nothing(cluster, client, vm):
    """Once Running, the controllers leave the objects alone (no resourceVersion churn)."""
    put(client, "virtualmachines", vm, "start")
    running(cluster)
    import time

    time.sleep(0.1)
    before = cluster.store.rv
    time.sleep(0.2)
    assert cluster.store.rv == before


def test_deleting_the_vm_removes_vmi_datavolumes_and_revisions(cluster, client, vm):
    put(client, "virtualmachines", vm, "start")
    running(cluster)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": f"{vm}-extra", "namespace": NS, "ownerReferences": [{
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": vm,
            "uid": cluster.get("VirtualMachine", vm, NS)["metadata"]["uid"]}]},
        "stringData": {"header": "X-Auth-Token:abc"}}
    http = http_of(client)
    assert http.post(f"/api/v1/namespaces/{NS}/secrets", json=secret).status_code == 201
    terminating = http.delete(f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/{vm}")
    assert terminating.status_code == 200
    assert terminating.json()["metadata"]["deletionTimestamp"]  # held by its finalizer until the VMI is gone
    cluster.wait_for("VirtualMachine", vm, NS, lambda o: o is None)
    assert cluster.get("VirtualMachineInstance", vm, NS) is None
    cluster.wait_for("DataVolume", f"{vm}-root", NS, lambda o: o is None)
    cluster.wait_for("Secret", f"{vm}-extra", NS, lambda o: o is None)
    assert cluster.objects("ControllerRevision") == {}
    with pytest.raises(ApiError) as caught:
        client.get(VM, vm, namespace=NS)
    assert caught.value.status.code == 404


def test_start_paused(cluster, client, vm):
    assert put(client, "virtualmachines", vm, "start", {"paused": True}).status_code == 202
    obj = cluster.wait_for("VirtualMachine", vm, NS, lambda o: printable(o) == "Paused")
    vmi = cluster.get("VirtualMachineInstance", vm, NS)
    assert vmi["spec"]["startStrategy"] == "Paused"
    assert next(c for c in obj["status"]["conditions"] if c["type"] == "Paused")["reason"] == "PausedStartStrategy"
    assert put(client, "virtualmachineinstances", vm, "unpause").status_code == 202
    running(cluster)


def test_deleting_the_namespace_empties_it_first(cluster, client, vm):
    put(client, "virtualmachines", vm, "start")
    running(cluster)
    http = http_of(client)
    answer = http.delete(f"/api/v1/namespaces/{NS}")
    assert answer.status_code == 200 and answer.json()["status"]["phase"] == "Terminating"
    refused = http.post(f"/api/v1/namespaces/{NS}/secrets", json={"metadata": {"name": "late"}})
    assert refused.status_code == 403
    assert refused.json()["message"] == (f'secrets "late" is forbidden: unable to create new content in namespace '
                                         f"{NS} because it is being terminated")
    cluster.wait_for("Namespace", NS, None, lambda o: o is None)
    for kind in ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "ControllerRevision"):
        assert cluster.objects(kind) == {}, kind


def test_watch_streams_the_boot(cluster, client, vm):
    """lightkube's watch sees the VMI come and reach Running, then go when the VM stops."""
    import threading

    from tests.emulator.conftest import VMI

    events = []
    done = threading.Event()

    def follow():
        for type_, obj in client.watch(VMI, namespace=NS, resource_version="1"):
            events.append((type_, (obj.status or {}).get("phase")))
            if type_ == "DELETED":
                done.set()
                return

    threading.Thread(target=follow, daemon=True).start()
    put(client, "virtualmachines", vm, "start")
    running(cluster)
    put(client, "virtualmachines", vm, "stop")
    assert done.wait(10), events
    assert events[0] == ("ADDED", None)
    assert ("MODIFIED", "Running") in events and events[-1][0] == "DELETED"


def test_watch_from_now_lists_first_and_honours_selectors(cluster, client, vm):
    http = http_of(client)
    with http.stream("GET", f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines",
                     params={"watch": "true", "timeoutSeconds": "0.3",
                             "labelSelector": f"openkeel.io/server-id={vm}"}) as response:
        lines = [line for line in response.iter_lines() if line]
    import json

    first = json.loads(lines[0])
    assert first["type"] == "ADDED" and first["object"]["metadata"]["name"] == vm
    with http.stream("GET", f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines",
                     params={"watch": "true", "timeoutSeconds": "0.2", "labelSelector": "openkeel.io/server-id=x"}
                     ) as response:
        assert [line for line in response.iter_lines() if line] == []


def test_an_import_waits_for_the_secrets_it_names(cluster, client):
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    cluster.remove("Secret", f"{VM_NAME}-glance", NS)
    client.create(VM.from_dict(server_vm()), namespace=NS)
    dv = cluster.wait_for("DataVolume", f"{VM_NAME}-root", NS, lambda o: "not found" in str(o))
    running_condition = next(c for c in dv["status"]["conditions"] if c["type"] == "Running")
    assert dv["status"]["phase"] == "ImportScheduled"
    assert running_condition["status"] == "False" and f'secret "{VM_NAME}-glance" not found' in running_condition["message"]
    time.sleep(0.2)
    assert cluster.get("DataVolume", f"{VM_NAME}-root", NS)["status"]["phase"] == "ImportScheduled"
    cluster.seed(header_secret())
    cluster.wait_for("DataVolume", f"{VM_NAME}-root", NS, lambda o: o["status"]["phase"] == "Succeeded")
