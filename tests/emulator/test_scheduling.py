"""The emulated scheduler: a VMI's pod goes to a Ready node its node selector and required node
affinity allow (a pinned server lands on its node), or waits Unschedulable with kube-scheduler's words."""

from __future__ import annotations

import pytest

from openkeel_compute.emulator import scheduling
from openkeel_compute.emulator.server import node
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
    server_vm,
)


def _affinity(*terms) -> dict:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def _on(key, operator, *values) -> dict:
    expression = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


NODES = [node("n-a1", zone="az-a"), node("n-b1", zone="az-b"), node("n-down", zone="az-a", ready=False),
         node("plain")]


@pytest.mark.parametrize(("spec", "chosen"), [
    ({}, "n-a1"),  # anything Ready, by name
    (_affinity({"matchExpressions": [_on("kubernetes.io/hostname", "In", "plain")]}), "plain"),
    (_affinity({"matchExpressions": [_on("topology.kubernetes.io/zone", "In", "az-b")]}), "n-b1"),
    (_affinity({"matchExpressions": [_on("topology.kubernetes.io/zone", "DoesNotExist")]}), "plain"),
    (_affinity({"matchExpressions": [_on("topology.kubernetes.io/zone", "In", "az-x")]},
               {"matchExpressions": [_on("kubernetes.io/hostname", "In", "n-b1")]}), "n-b1"),  # terms: any
    (_affinity({"matchFields": [_on("metadata.name", "In", "plain")]}), "plain"),
    ({"nodeSelector": {"topology.kubernetes.io/zone": "az-b"}}, "n-b1"),
    (_affinity({"matchExpressions": [_on("openkeel.io/trait.X", "NotIn", "true")]}), "n-a1"),
])
def test_the_pod_goes_to_a_ready_node_that_fits(spec, chosen):
    assert scheduling.choose(spec, NODES) == (chosen, "")


@pytest.mark.parametrize(("spec", "message"), [
    (_affinity({"matchExpressions": [_on("kubernetes.io/hostname", "In", "nowhere")]}),
     ("0/4 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 3 node(s) "
      "didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not "
      "helpful for scheduling.")),  # kube-scheduler sorts its reasons
    (_affinity({"matchExpressions": [_on("kubernetes.io/hostname", "In", "n-a1"),
                                     _on("kubernetes.io/hostname", "In", "n-b1")]}), None),  # both must hold
    (_affinity({"matchExpressions": [_on("kubernetes.io/hostname", "In", "n-down")]}), None),  # not Ready
])
def test_no_node_fits(spec, message):
    target, why = scheduling.choose(spec, NODES)
    assert target is None and why.startswith("0/4 nodes are available:")
    if message:
        assert why == message


def test_a_vmi_pinned_to_a_missing_node_waits_unschedulable_then_lands_when_the_node_comes(cluster, client):
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    vm = server_vm()
    vm["spec"]["template"]["spec"].update(_affinity({"matchExpressions": [_on("kubernetes.io/hostname", "In",
                                                                               "n-late")]}))
    client.create(VM.from_dict(vm), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "ErrorUnschedulable")
    vmi = cluster.get("VirtualMachineInstance", VM_NAME, NS)
    assert phase(vmi) == "Scheduling"
    cond = next(c for c in vmi["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["reason"] == "Unschedulable" and "didn't match Pod's node affinity/selector" in cond["message"]
    cluster.seed(node("n-late"))
    running = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: phase(o) == "Running")
    assert running["status"]["nodeName"] == "n-late"
    assert running["metadata"]["labels"]["kubevirt.io/nodeName"] == "n-late"


def test_deleting_a_node_fails_its_vmis_as_kubevirt_does_and_manual_restarts_nothing(cluster, client):
    from lightkube.resources.core_v1 import Node, Pod

    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    cluster.seed(node("n-doomed"))
    vm = server_vm()
    vm["spec"]["template"]["spec"].update(_affinity({"matchExpressions": [_on("kubernetes.io/hostname", "In",
                                                                               "n-doomed")]}))
    client.create(VM.from_dict(vm), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    running = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: phase(o) == "Running")
    assert running["status"]["nodeName"] == "n-doomed"
    assert [p.spec.nodeName for p in client.list(Pod, namespace=NS)] == ["n-doomed"]

    client.delete(Node, "n-doomed")  # DELETE /api/v1/nodes/n-doomed

    assert cluster.get("Node", "n-doomed") is None
    failed = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: phase(o) == "Failed")
    # the pod garbage collector removed the launcher pod; KubeVirt's VMI controller failed the VMI
    # without a reason (that is the node controller's NodeUnresponsive, for a node that stops answering)
    assert list(client.list(Pod, namespace=NS)) == []
    assert "reason" not in failed["status"] and failed["status"]["nodeName"] == "n-doomed"
    ready = next(c for c in failed["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodNotExists")
    stopped = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Stopped")
    assert next(c for c in stopped["status"]["conditions"] if c["type"] == "Ready")["reason"] == "PodNotExists"
    cluster.lifecycle.step()
    again = cluster.get("VirtualMachineInstance", VM_NAME, NS)
    assert again["metadata"]["uid"] == failed["metadata"]["uid"] and phase(again) == "Failed"  # Manual: no restart


def test_deleting_a_node_leaves_the_vmis_of_other_nodes_running(cluster, client):
    from lightkube.resources.core_v1 import Node

    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    cluster.seed(node("n-other"))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    before = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: phase(o) == "Running")
    assert before["status"]["nodeName"] != "n-other"
    client.delete(Node, "n-other")
    cluster.lifecycle.step()
    after = cluster.get("VirtualMachineInstance", VM_NAME, NS)
    assert phase(after) == "Running" and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
