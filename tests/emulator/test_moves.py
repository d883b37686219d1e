"""Moves on the built-in cluster, over HTTP as the controller will drive them: KubeVirt's LiveMigratable rule,
VirtualMachineInstanceMigration through its phases (vm/migrate, addedNodeSelector, abort, post-copy by
MigrationPolicy, an unschedulable target), a node lost during a migration, cordoned and NotReady nodes, pod
(anti-)affinity."""

from __future__ import annotations

import httpx2 as httpx
import pytest
from lightkube import ApiError
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from openkeel_compute.controller.kube import make_client
from openkeel_compute.emulator import Delays, Emulator, Fault
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
    server_vm,
)

VMIM = create_namespaced_resource("kubevirt.io", "v1", "VirtualMachineInstanceMigration",
                                  "virtualmachineinstancemigrations")
POLICY = create_global_resource("migrations.kubevirt.io", "v1alpha1", "MigrationPolicy", "migrationpolicies")


@pytest.fixture
def nodes3():
    emulator = Emulator(delays=Delays.fast(), tick=0.01, nodes=3, read_images=False).start()  # image URLs never served
    emulator.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"tier": "gold"}}})
    client = make_client(emulator.kubeconfig(), timeout=5)
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    yield emulator, client
    client.close()
    emulator.stop()


def shared_vm(name: str = VM_NAME, **template_spec) -> dict:
    """A server's VM whose root disk is shared (ReadWriteMany), hence live-migratable."""
    vm = server_vm(name)
    vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["accessModes"] = ["ReadWriteMany"]
    vm["spec"]["template"]["spec"].update(template_spec)
    return vm


def start(cluster, client, vm: dict) -> dict:
    name = vm["metadata"]["name"]
    cluster.seed(header_secret(name))
    client.create(VM.from_dict(vm), namespace=NS)
    assert put(client, "virtualmachines", name, "start").status_code == 202
    return cluster.wait_for("VirtualMachineInstance", name, NS, lambda o: phase(o) == "Running")


def _cond(obj, type_):
    return next((c for c in (obj or {}).get("status", {}).get("conditions") or () if c["type"] == type_), None)


def _migration(cluster):
    found = list(cluster.objects("VirtualMachineInstanceMigration").values())
    assert len(found) == 1
    return found[0]


