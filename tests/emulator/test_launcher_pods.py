"""Launcher pods and the guest console log: found by label, one per VMI, a log read through pods/NAME/log."""

from __future__ import annotations

import pytest
from lightkube.resources.core_v1 import Pod

from openkeel_compute.controller.kube import http_of
from tests.emulator.conftest import (
    CIT,
    CPREF,
    NS,
    VM,
    VM_NAME,
    instancetype,
    phase,
    preference,
    put,
    running,
    server_vm,
)


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


def test_the_console_shows_each_vms_own_memory_cpus_and_root_disk(cluster, client):
    """Two flavors, two consoles: the kernel's memory map and total, the CPUs it brought up and the root
    disk's sectors are the VM's (the instancetype's guest memory and vCPUs, the root claim's size)."""
    import re

    from tests.emulator.conftest import header_secret

    sizes = {"small": (1, "512Mi", "1Gi"), "large": (4, "8Gi", "20Gi")}
    names = {}
    for index, (flavor, (cpus, memory, disk)) in enumerate(sizes.items()):
        client.create(CIT.from_dict(instancetype(flavor, cpus, memory)))
        client.create(CPREF.from_dict(preference(flavor)))
        name = f"0b1c2d3e-0000-4000-8000-00000000010{index}"
        body = server_vm(name, flavor)
        body["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["resources"]["requests"]["storage"] = disk
        cluster.seed(header_secret(name))
        client.create(VM.from_dict(body), namespace=NS)
        put(client, "virtualmachines", name, "start")
        names[flavor] = name
    consoles = {}
    for flavor, name in names.items():
        running(cluster, name)
        pod = launcher(client, cluster.get("VirtualMachineInstance", name, NS)["metadata"]["uid"]).metadata.name
        consoles[flavor] = log(client, pod, container="guest-console-log")[2]

    def memory_kib(text):
        available, total = map(int, re.search(r"Memory: (\d+)K/(\d+)K available", text).groups())
        assert available < total
        return total

    small, large = consoles["small"], consoles["large"]
    # the kernel counts the RAM less the firmware's holes (well under a MiB)
    assert 511 * 1024 < memory_kib(small) <= 512 * 1024
    assert 8191 * 1024 < memory_kib(large) <= 8192 * 1024
    assert "smpboot: Allowing 1 CPUs, 0 hotplug CPUs" in small and "smp: Brought up 1 node, 1 CPU\r\n" in small
    assert "smpboot: Allowing 4 CPUs, 0 hotplug CPUs" in large and "smp: Brought up 1 node, 4 CPUs\r\n" in large
    assert "[vda] 2097152 512-byte logical blocks (1.07 GB/1.00 GiB)" in small
    assert "[vda] 41943040 512-byte logical blocks (21.5 GB/20.0 GiB)" in large
    # below 4 GiB the map ends under the 512 MiB; 8 GiB needs memory above the 4 GiB hole
    assert "BIOS-e820: [mem 0x0000000000100000-0x000000001ffdbfff] usable" in small
    assert "BIOS-e820: [mem 0x0000000100000000-0x000000027fffffff] usable" in large
    assert "2096616K" not in small + large and "20971520 512-byte" not in small + large  # no fixed 2 GiB / 10 GiB
