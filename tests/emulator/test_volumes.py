"""Volumes on the built-in cluster, over HTTP as the controller will drive them: static PersistentVolumes and
claims bound by volumeName (release, reclaim, protection, expansion), declarative volume hotplug with its
volumeStatus phases, the addvolume/removevolume subresources, and what the guest sees."""

from __future__ import annotations

import copy

import httpx2 as httpx
import pytest
from lightkube import ApiError
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim
from lightkube.types import PatchType

from tests.emulator.conftest import NS, VM, VM_NAME, VMI, boot, put, running

VOLUME_ID = "5e1d0c2b-0000-4000-8000-0000000000aa"


def static_pv(name: str = f"cinder-{VOLUME_ID}", size: str = "1Gi", policy: str | None = None,
              source: dict | None = None) -> dict:
    """A Cinder rbd volume as ceph-csi's static volume."""
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
          "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                   "storageClassName": "",
                   **(source or {"csi": {"driver": "rbd.csi.ceph.com", "volumeHandle": f"volume-{VOLUME_ID}",
                                         "volumeAttributes": {"clusterID": "ceph", "pool": "volumes",
                                                              "staticVolume": "true", "imageFeatures": "layering"}}})}}
    if policy:
        pv["spec"]["persistentVolumeReclaimPolicy"] = policy
    return pv


def claim(name: str = f"vol-{VOLUME_ID}", volume: str | None = f"cinder-{VOLUME_ID}", size: str = "1Gi") -> dict:
    spec = {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block", "storageClassName": "",
            "resources": {"requests": {"storage": size}}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
            "spec": spec}


def _pv(cluster, name=f"cinder-{VOLUME_ID}"):
    return cluster.get("PersistentVolume", name)


def _pvc(cluster, name=f"vol-{VOLUME_ID}"):
    return cluster.get("PersistentVolumeClaim", name, NS)


def _phase(obj):
    return ((obj or {}).get("status") or {}).get("phase")


