"""What a resize and its revert change in a stopped VirtualMachine (controller/steps/vm_edits.py), each edit
on its own against the fake cluster (this folder's conftest.py): the JSON patches it sends (each ``test``s
what it read before it changes it), and what it sends nothing for. tests/controller/test_server_resize.py
drives the same edits end to end."""

from __future__ import annotations

from typing import Any

import pytest

from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps import vm_edits
from openkeel_compute.controller.steps.base import Wait, read_server
from openkeel_compute.kubevirt.mapping import CLOUD_INIT_DISK, SWAP_DISK
from openkeel_compute.kubevirt.names import server_root_volume, server_vm_name
from openkeel_compute.kubevirt.server import HOSTNAME_LABEL
from tests.controller.helpers import boot

UUID = "6f2b9c1e-0000-4000-8000-000000000001"
NS = "project-1"


def _term(*nodes: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                              *({"key": HOSTNAME_LABEL, "operator": "In", "values": [n]} for n in nodes)]}]}}}


def _vm_with(affinity: dict[str, Any] | None) -> dict[str, Any]:
    tspec: dict[str, Any] = {} if affinity is None else {"affinity": affinity}
    return {"metadata": {"name": server_vm_name(UUID)}, "spec": {"template": {"spec": tspec}}}


# -- matchers -----------------------------------------------------------------------------------------

def test_a_matcher_patch_tests_each_matcher_as_read_before_it_changes_it():
    vm = {"spec": {"instancetype": {"name": "old"}, "preference": {"name": "pref"}}}
    ops = vm_edits.matcher_patch(vm, {"instancetype": {"name": "new"}, "preference": None})
    assert ops == [{"op": "test", "path": "/spec/instancetype", "value": {"name": "old"}},
                   {"op": "replace", "path": "/spec/instancetype", "value": {"name": "new"}},
                   {"op": "test", "path": "/spec/preference", "value": {"name": "pref"}},
                   {"op": "remove", "path": "/spec/preference"}]


def test_a_matcher_the_vm_lacks_is_added_and_none_wanted_of_none_is_nothing():
    ops = vm_edits.matcher_patch({"spec": {}}, {"instancetype": {"name": "new"}, "preference": None})
    assert ops == [{"op": "add", "path": "/spec/instancetype", "value": {"name": "new"}}]


def test_sizing_the_vm_no_longer_names_is_deleted_the_current_kept(ctx, cluster):
    keep = ObjectKey("VirtualMachineInstancetype", NS, "it-new")
    old = ObjectKey("VirtualMachineInstancetype", NS, "it-old")
    pref = ObjectKey("VirtualMachinePreference", NS, "pref")
    cluster.sizing[UUID] = [keep, old, pref]
    vm = {"spec": {"instancetype": {"kind": keep.kind, "name": "it-new"},
                   "preference": {"kind": pref.kind, "name": "pref"}}}
    vm_edits.drop_unused_sizing(ctx, NS, UUID, vm)
    assert cluster.calls == [("delete", old.kind, "it-old")]


# -- flavor disks -------------------------------------------------------------------------------------

def test_the_flavor_disks_take_the_place_of_the_old_ones_before_the_cloud_init_disk():
    current = [{"name": "rootdisk"}, {"name": "ephemeral0", "size": 1}, {"name": CLOUD_INIT_DISK},
               {"name": "config"}]
    wanted = [{"name": "rootdisk", "other": True}, {"name": SWAP_DISK, "size": 2}, {"name": CLOUD_INIT_DISK}]
    assert vm_edits.flavor_disks(current, wanted) == [
        {"name": "rootdisk"}, {"name": SWAP_DISK, "size": 2}, {"name": CLOUD_INIT_DISK}, {"name": "config"}]


def test_without_a_cloud_init_disk_the_flavor_disks_go_last():
    assert vm_edits.flavor_disks([{"name": "rootdisk"}], [{"name": "ephemeral0"}]) == [
        {"name": "rootdisk"}, {"name": "ephemeral0"}]


# -- stop, start --------------------------------------------------------------------------------------

def test_a_running_vmi_is_asked_to_stop_and_the_edit_waits(ctx, cluster):
    cluster.vmi_in(UUID, "Running")
    with pytest.raises(Wait, match="to stop"):
        vm_edits.stop(ctx, NS, UUID, cluster.vmis[UUID])
    assert cluster.verbs() == ["stop"]


def test_a_stopped_vmi_still_there_is_waited_for_without_asking_again(ctx, cluster):
    cluster.vmi_in(UUID, "Succeeded")
    with pytest.raises(Wait, match="to go"):
        vm_edits.stop(ctx, NS, UUID, cluster.vmis[UUID])
    assert cluster.calls == []
    vm_edits.stop(ctx, NS, UUID, None)  # no VMI: stopped, nothing to wait for
    assert cluster.calls == []


