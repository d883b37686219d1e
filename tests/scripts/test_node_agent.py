"""The network agent the conformance tier plays for the built-in cluster's nodes (tests/conformance/node_agent.py):
which ports it reports up and down, from the VMIs as KubeVirt lists them and the ports as Neutron lists them."""

from __future__ import annotations

from tests.conformance import node_agent

NODE = "emulated-node-1"
MAC = "fa:16:3e:00:00:01"
MAC_AS_NEUTRON_WRITES_IT = MAC.upper()  # the agent compares MACs in lower case


def _vmi(phase="Running", node=NODE, status_ifaces=None, spec_mac=MAC):
    return {
        "metadata": {"name": "s1", "namespace": "p1"},
        "spec": {"domain": {"devices": {"interfaces": [{"name": "port-p1", "bridge": {}, "macAddress": spec_mac}]}}},
        "status": {"phase": phase, "nodeName": node,
                   "interfaces": status_ifaces if status_ifaces is not None else [
                       {"name": "port-p1", "mac": MAC, "infoSource": "domain, multus-status"}]},
    }


def _port(status="DOWN", host=NODE, mac=MAC_AS_NEUTRON_WRITES_IT, owner="compute:nova", vif_type="ovs"):
    return {"id": "p1", "mac_address": mac, "status": status, "binding:host_id": host,
            "binding:vif_type": vif_type, "device_owner": owner}


def test_a_bound_port_whose_interface_runs_on_its_node_is_reported_up():
    assert node_agent.decide([_vmi()], [_port()], [NODE]) == ([("p1", NODE)], [])
    # already ACTIVE: nothing to say
    assert node_agent.decide([_vmi()], [_port(status="ACTIVE")], [NODE]) == ([], [])


def test_an_interface_multus_alone_reports_is_matched_by_the_spec_mac():
    vmi = _vmi(status_ifaces=[{"name": "port-p1", "infoSource": "multus-status"}])
    assert node_agent.decide([vmi], [_port()], [NODE]) == ([("p1", NODE)], [])


def test_no_report_for_a_port_not_ours_or_not_bound_or_elsewhere():
    vmi = _vmi()
    assert node_agent.decide([vmi], [_port(host="other-node")], [NODE]) == ([], [])
    assert node_agent.decide([vmi], [_port(owner="network:router_interface")], [NODE]) == ([], [])
    assert node_agent.decide([vmi], [_port(vif_type="binding_failed")], [NODE]) == ([], [])
    assert node_agent.decide([_vmi(node="emulated-node-2")], [_port()], [NODE, "emulated-node-2"]) == ([], [])
    assert node_agent.decide([_vmi(phase="Pending")], [_port()], [NODE]) == ([], [])
    assert node_agent.decide([_vmi(spec_mac="fa:16:3e:00:00:02", status_ifaces=[])], [_port()], [NODE]) == ([], [])


def test_an_active_port_whose_interface_went_is_reported_down():
    assert node_agent.decide([], [_port(status="ACTIVE")], [NODE]) == ([], [("p1", NODE)])
    assert node_agent.decide([_vmi(phase="Succeeded")], [_port(status="ACTIVE")], [NODE]) == ([], [("p1", NODE)])