def test_a_static_volume_and_its_claim_bind_by_volume_name_and_the_volume_is_released_after(cluster, client):
    created = client.create(PersistentVolume.from_dict(static_pv()))
    assert created.metadata.finalizers == ["kubernetes.io/pv-protection"]
    assert created.spec.persistentVolumeReclaimPolicy == "Retain"
    cluster.wait_for("PersistentVolume", f"cinder-{VOLUME_ID}", None, lambda o: _phase(o) == "Available")
    client.create(PersistentVolumeClaim.from_dict(claim()), namespace=NS)
    pvc = cluster.wait_for("PersistentVolumeClaim", f"vol-{VOLUME_ID}", NS, lambda o: _phase(o) == "Bound")
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert pvc["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes"}
    assert pvc["status"]["capacity"] == {"storage": "1Gi"} and pvc["status"]["accessModes"] == ["ReadWriteOnce"]
    pv = _pv(cluster)
    assert _phase(pv) == "Bound"
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    assert (pv["spec"]["claimRef"]["namespace"], pv["spec"]["claimRef"]["name"]) == (NS, f"vol-{VOLUME_ID}")
    assert pv["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    # deleting a bound volume waits for its claim
    client.delete(PersistentVolume, f"cinder-{VOLUME_ID}")
    client.delete(PersistentVolumeClaim, f"vol-{VOLUME_ID}", namespace=NS)
    cluster.wait_for("PersistentVolumeClaim", f"vol-{VOLUME_ID}", NS, lambda o: o is None)
    cluster.wait_for("PersistentVolume", f"cinder-{VOLUME_ID}", None, lambda o: o is None)


def test_retain_keeps_a_released_volume_and_delete_deletes_it_or_fails(cluster, client):
    client.create(PersistentVolume.from_dict(static_pv()))
    client.create(PersistentVolume.from_dict(static_pv("gone", policy="Delete")))
    client.create(PersistentVolume.from_dict(static_pv("stuck", policy="Delete", source={
        "nfs": {"server": "192.0.2.5", "path": "/exports/stuck"}})))
    for pvc, pv in ((f"vol-{VOLUME_ID}", f"cinder-{VOLUME_ID}"), ("b", "gone"), ("c", "stuck")):
        client.create(PersistentVolumeClaim.from_dict(claim(pvc, pv)), namespace=NS)
        cluster.wait_for("PersistentVolumeClaim", pvc, NS, lambda o: _phase(o) == "Bound")
        client.delete(PersistentVolumeClaim, pvc, namespace=NS)
    kept = cluster.wait_for("PersistentVolume", f"cinder-{VOLUME_ID}", None, lambda o: _phase(o) == "Released")
    assert kept["spec"]["claimRef"]["name"] == f"vol-{VOLUME_ID}"
    cluster.wait_for("PersistentVolume", "gone", None, lambda o: o is None)
    failed = cluster.wait_for("PersistentVolume", "stuck", None, lambda o: _phase(o) == "Failed")
    assert failed["status"]["message"] == ('error getting deleter volume plugin for volume "stuck": no deletable '
                                           "volume plugin matched")
    # a Released volume does not bind again
    client.create(PersistentVolumeClaim.from_dict(claim()), namespace=NS)
    cluster.wait_for("PersistentVolumeClaim", f"vol-{VOLUME_ID}", NS, lambda o: _phase(o) == "Pending")


def test_claims_that_cannot_bind_wait_and_one_without_a_volume_name_takes_the_smallest_match(cluster, client):
    client.create(PersistentVolume.from_dict(static_pv("small", size="1Gi")))
    client.create(PersistentVolume.from_dict(static_pv("large", size="10Gi")))
    client.create(PersistentVolumeClaim.from_dict(claim("too-big", "small", size="5Gi")), namespace=NS)
    client.create(PersistentVolumeClaim.from_dict(claim("missing", "no-such-volume")), namespace=NS)
    client.create(PersistentVolumeClaim.from_dict(claim("any", None, size="512Mi")), namespace=NS)
    bound = cluster.wait_for("PersistentVolumeClaim", "any", NS, lambda o: _phase(o) == "Bound")
    assert bound["spec"]["volumeName"] == "small"
    assert bound["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes",
                                                "pv.kubernetes.io/bound-by-controller": "yes"}
    for name in ("too-big", "missing"):
        assert _phase(cluster.wait_for("PersistentVolumeClaim", name, NS, lambda o: _phase(o) is not None)) == \
            "Pending"
    client.create(PersistentVolumeClaim.from_dict(claim("late", "small")), namespace=NS)  # bound to another
    cluster.wait_for("PersistentVolumeClaim", "late", NS, lambda o: _phase(o) == "Pending")


def test_the_api_servers_validation_of_volumes_and_claims(cluster, client):
    bad = static_pv("bad")
    del bad["spec"]["capacity"]
    bad["spec"]["nfs"] = {"server": "192.0.2.5"}
    answer = httpx.post(f"{cluster.url}/api/v1/persistentvolumes", json=bad)
    assert answer.status_code == 422
    assert answer.json()["message"] == ('PersistentVolume "bad" is invalid: [spec.capacity: Required value, '
                                        "spec.nfs: Forbidden: may not specify more than 1 volume type]")
    client.create(PersistentVolume.from_dict(static_pv()))
    client.create(PersistentVolumeClaim.from_dict(claim(size="1Gi")), namespace=NS)
    cluster.wait_for("PersistentVolumeClaim", f"vol-{VOLUME_ID}", NS, lambda o: _phase(o) == "Bound")
    with pytest.raises(ApiError) as caught:
        client.patch(PersistentVolumeClaim, f"vol-{VOLUME_ID}",
                     {"spec": {"resources": {"requests": {"storage": "512Mi"}}}}, namespace=NS)
    assert caught.value.status.code == 422
    assert caught.value.status.message == (f'PersistentVolumeClaim "vol-{VOLUME_ID}" is invalid: '
                                           "spec.resources.requests.storage: Forbidden: field can not be less "
                                           "than status.capacity")


# -- volumes on a running VM --------------------------------------------------------------------------

def _running_vm(cluster, client):
    boot(cluster, client)
    running(cluster)


def _hotplug(client, disk_bus: str = "scsi", serial: str = VOLUME_ID[:20], name: str = "data1") -> None:
    vm = client.get(VM, VM_NAME, namespace=NS).to_dict()
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["disks"].append({"name": name, "serial": serial, "disk": {"bus": disk_bus}})
    spec["volumes"].append({"name": name, "persistentVolumeClaim": {"claimName": f"vol-{VOLUME_ID}",
                                                                    "hotpluggable": True}})
    client.patch(VM, VM_NAME, [{"op": "replace", "path": "/spec/template/spec", "value": spec}], namespace=NS,
                 patch_type=PatchType.JSON)


def _status(vmi, name="data1"):
    return next((e for e in (vmi or {}).get("status", {}).get("volumeStatus") or () if e["name"] == name), None)


def _console(cluster) -> str:
    pod = next(p for p in cluster.objects("Pod").values() if p["metadata"]["name"].startswith("virt-launcher-"))
    return httpx.get(f"{cluster.url}/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log",
                     params={"container": "guest-console-log"}).text


def test_a_volume_hotplugged_through_the_vms_template_goes_through_every_phase_and_reaches_the_guest(cluster,
                                                                                                   client):
    cluster.lifecycle.delays = type(cluster.lifecycle.delays)(**{**cluster.lifecycle.delays.__dict__,
                                                                  "hotplug": 0.25})
    _running_vm(cluster, client)
    vmi = cluster.get("VirtualMachineInstance", VM_NAME, NS)
    root = _status(vmi, "root")
    assert root["target"] == "vda"
    assert root["persistentVolumeClaimInfo"]["claimName"] == f"{VM_NAME}-root"
    assert root["persistentVolumeClaimInfo"]["accessModes"] == ["ReadWriteMany"]
    client.create(PersistentVolume.from_dict(static_pv()))
    client.create(PersistentVolumeClaim.from_dict(claim()), namespace=NS)
    cluster.wait_for("PersistentVolumeClaim", f"vol-{VOLUME_ID}", NS, lambda o: _phase(o) == "Bound")
    _hotplug(client)
    seen = []

    def phases(o):
        entry = _status(o)
        if entry and (not seen or seen[-1] != entry["phase"]):
            seen.append(entry["phase"])
        return bool(entry) and entry["phase"] == "Ready"

    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, phases)
    assert seen == ["Bound", "AttachedToNode", "MountedToPod", "Ready"]
    entry = _status(vmi)
    attach = next(p for p in cluster.objects("Pod").values() if p["metadata"]["name"].startswith("hp-volume-"))
    assert entry == {"name": "data1", "phase": "Ready", "reason": "VolumeReady",
                     "message": "Successfully attach hotplugged volume data1 to VM", "target": "sda",
                     "hotplugVolume": {"attachPodName": attach["metadata"]["name"],
                                       "attachPodUID": attach["metadata"]["uid"]},
                     "persistentVolumeClaimInfo": {
                         "claimName": f"vol-{VOLUME_ID}", "accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                         "capacity": {"storage": "1Gi"}, "requests": {"storage": "1Gi"}, "filesystemOverhead": "0"}}
    assert attach["spec"]["volumes"] == [{"name": "data1", "persistentVolumeClaim": {"claimName":
                                                                                     f"vol-{VOLUME_ID}"}}]
    assert attach["spec"]["nodeName"] == vmi["status"]["nodeName"]
    disk = next(d for d in vmi["spec"]["domain"]["devices"]["disks"] if d["name"] == "data1")
    assert disk["serial"] == VOLUME_ID[:20]
    assert "sd 0:0:0:0: [sda] 2097152 512-byte logical blocks: (1.07 GB/1.00 GiB)" in _console(cluster)
    vm = cluster.get("VirtualMachine", VM_NAME, NS)
    assert not any(c["type"] == "RestartRequired" for c in vm["status"]["conditions"])
    # the claim is in use: deleting it waits
    client.delete(PersistentVolumeClaim, f"vol-{VOLUME_ID}", namespace=NS)
    assert _pvc(cluster)["metadata"].get("deletionTimestamp")

    # unplug: the volume leaves the VM's template
    vm = client.get(VM, VM_NAME, namespace=NS).to_dict()
    spec = vm["spec"]["template"]["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "data1"]
    spec["domain"]["devices"]["disks"] = [d for d in spec["domain"]["devices"]["disks"] if d["name"] != "data1"]
    client.patch(VM, VM_NAME, [{"op": "replace", "path": "/spec/template/spec", "value": spec}], namespace=NS,
                 patch_type=PatchType.JSON)
    seen.clear()
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: (phases(o), _status(o) is None)[1])
    assert seen == ["Ready", "UnMountedFromPod", "Detaching"]
    assert not [p for p in cluster.objects("Pod").values() if p["metadata"]["name"].startswith("hp-volume-")]
    cluster.wait_for("PersistentVolumeClaim", f"vol-{VOLUME_ID}", NS, lambda o: o is None)  # no longer in use
    assert "[sda] Synchronizing SCSI cache" in _console(cluster)


def test_the_addvolume_and_removevolume_subresources(cluster, client):
    _running_vm(cluster, client)
    client.create(PersistentVolume.from_dict(static_pv()))
    client.create(PersistentVolumeClaim.from_dict(claim()), namespace=NS)
    body = {"name": "data1", "disk": {"disk": {"bus": "scsi"}, "serial": "abc"},
            "volumeSource": {"persistentVolumeClaim": {"claimName": f"vol-{VOLUME_ID}"}}}
    before = cluster.get("VirtualMachine", VM_NAME, NS)
    assert put(client, "virtualmachines", VM_NAME, "addvolume", {**body, "dryRun": ["All"]}).status_code == 202
    assert cluster.get("VirtualMachine", VM_NAME, NS)["spec"] == before["spec"]
    assert put(client, "virtualmachines", VM_NAME, "addvolume", body).status_code == 202
    spec = cluster.get("VirtualMachine", VM_NAME, NS)["spec"]["template"]["spec"]
    assert spec["volumes"][-1] == {"name": "data1", "persistentVolumeClaim": {"claimName": f"vol-{VOLUME_ID}",
                                                                              "hotpluggable": True}}
    assert spec["domain"]["devices"]["disks"][-1] == {"disk": {"bus": "scsi"}, "serial": "abc", "name": "data1"}
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: (_status(o) or {}).get("phase") == "Ready")
    again = put(client, "virtualmachines", VM_NAME, "addvolume", body)
    assert again.status_code == 409
    assert again.json()["message"] == (f'Operation cannot be fulfilled on virtualmachine.kubevirt.io "{VM_NAME}": '
                                       "Unable to add volume [data1] because volume with that name already exists")
    for verb, payload, message in (
            ("addvolume", {"disk": {}}, "AddVolumeOptions requires name to be set"),
            ("addvolume", {"name": "x"}, "AddVolumeOptions requires disk to not be nil"),
            ("addvolume", {"name": "x", "disk": {}}, "AddVolumeOptions requires VolumeSource to not be nil"),
            ("removevolume", {}, "RemoveVolumeOptions requires name to be set")):
        answer = put(client, "virtualmachines", VM_NAME, verb, payload)
        assert (answer.status_code, answer.json()["message"]) == (400, message)
    root = put(client, "virtualmachines", VM_NAME, "removevolume", {"name": "root"})
    assert root.status_code == 409
    assert root.json()["message"].endswith("Unable to remove volume [root] because it is not hotpluggable")
    owned = put(client, "virtualmachineinstances", VM_NAME, "addvolume", body)
    assert (owned.status_code, owned.json()["message"]) == (400, f"VMI {NS}/{VM_NAME} is owned by a VM")
    missing = put(client, "virtualmachines", "nope", "removevolume", {"name": "data1"})
    assert (missing.status_code, missing.json()["message"]) == (404, 'virtualmachine.kubevirt.io "nope" not found')
    assert put(client, "virtualmachines", VM_NAME, "removevolume", {"name": "data1"}).status_code == 202
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: _status(o) is None)