def test_a_vm_on_a_claim_that_is_not_shared_is_not_live_migratable(nodes3):
    cluster, client = nodes3
    vm = server_vm()  # a claim that asks for ReadWriteOnce (the built-in StorageProfile would give ReadWriteMany)
    vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["accessModes"] = ["ReadWriteOnce"]
    vmi = start(cluster, client, vm)
    cond = _cond(vmi, "LiveMigratable")
    message = (f"cannot migrate VMI: PVC {VM_NAME}-root is not shared, live migration requires that all PVCs must "
               "be shared (using ReadWriteMany access mode)")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "DisksNotLiveMigratable", message)
    assert vmi["status"]["migrationMethod"] == "BlockMigration"
    answer = put(client, "virtualmachines", VM_NAME, "migrate")
    assert answer.status_code == 500
    assert answer.json()["message"] == ('Internal error occurred: admission webhook "migration-create-validator.'
                                        'kubevirt.io" denied the request: Cannot migrate VMI, Reason: '
                                        f"DisksNotLiveMigratable, Message: {message}")
    with pytest.raises(ApiError) as caught:
        client.create(VMIM.from_dict({"metadata": {"name": "m"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)
    assert caught.value.status.code == 400
    assert cluster.objects("VirtualMachineInstanceMigration") == {}


def test_a_live_migration_goes_through_every_phase_and_moves_the_vmi(nodes3):
    cluster, client = nodes3
    cluster.lifecycle.delays = Delays(**{**Delays.fast().__dict__, "migration_step": 0.15,
                                         "migration_transfer": 0.3, "scheduling": 0.15})
    vmi = start(cluster, client, shared_vm())
    assert _cond(vmi, "LiveMigratable")["status"] == "True" and vmi["status"]["migrationMethod"] == "LiveMigration"
    source_node, source_ip = vmi["status"]["nodeName"], vmi["status"]["interfaces"][0]["ipAddress"]
    source_pod = next(iter(vmi["status"]["activePods"]))
    assert put(client, "virtualmachines", VM_NAME, "migrate",
               {"addedNodeSelector": {"kubernetes.io/hostname": "emulated-node-3"}}).status_code == 202
    migration = _migration(cluster)
    assert migration["metadata"]["generateName"] == "kubevirt-migrate-vm-"
    assert migration["metadata"]["labels"] == {"kubevirt.io/vmi-name": VM_NAME}
    assert migration["metadata"]["finalizers"] == ["kubevirt.io/migrationJobFinalize"]
    assert migration["spec"] == {"vmiName": VM_NAME, "addedNodeSelector": {"kubernetes.io/hostname":
                                                                            "emulated-node-3"}}
    name = migration["metadata"]["name"]
    seen, printed = [], set()

    def watch(o):
        if o and o.get("status", {}).get("phase") and (not seen or seen[-1] != o["status"]["phase"]):
            seen.append(o["status"]["phase"])
        printed.add(printable(cluster.get("VirtualMachine", VM_NAME, NS)))
        return o and o.get("status", {}).get("phase") == "Succeeded"

    done = cluster.wait_for("VirtualMachineInstanceMigration", name, NS, watch)
    assert seen == ["Pending", "Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running", "Succeeded"]
    assert "Migrating" in printed
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: o["status"]["nodeName"] != source_node)
    state = vmi["status"]["migrationState"]
    assert state["sourceNode"] == source_node and state["targetNode"] == "emulated-node-3"
    assert state["completed"] is True and "failed" not in state and state["mode"] == "PreCopy"
    assert state["migrationUid"] == done["metadata"]["uid"] and state["startTimestamp"] and state["endTimestamp"]
    assert state["migrationConfiguration"]["completionTimeoutPerGiB"] == 150
    assert state["targetNodeAddress"] and state["targetNodeDomainDetected"] is True
    assert vmi["status"]["nodeName"] == "emulated-node-3"
    assert vmi["metadata"]["labels"]["kubevirt.io/nodeName"] == "emulated-node-3"
    assert "kubevirt.io/migrationTargetNodeName" not in vmi["metadata"]["labels"]
    assert source_pod not in vmi["status"]["activePods"]
    assert vmi["status"]["interfaces"][0]["ipAddress"] != source_ip  # the target pod's address
    pods = {p.metadata.uid: p for p in client.list(Pod, namespace=NS)}
    assert pods[source_pod].status.phase == "Succeeded"
    assert [p.spec.nodeName for p in pods.values() if p.status.phase == "Running"] == ["emulated-node-3"]
    final = cluster.wait_for("VirtualMachineInstanceMigration", name, NS, lambda o: not o["metadata"].get(
        "finalizers"))
    assert final["status"]["migrationState"]["completed"] is True
    assert printable(cluster.get("VirtualMachine", VM_NAME, NS)) == "Running"
    # the guest still answers its subresources where it runs now
    assert put(client, "virtualmachineinstances", VM_NAME, "pause").status_code == 202


def test_the_migration_webhooks(nodes3):
    cluster, client = nodes3
    start(cluster, client, shared_vm())
    cluster.lifecycle.delays = Delays(**{**Delays.fast().__dict__, "migration_transfer": 30.0})
    with pytest.raises(ApiError) as caught:
        client.create(VMIM.from_dict({"metadata": {"name": "m"}, "spec": {}}), namespace=NS)
    assert (caught.value.status.code, caught.value.status.message) == (
        422, 'admission webhook "migration-create-validator.kubevirt.io" denied the request: vmiName is missing')
    with pytest.raises(ApiError) as caught:
        client.create(VMIM.from_dict({"metadata": {"name": "m"}, "spec": {"vmiName": "nope"}}), namespace=NS)
    assert caught.value.status.message.endswith(f'the VMI "{NS}/nope" does not exist')
    first = client.create(VMIM.from_dict({"metadata": {"name": "first"}, "spec": {"vmiName": VM_NAME}}),
                          namespace=NS)
    with pytest.raises(ApiError) as caught:
        client.create(VMIM.from_dict({"metadata": {"name": "second"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)
    assert caught.value.status.message.endswith(
        f"in-flight migration detected. Active migration job ({first.metadata.uid}) is currently already in "
        f"progress for VMI {VM_NAME}.")
    with pytest.raises(ApiError) as caught:
        client.patch(VMIM, "first", {"spec": {"addedNodeSelector": {"a": "b"}}}, namespace=NS,
                     patch_type=PatchType.MERGE)
    assert caught.value.status.message == ('admission webhook "migration-update-validator.kubevirt.io" denied the '
                                           "request: update of Migration object's spec is restricted")


def test_deleting_a_running_migration_aborts_it_and_the_vmi_stays(nodes3):
    cluster, client = nodes3
    vmi = start(cluster, client, shared_vm())
    source = vmi["status"]["nodeName"]
    cluster.lifecycle.delays = Delays(**{**Delays.fast().__dict__, "migration_transfer": 60.0})
    client.create(VMIM.from_dict({"metadata": {"name": "m"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)
    cluster.wait_for("VirtualMachineInstanceMigration", "m", NS, lambda o: phase(o) == "Running")
    client.delete(VMIM, "m", namespace=NS)
    aborted = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: o["status"]["migrationState"].get(
        "abortStatus") == "Succeeded")
    state = aborted["status"]["migrationState"]
    assert state["abortRequested"] is True and state["failed"] is True and state["completed"] is True
    assert state["failureReason"] == "Live migration has been aborted"
    cluster.wait_for("VirtualMachineInstanceMigration", "m", NS, lambda o: o is None)
    vmi = cluster.get("VirtualMachineInstance", VM_NAME, NS)
    assert vmi["status"]["nodeName"] == source and phase(vmi) == "Running"
    assert len(vmi["status"]["activePods"]) == 1
    assert [p.spec.nodeName for p in client.list(Pod, namespace=NS)] == [source]  # the target pod went
    assert printable(cluster.get("VirtualMachine", VM_NAME, NS)) == "Running"


def test_a_migration_that_does_not_converge_switches_to_post_copy_when_its_policy_allows_it(nodes3):
    cluster, client = nodes3
    start(cluster, client, shared_vm())
    cluster.inject(Fault(kind="migration-stall", name=VM_NAME))
    client.create(VMIM.from_dict({"metadata": {"name": "stuck"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)
    # once final, the migration keeps the VMI's migration state (on the controller's next pass)
    failed = cluster.wait_for("VirtualMachineInstanceMigration", "stuck", NS, lambda o: phase(o) == "Failed" and not
                              o["metadata"].get("finalizers"))
    assert failed["status"]["migrationState"]["failureReason"] == "Live migration has been aborted"
    client.create(POLICY.from_dict({"metadata": {"name": "gold"}, "spec": {
        "allowPostCopy": True, "completionTimeoutPerGiB": 10,
        "selectors": {"namespaceSelector": {"tier": "gold"}}}}))
    modes = set()
    client.create(VMIM.from_dict({"metadata": {"name": "post"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)
    done = cluster.wait_for("VirtualMachineInstanceMigration", "post", NS, lambda o: (modes.add(
        (cluster.get("VirtualMachineInstance", VM_NAME, NS)["status"].get("migrationState") or {}).get("mode")),
        phase(o) == "Succeeded" and not o["metadata"].get("finalizers"))[1])
    assert "PostCopy" in modes
    state = done["status"]["migrationState"]
    assert state["migrationPolicyName"] == "gold"
    assert state["migrationConfiguration"]["allowPostCopy"] is True
    assert state["migrationConfiguration"]["completionTimeoutPerGiB"] == 10


def test_a_target_that_cannot_be_scheduled_fails_the_migration_after_kubevirts_timeout(cluster, client):
    # one node only: the target pod must not land where the VMI's own pod runs
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    start(cluster, client, shared_vm())
    cluster.lifecycle.delays = Delays(**{**Delays.fast().__dict__, "migration_unschedulable": 0.6})
    client.create(VMIM.from_dict({"metadata": {"name": "nowhere"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)

    def target(_o):
        pods = [p for p in cluster.objects("Pod").values() if "kubevirt.io/migrationJobUID" in p["metadata"]["labels"]]
        return pods[0] if pods and (_cond(pods[0], "PodScheduled") or {}).get("reason") == "Unschedulable" else None

    cluster.wait_for("VirtualMachineInstanceMigration", "nowhere", NS, target)
    pod = target(None)
    assert _cond(pod, "PodScheduled")["message"] == (
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules. preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling.")
    assert phase(cluster.get("VirtualMachineInstanceMigration", "nowhere", NS)) == "Scheduling"
    cluster.wait_for("VirtualMachineInstanceMigration", "nowhere", NS, lambda o: o is None or phase(o) == "Failed")
    assert not [p for p in cluster.objects("Pod").values() if "kubevirt.io/migrationJobUID" in p["metadata"]["labels"]]
    assert phase(cluster.get("VirtualMachineInstance", VM_NAME, NS)) == "Running"


def test_the_scheduler_keeps_off_cordoned_nodes_and_honours_pod_anti_affinity(nodes3):
    cluster, client = nodes3
    client.patch(Node, "emulated-node-1", {"spec": {"unschedulable": True}}, patch_type=PatchType.MERGE)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"openkeel.io/group": "g1"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    names = [f"0b1c2d3e-0000-4000-8000-00000000010{i}" for i in range(3)]
    for name in names:
        vm = shared_vm(name, affinity=anti)
        vm["spec"]["template"]["metadata"]["labels"]["openkeel.io/group"] = "g1"
        cluster.seed(header_secret(name))
        client.create(VM.from_dict(vm), namespace=NS)
    for name in names:  # all at once: the scheduler sees each pod it bound
        put(client, "virtualmachines", name, "start")
    placed = [cluster.wait_for("VirtualMachineInstance", n, NS, lambda o: phase(o) in ("Running", "Scheduling")
                               and (phase(o) == "Running" or _cond(o, "PodScheduled"))) for n in names]
    running = sorted(v["status"]["nodeName"] for v in placed if phase(v) == "Running")
    assert running == ["emulated-node-2", "emulated-node-3"]
    waiting = next(v for v in placed if phase(v) == "Scheduling")
    assert _cond(waiting, "PodScheduled")["message"] == (
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match pod anti-affinity rules. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    client.patch(Node, "emulated-node-1", {"spec": {"unschedulable": False}}, patch_type=PatchType.MERGE)  # uncordon: the third lands
    last = cluster.wait_for("VirtualMachineInstance", waiting["metadata"]["name"], NS, lambda o: phase(o) == "Running")
    assert last["status"]["nodeName"] == "emulated-node-1"


def test_preferred_affinity_gathers_and_required_affinity_follows(nodes3):
    cluster, client = nodes3
    lead = start(cluster, client, shared_vm("0b1c2d3e-0000-4000-8000-000000000201", nodeSelector={
        "kubernetes.io/hostname": "emulated-node-2"}))
    assert lead["status"]["nodeName"] == "emulated-node-2"
    follow = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"openkeel.io/server-id": lead["metadata"]["name"]}},
        "topologyKey": "kubernetes.io/hostname"}]}}
    near = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"openkeel.io/server-id": lead["metadata"]["name"]}},
        "topologyKey": "kubernetes.io/hostname"}}]}}
    one = start(cluster, client, shared_vm("0b1c2d3e-0000-4000-8000-000000000202", affinity=follow))
    two = start(cluster, client, shared_vm("0b1c2d3e-0000-4000-8000-000000000203", affinity=near))
    assert one["status"]["nodeName"] == two["status"]["nodeName"] == "emulated-node-2"


def test_a_node_that_stops_being_ready(nodes3):
    cluster, client = nodes3
    cluster.lifecycle.delays = Delays(**{**Delays.fast().__dict__, "pod_eviction": 0.3, "heartbeat_timeout": 0.5})
    vmi = start(cluster, client, shared_vm(nodeSelector={"kubernetes.io/hostname": "emulated-node-2"}))
    pod_name = next(p.metadata.name for p in client.list(Pod, namespace=NS))
    answer = httpx.post(f"{cluster.url}/emulator/v1/faults", json={"kind": "node-not-ready",
                                                                   "name": "emulated-node-2"})
    assert answer.status_code == 201 and answer.json()["affected"] == 1
    node = cluster.wait_for("Node", "emulated-node-2", None, lambda o: o["spec"].get("taints"))
    assert {(t["key"], t["effect"]) for t in node["spec"]["taints"]} == {
        ("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute")}
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: _cond(o, "Ready")["status"] == "False")
    assert phase(vmi) == "Running"
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS,
                           lambda o: _cond(o, "Ready").get("reason") == "PodTerminating")
    assert _cond(vmi, "Ready")["message"] == "virt-launcher pod is terminating" and phase(vmi) == "Running"
    cluster.wait_for("Node", "emulated-node-2", None,
                     lambda o: o["metadata"]["labels"]["kubevirt.io/schedulable"] == "false")
    assert client.get(Pod, pod_name, namespace=NS).metadata.deletionTimestamp  # stuck Terminating
    # a graceful delete changes nothing; the operator declares the node out of service
    client.delete(Pod, pod_name, namespace=NS)
    assert client.get(Pod, pod_name, namespace=NS)
    client.patch(Node, "emulated-node-2", {"spec": {"taints": [
        *node["spec"]["taints"], {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
                                  "effect": "NoExecute"}]}}, patch_type=PatchType.MERGE)
    failed = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: phase(o) == "Failed")
    assert (_cond(failed, "Ready")["reason"], "reason" in failed["status"]) == ("PodNotExists", False)
    assert printable(cluster.get("VirtualMachine", VM_NAME, NS)) == "Stopped"
    # back: Kubernetes lifts its taints (the operator's stays until removed), KubeVirt schedules there again
    cluster.set_node_ready("emulated-node-2", True)
    node = cluster.wait_for("Node", "emulated-node-2", None, lambda o: all(
        t["key"] == "node.kubernetes.io/out-of-service" for t in o["spec"].get("taints") or ()))
    assert node["metadata"]["labels"]["kubevirt.io/schedulable"] == "true"


def test_a_vmi_deleted_on_a_node_that_is_down_waits_for_its_pod(nodes3):
    cluster, client = nodes3
    start(cluster, client, shared_vm(nodeSelector={"kubernetes.io/hostname": "emulated-node-3"}))
    cluster.set_node_ready("emulated-node-3", "Unknown")
    node = cluster.wait_for("Node", "emulated-node-3", None, lambda o: o["spec"].get("taints"))
    assert {t["key"] for t in node["spec"]["taints"]} == {"node.kubernetes.io/unreachable"}
    assert put(client, "virtualmachines", VM_NAME, "stop").status_code == 202
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: o["metadata"].get("deletionTimestamp"))
    pod = next(p for p in client.list(Pod, namespace=NS))
    cluster.wait_for("Pod", pod.metadata.name, NS, lambda o: o["metadata"].get("deletionTimestamp"))
    assert cluster.get("VirtualMachineInstance", VM_NAME, NS)["metadata"]["uid"] == vmi["metadata"]["uid"]
    assert printable(cluster.get("VirtualMachine", VM_NAME, NS)) == "Stopping"
    httpx.request("DELETE", f"{cluster.url}/api/v1/namespaces/{NS}/pods/{pod.metadata.name}",
                  json={"gracePeriodSeconds": 0})  # kubectl delete pod --force --grace-period=0
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: o is None)
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Stopped")


