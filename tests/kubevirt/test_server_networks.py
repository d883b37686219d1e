"""A server's networks: "auto" (or none asked, before 2.37) is the pod network; "none" is no interface at all.

That the cluster accepts such a VM and runs it without an address is tests/clients/test_servers_cli.py's
``--nic none`` scenario (scripts/serve and the built-in cluster)."""

from __future__ import annotations

from openkeel_compute.kubevirt.server import compose
from openkeel_compute.model.sysmeta import REQUESTED_NETWORKS
from tests.kubevirt.objects import IMAGE, SERVER, flavor_copy


def _spec(server):
    vm = compose(server, flavor_copy(), IMAGE, None).vm
    return vm["spec"]["template"]["spec"]


def test_the_pod_network_by_default():
    spec = _spec(SERVER)
    assert spec["networks"] == [{"name": "default", "pod": {}}]
    assert [i["name"] for i in spec["domain"]["devices"]["interfaces"]] == ["default"]
    assert "autoattachPodInterface" not in spec["domain"]["devices"]


def test_networks_none_is_a_vm_without_any_interface():
    spec = _spec(dict(SERVER, system_metadata={REQUESTED_NETWORKS: "none"}))
    assert spec["networks"] == [] and spec["domain"]["devices"]["interfaces"] == []
    # without this KubeVirt would attach the pod network by itself
    assert spec["domain"]["devices"]["autoattachPodInterface"] is False