def test_a_disk_kubevirt_cannot_hotplug_fails_the_vms_sync_and_a_new_permanent_disk_asks_for_a_restart(cluster,
                                                                                                      client):
    _running_vm(cluster, client)
    client.create(PersistentVolume.from_dict(static_pv()))
    client.create(PersistentVolumeClaim.from_dict(claim()), namespace=NS)
    _hotplug(client, disk_bus="sata")
    vm = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: any(
        c["type"] == "Failure" for c in o["status"].get("conditions") or ()))
    failure = next(c for c in vm["status"]["conditions"] if c["type"] == "Failure")
    assert failure["reason"] == "HotPlugVolumeError"
    assert failure["message"] == (
        "Error encountered while handling declarative hotplug volumes: admission webhook "
        '"virtualmachineinstances-update-validator.kubevirt.io" denied the request: Hotplug configuration for '
        "disk [data1] requires bus to be 'scsi' or 'virtio'. [sata] is not permitted.")
    vmi = cluster.get("VirtualMachineInstance", VM_NAME, NS)
    assert [v["name"] for v in vmi["spec"]["volumes"]] == ["root"]
    # a user may not change the VMI's spec either
    with pytest.raises(ApiError) as caught:
        client.patch(VMI, VM_NAME, {"spec": {"hostname": "other"}}, namespace=NS, patch_type=PatchType.MERGE)
    assert caught.value.status.message == ('admission webhook "virtualmachineinstances-update-validator.kubevirt.io" '
                                           "denied the request: update of VMI object is restricted")
    # a volume that is not hotpluggable is a change for the next start
    vm = client.get(VM, VM_NAME, namespace=NS).to_dict()
    spec = copy.deepcopy(vm["spec"]["template"]["spec"])
    spec["volumes"][-1]["persistentVolumeClaim"]["hotpluggable"] = False
    client.patch(VM, VM_NAME, [{"op": "replace", "path": "/spec/template/spec", "value": spec}], namespace=NS,
                 patch_type=PatchType.JSON)
    vm = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: any(
        c["type"] == "RestartRequired" for c in o["status"].get("conditions") or ()))
    assert not any(c["type"] == "Failure" for c in vm["status"]["conditions"])


