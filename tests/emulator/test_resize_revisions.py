"""What KubeVirt does when a VM's instancetype matcher changes (a resize and its revert): a new
ControllerRevision per name, the old one kept; ``revisionName`` wins even when the instancetype is gone;
the mutator refuses a name change that keeps a non-empty revisionName; a DataVolume's claim grows."""

from __future__ import annotations

import json

from openkeel_compute.controller.kube import http_of
from tests.emulator.conftest import CIT, CPREF, NS, VM, instancetype, preference, server_vm

VM_NAME = server_vm()["metadata"]["name"]
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


def _patch(client, path: str, ops: list) -> object:
    http = http_of(client)
    return http.patch(path, content=json.dumps(ops).encode(), headers=JSON_PATCH)


def _vm_path(name: str = VM_NAME) -> str:
    return f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/{name}"


def _ref(cluster):
    return cluster.wait_for("VirtualMachine", VM_NAME, NS,
                            lambda o: "instancetypeRef" in ((o or {}).get("status") or {}))["status"]["instancetypeRef"]


def test_a_name_change_stores_a_new_revision_and_revision_name_brings_the_old_back(cluster, client):
    client.create(CIT.from_dict(instancetype()))
    client.create(CIT.from_dict(instancetype("m1.large", cpus=2, memory="1Gi")))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    old = _ref(cluster)
    small = cluster.get("VirtualMachineClusterInstancetype", "m1.small")
    assert old["controllerRevisionRef"]["name"] == (
        f"{VM_NAME}-m1.small-v1beta1-{small['metadata']['uid']}-{small['metadata'].get('generation', 1)}")
    matcher = cluster.get("VirtualMachine", VM_NAME, NS)["spec"]["instancetype"]
    got = _patch(client, _vm_path(), [{"op": "test", "path": "/spec/instancetype", "value": matcher},
                                      {"op": "replace", "path": "/spec/instancetype",
                                       "value": {"kind": matcher["kind"], "name": "m1.large"}}])
    assert got.status_code == 200, got.text
    new = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o["status"]["instancetypeRef"]["name"]
                           == "m1.large")["status"]["instancetypeRef"]
    assert new["controllerRevisionRef"]["name"] != old["controllerRevisionRef"]["name"]
    assert cluster.get("ControllerRevision", old["controllerRevisionRef"]["name"], NS)  # kept for a revert
    # the old instancetype goes; its revision is all a revert needs
    client.delete(CIT, "m1.small")
    revert = {"kind": matcher["kind"], "name": "m1.small", "revisionName": old["controllerRevisionRef"]["name"]}
    got = _patch(client, _vm_path(), [{"op": "replace", "path": "/spec/instancetype", "value": revert}])
    assert got.status_code == 200, got.text
    back = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o["status"]["instancetypeRef"]["name"]
                            == "m1.small")
    assert back["status"]["instancetypeRef"]["controllerRevisionRef"]["name"] == old["controllerRevisionRef"]["name"]
    assert not any(c["type"] == "Failure" for c in back["status"].get("conditions") or ())
    # a name change that keeps the pinned revision is refused; changing both is accepted
    got = _patch(client, _vm_path(), [{"op": "replace", "path": "/spec/instancetype/name", "value": "m1.large"}])
    assert got.status_code == 422, got.text
    assert "the Matcher Name has been updated without updating the RevisionName" in got.json()["message"]
    got = _patch(client, _vm_path(), [{"op": "replace", "path": "/spec/instancetype",
                                       "value": {"kind": matcher["kind"], "name": "m1.large"}}])
    assert got.status_code == 200, got.text


def test_a_datavolume_has_its_claim_and_the_claim_grows(cluster, client):
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    claim = cluster.wait_for("PersistentVolumeClaim", f"{VM_NAME}-root", NS, lambda o: o is not None)
    size = claim["spec"]["resources"]["requests"]["storage"]
    assert claim["status"]["capacity"]["storage"] == size
    assert claim["metadata"]["ownerReferences"][0]["kind"] == "DataVolume"
    http = http_of(client)
    got = http.patch(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{VM_NAME}-root",
                     content=json.dumps({"spec": {"resources": {"requests": {"storage": "7Gi"}}}}).encode(),
                     headers={"Content-Type": "application/merge-patch+json"})
    assert got.status_code == 200, got.text
    cluster.wait_for("PersistentVolumeClaim", f"{VM_NAME}-root", NS,
                     lambda o: o["status"]["capacity"]["storage"] == "7Gi")