def test_a_migration_under_way_goes_on_after_a_restart(kept):
    slow = Delays(**{**Delays.fast().__dict__, "migration_transfer": 1.0})
    cluster = kept(delays=slow, nodes=2)
    client = make_client(cluster.kubeconfig(), timeout=5)
    cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    vmi = start(cluster, client, shared_vm())
    client.create(VMIM.from_dict({"metadata": {"name": "m"}, "spec": {"vmiName": VM_NAME}}), namespace=NS)
    cluster.wait_for("VirtualMachineInstanceMigration", "m", NS, lambda o: phase(o) == "Running")
    client.close()
    cluster.stop()

    again = kept(delays=slow, nodes=2)
    done = again.wait_for("VirtualMachineInstanceMigration", "m", NS, lambda o: phase(o) == "Succeeded")
    moved = again.get("VirtualMachineInstance", VM_NAME, NS)
    assert moved["status"]["nodeName"] != vmi["status"]["nodeName"]
    assert moved["status"]["migrationState"]["migrationUid"] == done["metadata"]["uid"]
    assert again.lifecycle.launchers.pod_of(moved)["spec"]["nodeName"] == moved["status"]["nodeName"]


def _running_migration(cluster, client, transfer: float):
    """A VM migrating to emulated-node-3, caught in Running; (its source node, the migration's name)."""
    vmi = start(cluster, client, shared_vm())
    cluster.lifecycle.delays = Delays(**{**Delays.fast().__dict__, "migration_transfer": transfer})
    assert put(client, "virtualmachines", VM_NAME, "migrate",
               {"addedNodeSelector": {"kubernetes.io/hostname": "emulated-node-3"}}).status_code == 202
    name = _migration(cluster)["metadata"]["name"]
    cluster.wait_for("VirtualMachineInstanceMigration", name, NS, lambda o: (o.get("status") or {}).get("phase") == "Running")
    return vmi["status"]["nodeName"], name


