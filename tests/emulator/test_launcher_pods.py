"""Launcher pods and the guest console log: found by label, one per VMI, a log read through pods/NAME/log."""

from __future__ import annotations

import pytest
from lightkube.resources.core_v1 import Pod

from openkeel_compute.controller.kube import http_of
from tests.emulator.conftest import CIT, CPREF, NS, VM, instancetype, preference, server_vm
from tests.emulator.test_lifecycle import VM_NAME, phase, put, running


@pytest.fixture
def vm(cluster, client):
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    body = server_vm()
    body["spec"]["template"]["spec"]["hostname"] = "web-01"
    body["spec"]["template"]["spec"]["domain"]["devices"]["logSerialConsole"] = True
    client.create(VM.from_dict(body), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    running(cluster)
    return VM_NAME


def launcher(client, vmi_uid: str) -> Pod:
    pods = list(client.list(Pod, namespace=NS, labels={"kubevirt.io/created-by": vmi_uid}))
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def log(client, pod: str, **params) -> tuple[int, str, str]:
    http = http_of(client)
    response = http.get(f"/api/v1/namespaces/{NS}/pods/{pod}/log", params=params)
    return response.status_code, response.headers.get("content-type", ""), response.text


def test_running_vmi_has_a_launcher_pod_found_by_label_and_active_pods(cluster, client, vm):
    vmi = cluster.get("VirtualMachineInstance", vm, NS)
    pod = launcher(client, vmi["metadata"]["uid"])
    assert pod.metadata.name.startswith(f"virt-launcher-{vm}-")
    assert pod.status.phase == "Running" and pod.spec.nodeName == vmi["status"]["nodeName"]
    assert pod.metadata.uid in vmi["status"]["activePods"]
    assert pod.metadata.labels["kubevirt.io"] == "virt-launcher"
    assert pod.metadata.labels["vm.kubevirt.io/name"] == "web-01"
    assert pod.metadata.labels["openkeel.io/server-id"] == vm  # the VMI's labels are the pod's
    assert [c.name for c in pod.spec.initContainers] == ["guest-console-log"]
    assert pod.metadata.ownerReferences[0].uid == vmi["metadata"]["uid"]


def test_console_log_is_a_boot_with_the_hostname(cluster, client, vm):
    pod = launcher(client, cluster.get("VirtualMachineInstance", vm, NS)["metadata"]["uid"])
    code, content_type, text = log(client, pod.metadata.name, container="guest-console-log")
    assert code == 200 and content_type.startswith("text/plain")
    lines = text.splitlines()
    assert len(lines) > 40
    assert lines[0].startswith("[    0.") and "Linux version" in lines[0]
    assert "web-01 login: " in lines[-1] and "Hostname set to <web-01>" in text
    assert text.endswith("\r\n")  # a serial line's ends


def test_tail_lines_and_limit_bytes(cluster, client, vm):
    pod = launcher(client, cluster.get("VirtualMachineInstance", vm, NS)["metadata"]["uid"]).metadata.name
    _code, _type, whole = log(client, pod, container="guest-console-log")
    _code, _type, tail = log(client, pod, container="guest-console-log", tailLines=10)
    assert tail == "".join(whole.splitlines(keepends=True)[-10:])
    assert log(client, pod, container="guest-console-log", tailLines=0)[2] == ""
    assert log(client, pod, container="guest-console-log", tailLines=100000)[2] == whole
    assert log(client, pod, container="guest-console-log", tailLines=10, limitBytes=7)[2] == tail[:7]


def test_errors_as_the_api_server_answers(cluster, client, vm):
    pod = launcher(client, cluster.get("VirtualMachineInstance", vm, NS)["metadata"]["uid"]).metadata.name
    code, _type, body = log(client, pod, container="nope")
    assert code == 400 and f"container nope is not valid for pod {pod}" in body
    code, _type, body = log(client, "virt-launcher-missing-abcde", container="guest-console-log")
    assert code == 404 and 'pods \\"virt-launcher-missing-abcde\\" not found' in body
    code, _type, body = log(client, pod, container="guest-console-log", tailLines=-1)
    assert code == 422 and "tailLines: Invalid value: -1" in body
    code, _type, body = log(client, pod)  # one container besides the sidecar: the default one
    assert code == 200 and "guest-console-log" not in body


def test_a_new_pod_and_log_after_stop_and_start_the_old_one_gone(cluster, client, vm):
    first = launcher(client, cluster.get("VirtualMachineInstance", vm, NS)["metadata"]["uid"]).metadata.name
    assert put(client, "virtualmachines", vm, "stop").status_code == 202
    cluster.wait_for("VirtualMachineInstance", vm, NS, lambda o: o is None)
    assert list(client.list(Pod, namespace=NS)) == []
    assert log(client, first, container="guest-console-log")[0] == 404
    assert put(client, "virtualmachines", vm, "start").status_code == 202
    vmi = cluster.wait_for("VirtualMachineInstance", vm, NS, lambda o: phase(o) == "Running")
    second = launcher(client, vmi["metadata"]["uid"]).metadata.name
    assert second != first
    assert log(client, second, container="guest-console-log")[2].count("Linux version") == 1


def test_soft_reboot_boots_again_in_the_same_log(cluster, client, vm):
    pod = launcher(client, cluster.get("VirtualMachineInstance", vm, NS)["metadata"]["uid"]).metadata.name
    assert put(client, "virtualmachineinstances", vm, "softreboot").status_code == 202
    text = log(client, pod, container="guest-console-log")[2]
    assert text.count("Linux version") == 2 and "reboot: Restarting system" in text


def test_no_console_container_when_the_console_is_not_logged(cluster, client):
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    body = server_vm()
    body["spec"]["template"]["spec"]["domain"]["devices"]["autoattachSerialConsole"] = False
    client.create(VM.from_dict(body), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    running(cluster)
    pod = launcher(client, cluster.get("VirtualMachineInstance", VM_NAME, NS)["metadata"]["uid"])
    assert not pod.spec.initContainers
    code, _type, text = log(client, pod.metadata.name, container="guest-console-log")
    assert code == 400 and "is not valid for pod" in text
