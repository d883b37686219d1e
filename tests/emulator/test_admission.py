"""The admission hook: a per-kind function may refuse an object with KubeVirt's webhook denial."""

from __future__ import annotations

import importlib.util

import pytest
from lightkube import ApiError

from openkeel_compute.controller.kube import http_of
from openkeel_compute.emulator import admission
from tests.emulator.conftest import CIT, NS, VM, instancetype, server_vm


def test_a_hook_refuses_with_the_webhook_denial(cluster, client):
    def no_big_vms(review: admission.Review) -> list[str]:
        it = review.lookup("VirtualMachineClusterInstancetype", review.obj["spec"]["instancetype"]["name"], None)
        guest = it["spec"]["cpu"]["guest"] if it else 0
        return [f"too many vCPUs: {guest}"] if guest > 4 else []

    remove = admission.register("VirtualMachine", no_big_vms)
    try:
        client.create(CIT.from_dict(instancetype("big", cpus=8)))
        with pytest.raises(ApiError) as caught:
            client.create(VM.from_dict(server_vm(flavor="big")), namespace=NS)
        assert caught.value.status.code == 422
        assert caught.value.status.message == ('admission webhook "virtualmachine-validator.kubevirt.io" denied '
                                               "the request: too many vCPUs: 8")
        assert cluster.objects("VirtualMachine") == {}
        client.create(CIT.from_dict(instancetype("small", cpus=2)))
        client.create(VM.from_dict(server_vm(flavor="small")), namespace=NS)
    finally:
        remove()


def test_hooks_see_updates_too(cluster, client):
    seen = []
    remove = admission.register("VirtualMachineClusterInstancetype",
                                lambda review: seen.append(review.operation) or [])
    try:
        created = client.create(CIT.from_dict(instancetype()))
        created.spec["cpu"]["guest"] = 2
        client.replace(created)
    finally:
        remove()
    assert seen == ["CREATE", "UPDATE"]


@pytest.mark.skipif(importlib.util.find_spec("openkeel_compute.kubevirt.admission") is None,
                    reason="KubeVirt's admission table (openkeel_compute.kubevirt.admission) is not in this tree yet")
def test_the_admission_table_refuses_what_kubevirt_refuses(cluster, client):
    it = instancetype("dedicated-threads", cpus=3)
    it["spec"]["cpu"]["dedicatedCPUPlacement"] = True
    it["spec"]["cpu"]["isolateEmulatorThread"] = True
    it["spec"]["cpu"]["realtime"] = {}
    client.create(CIT.from_dict(it))
    from openkeel_compute.kubevirt import admission as table

    expected = table.admission_refusals(it["spec"], None, server_vm(flavor="dedicated-threads"))
    vm = server_vm(flavor="dedicated-threads")
    del vm["spec"]["preference"]
    if not expected:
        pytest.skip("this instancetype breaks no row of the table")
    with pytest.raises(ApiError) as caught:
        client.create(VM.from_dict(vm), namespace=NS)
    assert caught.value.status.code == 422
    assert expected[0][1] in caught.value.status.message


def test_status_writes_are_not_reviewed(cluster, client):
    client.create(VM.from_dict(server_vm()), namespace=NS)
    name = server_vm()["metadata"]["name"]
    remove = admission.register("VirtualMachine", lambda review: ["no changes today"])
    try:
        http = http_of(client)
        path = f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/{name}"
        headers = {"Content-Type": "application/merge-patch+json"}
        refused = http.patch(path, content=b'{"metadata": {"labels": {"a": "b"}}}', headers=headers)
        assert refused.status_code == 422 and refused.json()["message"].endswith("no changes today")
        status = http.patch(path + "/status", content=b'{"status": {"printableStatus": "Stopped"}}', headers=headers)
        assert status.status_code == 200
    finally:
        remove()