def test_a_target_node_lost_while_running_stalls_the_transfer_and_the_source_aborts_it(nodes3):
    cluster, client = nodes3
    source, name = _running_migration(cluster, client, 1.0)
    assert cluster.set_node_ready("emulated-node-3", "Unknown")
    failed = cluster.wait_for("VirtualMachineInstanceMigration", name, NS,
                              lambda o: (o.get("status") or {}).get("phase") in ("Failed", "Succeeded"))
    assert failed["status"]["phase"] == "Failed"
    state = cluster.get("VirtualMachineInstance", VM_NAME, NS)["status"]
    assert (state["nodeName"], state["migrationState"]["failed"], state["migrationState"]["abortStatus"],
            state["migrationState"]["failureReason"]) == (source, True, "Succeeded", "Live migration has been aborted")
    assert list(state["activePods"].values()) == [source]


def test_a_target_pod_gone_while_running_fails_the_migration(nodes3):
    cluster, client = nodes3
    source, name = _running_migration(cluster, client, 30.0)
    state = cluster.get("VirtualMachineInstance", VM_NAME, NS)["status"]["migrationState"]
    client.delete(Pod, state["targetPod"], namespace=NS, grace_period=0)
    failed = cluster.wait_for("VirtualMachineInstanceMigration", name, NS,
                              lambda o: (o.get("status") or {}).get("phase") in ("Failed", "Succeeded"))
    assert failed["status"]["phase"] == "Failed"
    assert cluster.get("VirtualMachineInstance", VM_NAME, NS)["status"]["nodeName"] == source


