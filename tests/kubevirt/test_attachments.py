"""kubevirt/attachments.py: a Neutron network as a Multus NetworkAttachmentDefinition (OVN-Kubernetes'
secondary networks by default: localnet for flat and VLAN provider networks, layer2 otherwise; or the
operator's template), and the names of a port's interface."""

from __future__ import annotations

import json

import pytest

from openkeel_compute.kubevirt.attachments import attachment, attachment_name, port_interface_name

NET = {"id": "8d4c6f1e-0000-4000-8000-000000000001", "name": "private", "mtu": 1442,
       "provider:network_type": "vxlan", "provider:segmentation_id": 7, "provider:physical_network": None}


def _config(body):
    return json.loads(body["spec"]["config"])


def test_an_overlay_network_is_an_ovn_kubernetes_layer2_network():
    body = attachment("ok-project-1", NET)
    assert body["metadata"] == {"name": f"neutron-{NET['id']}", "namespace": "ok-project-1",
                                "labels": {"app.kubernetes.io/managed-by": "openkeel",
                                           "openkeel.io/neutron-network": NET["id"]}}
    assert _config(body) == {"cniVersion": "0.3.1", "name": f"neutron-{NET['id']}", "type": "ovn-k8s-cni-overlay",
                             "topology": "layer2", "netAttachDefName": f"ok-project-1/neutron-{NET['id']}",
                             "mtu": 1442}


@pytest.mark.parametrize(("kind", "vlan"), [("vlan", {"vlanID": 101}), ("flat", {})])
def test_a_provider_network_is_a_localnet_on_its_physical_network(kind, vlan):
    net = {**NET, "provider:network_type": kind, "provider:segmentation_id": 101 if kind == "vlan" else None,
           "provider:physical_network": "physnet1", "mtu": 1500}
    config = _config(attachment("ns", net))
    assert config["topology"] == "localnet"
    assert config["physicalNetworkName"] == "physnet1"
    assert {k: v for k, v in config.items() if k == "vlanID"} == vlan


def test_the_operators_template_takes_the_networks_values():
    template = ('{"cniVersion": "0.3.1", "type": "kube-ovn", "provider": "$name.$namespace.ovn", '
                '"mtu": $mtu, "segment": $segmentation_id, "label": "$network_name/$topology"}')
    assert _config(attachment("ns", NET, template)) == {
        "cniVersion": "0.3.1", "type": "kube-ovn", "provider": f"neutron-{NET['id']}.ns.ovn", "mtu": 1442,
        "segment": 7, "label": "private/layer2"}


@pytest.mark.parametrize("template", ['["not", "an object"]', '{"mtu": $unknown}', "{not json"])
def test_a_template_that_makes_no_json_object_is_refused(template):
    with pytest.raises((ValueError, KeyError)):
        attachment("ns", NET, template)


def test_names():
    assert attachment_name("abc") == "neutron-abc"
    assert port_interface_name("p-1") == "port-p-1"