def test_a_start_is_asked_only_of_a_vm_without_vmi_or_pending_request(ctx, cluster):
    vm_edits.start_if_stopped(ctx, NS, UUID, {"status": {"stateChangeRequests": [{"action": "Start"}]}}, None)
    cluster.vmi_in(UUID, "Running")
    vm_edits.start_if_stopped(ctx, NS, UUID, {}, cluster.vmis[UUID])
    assert cluster.calls == []
    vm_edits.start_if_stopped(ctx, NS, UUID, {}, None)
    assert cluster.calls == [("subresource", NS, server_vm_name(UUID), "start")]


# -- root disk ----------------------------------------------------------------------------------------

def test_a_larger_root_disk_grows_the_claim_a_smaller_one_never_shrinks_it(ctx, cluster):
    vm_edits.grow_root_disk(ctx, NS, UUID, {"root_gb": 2}, {"root_gb": 2})
    vm_edits.grow_root_disk(ctx, NS, UUID, {"root_gb": 2}, {"root_gb": 1})
    assert cluster.calls == []
    vm_edits.grow_root_disk(ctx, NS, UUID, {"root_gb": 1}, {"root_gb": 3})
    assert cluster.patches == [("PersistentVolumeClaim", server_root_volume(server_vm_name(UUID)),
                                {"spec": {"resources": {"requests": {"storage": "3Gi"}}}})]
    assert cluster.calls[-1][-1] == "merge"


# -- pin ----------------------------------------------------------------------------------------------

def test_a_vm_without_affinity_is_pinned_to_the_node(ctx, cluster):
    vm_edits.pin(ctx, NS, UUID, _vm_with(None), "node-2")
    [(kind, name, ops)] = cluster.patches
    assert (kind, name) == ("VirtualMachine", server_vm_name(UUID)) and [o["op"] for o in ops] == ["add"]
    terms = ops[0]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": HOSTNAME_LABEL, "operator": "In", "values": ["node-2"]} in terms[0]["matchExpressions"]


def test_a_pinned_vm_moves_to_the_new_node_keeping_its_other_terms(ctx, cluster):
    affinity = _term("node-1")
    vm_edits.pin(ctx, NS, UUID, _vm_with(affinity), "node-2")
    [(_, _, ops)] = cluster.patches
    path = "/spec/template/spec/affinity"
    assert ops == [{"op": "test", "path": path, "value": affinity},
                   {"op": "replace", "path": path, "value": _term("node-2")}]
    assert affinity == _term("node-1")  # what was read is left as it was


def test_a_vm_already_pinned_to_the_node_is_not_patched(ctx, cluster):
    vm_edits.pin(ctx, NS, UUID, _vm_with(_term("node-2")), "node-2")
    assert cluster.calls == []


def test_an_empty_patch_is_not_sent(ctx, cluster):
    vm_edits.patch(ctx, NS, UUID, [])
    assert cluster.calls == []


# -- every object of the server -----------------------------------------------------------------------

def test_a_vm_on_another_size_gets_its_matchers_patched_before_the_apply(ctx, db, cluster):
    uuid = boot(db)
    server = read_server(db, uuid)
    objects = ctx.objects(server)
    name = objects.vm["metadata"]["name"]
    old = {"kind": "VirtualMachineInstancetype", "name": "it-other"}
    vm = {"metadata": {"name": name, "uid": f"uid-{name}"},  # the VM the apply answers: no second sizing
          "spec": {"instancetype": old, "preference": objects.vm["spec"]["preference"]}}
    made = vm_edits.apply_server(ctx, objects, vm)
    assert made["metadata"]["uid"] == f"uid-{name}"
    order = [c[0] if c[0] != "apply" else c[1] for c in cluster.calls]
    assert order == [*["Secret"] * len(objects.secrets), "VirtualMachineInstancetype", "VirtualMachinePreference",
                     "patch", "VirtualMachine"]
    [(_, _, ops)] = cluster.patches
    assert ops == [{"op": "test", "path": "/spec/instancetype", "value": old},
                   {"op": "replace", "path": "/spec/instancetype", "value": objects.vm["spec"]["instancetype"]}]


def test_a_new_vm_is_applied_first_and_its_sizing_then_owned_by_it(ctx, db, cluster):
    """One apply per object and no patch: KubeVirt v1.9 admits a VM whose instancetype is not there yet,
    so the new VM's uid is known when its own instancetype and preference are applied."""
    uuid = boot(db)
    objects = ctx.objects(read_server(db, uuid))
    made = vm_edits.apply_server(ctx, objects, None)
    kinds = [c[1] for c in cluster.calls]
    assert kinds[len(objects.secrets):] == ["VirtualMachine", "VirtualMachineInstancetype", "VirtualMachinePreference"]
    assert [c[0] for c in cluster.calls] == ["apply"] * (len(objects.secrets) + 3)
    assert cluster.patches == []
    ref = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": made["metadata"]["name"],
           "uid": made["metadata"]["uid"], "controller": False, "blockOwnerDeletion": False}
    assert [b["metadata"]["ownerReferences"] for b in cluster.applies[-2:]] == [[ref], [ref]]
    assert [b["metadata"]["name"] for b in cluster.applies[-2:]] == [b["metadata"]["name"] for b in objects.sizing]