def test_a_source_node_lost_while_running_freezes_the_migration_until_the_vmi_fails(nodes3):
    cluster, client = nodes3
    source, name = _running_migration(cluster, client, 0.3)
    assert cluster.set_node_ready(source, "Unknown")
    with pytest.raises(AssertionError):  # longer than the transfer: its virt-handler reports nothing
        cluster.wait_for("VirtualMachineInstanceMigration", name, NS,
                         lambda o: (o.get("status") or {}).get("phase") != "Running", timeout=1.5)
    client.delete(VMIM, name, namespace=NS)  # an abort waits for the source's virt-handler too
    with pytest.raises(AssertionError):
        cluster.wait_for("VirtualMachineInstanceMigration", name, NS,
                         lambda o: (o.get("status") or {}).get("phase") != "Running", timeout=0.5)
    node = cluster.get("Node", source)
    client.patch(Node, source, {"spec": {"taints": [*node["spec"].get("taints", []), {
        "key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}},
        patch_type=PatchType.MERGE)
    ended = cluster.wait_for("VirtualMachineInstanceMigration", name, NS, lambda o: o is None or (
        o.get("status") or {}).get("phase") in ("Failed", "Succeeded"))
    assert ended is None or ended["status"]["phase"] == "Failed"  # failed, and gone once its abort was asked
    assert phase(cluster.get("VirtualMachineInstance", VM_NAME, NS)) == "Failed"