def test_a_claim_that_grows_under_a_running_vm_is_seen_by_the_guest(cluster, client):
    _running_vm(cluster, client)
    client.create(PersistentVolume.from_dict(static_pv()))
    client.create(PersistentVolumeClaim.from_dict(claim()), namespace=NS)
    _hotplug(client, disk_bus="virtio")
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: (_status(o) or {}).get("phase") == "Ready")
    assert _status(vmi)["target"] == "vdb"
    assert "virtio_blk virtio6: [vdb] 2097152 512-byte logical blocks (1.07 GB/1.00 GiB)" in _console(cluster)
    client.patch(PersistentVolumeClaim, f"vol-{VOLUME_ID}", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
                 namespace=NS)
    cluster.wait_for("PersistentVolume", f"cinder-{VOLUME_ID}", None,
                     lambda o: o["spec"]["capacity"]["storage"] == "2Gi")
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: _status(o)[
        "persistentVolumeClaimInfo"]["capacity"] == {"storage": "2Gi"})
    assert _pvc(cluster)["status"]["capacity"] == {"storage": "2Gi"}
    log = _console(cluster)
    assert "virtio_blk virtio2: [vdb] new size: 4194304 512-byte logical blocks (2.15 GB/2.00 GiB)" in log
    assert "vdb: detected capacity change from 2097152 to 4194304" in log
