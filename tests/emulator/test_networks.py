"""Secondary networks on the built-in cluster, driven over HTTP as the controller will: Multus
NetworkAttachmentDefinitions, VMs with bridge interfaces on them (MAC, pod annotations, VMI interfaces with the
guest's addresses), KubeVirt's network admission, and declarative interface hot(un)plug."""

from __future__ import annotations

import base64
import copy
import json

import httpx2 as httpx
import pytest
from lightkube import ApiError
from lightkube.generic_resource import create_namespaced_resource

from openkeel_compute.emulator import networks
from tests.emulator.conftest import NS, VM, VM_NAME, boot, put, running, server_vm

NAD = create_namespaced_resource("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition",
                                 "network-attachment-definitions")
NET_ID = "4f6b2a1e-0000-4000-8000-00000000000a"
MAC = "fa:16:3e:11:22:33"
MAC2 = "fa:16:3e:44:55:66"
CONFIG = json.dumps({"cniVersion": "0.4.0", "name": f"neutron-{NET_ID}", "type": "ovn-k8s-cni-overlay",
                     "topology": "layer2", "netAttachDefName": f"{NS}/neutron-{NET_ID}"})


def nad(name: str = f"neutron-{NET_ID}", namespace: str = NS) -> dict:
    return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"config": CONFIG}}


def network_data(*links: tuple[str, str, str]) -> str:
    """Nova's network_data.json for (port id, MAC, IPv4 address) links."""
    return json.dumps({
        "links": [{"id": f"tap{port[:11]}", "vif_id": port, "type": "ovs", "mtu": 1442,
                   "ethernet_mac_address": mac} for port, mac, _ip in links],
        "networks": [{"id": f"network{i}", "type": "ipv4", "link": f"tap{port[:11]}", "ip_address": ip,
                      "netmask": "255.255.255.0", "routes": [], "network_id": NET_ID}
                     for i, (port, _mac, ip) in enumerate(links)],
        "services": []})


def net_secret(text: str, name: str = f"{VM_NAME}-net") -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
            "data": {"networkdata": base64.b64encode(text.encode()).decode()}}


PORT1 = "aaaaaaaa-1111-4000-8000-000000000001"
PORT2 = "bbbbbbbb-2222-4000-8000-000000000002"


def neutron_vm(agent: bool = True) -> dict:
    """A server's VM on a Neutron port: pod network removed, one bridge interface on the network's NAD, the
    port's MAC, network data on a config drive."""
    vm = server_vm()
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["interfaces"] = [{"name": PORT1[:8], "bridge": {}, "macAddress": MAC}]
    spec["networks"] = [{"name": PORT1[:8], "multus": {"networkName": f"neutron-{NET_ID}"}}]
    spec["domain"]["devices"]["disks"].append({"name": "cloudinit", "disk": {"bus": "virtio"}})
    spec["volumes"].append({"name": "cloudinit", "cloudInitConfigDrive": {
        "userData": "#cloud-config\n{}", "networkDataSecretRef": {"name": f"{VM_NAME}-net"}}})
    if not agent:
        vm["spec"]["template"]["metadata"]["annotations"] = {"emulator.openkeel.io/guest-agent": "false"}
    return vm


def _boot(cluster, client, vm: dict) -> None:
    cluster.seed(net_secret(network_data((PORT1, MAC, "192.0.2.10"))))
    boot(cluster, client, start=False)
    client.delete(VM, VM_NAME, namespace=NS)
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o is None)
    client.create(VM.from_dict(vm), namespace=NS)
    assert put(client, "virtualmachines", VM_NAME, "start").status_code == 202


def _pod(cluster) -> dict:
    pods = [p for p in cluster.objects("Pod").values() if p["metadata"]["name"].startswith("virt-launcher-")]
    assert len(pods) == 1
    return pods[0]


def _vmi(cluster) -> dict:
    return cluster.get("VirtualMachineInstance", VM_NAME, NS)


def _iface(vmi: dict, name: str) -> dict | None:
    return next((e for e in vmi["status"].get("interfaces") or () if e.get("name") == name), None)


def test_attachment_definitions_are_served_with_multus_schema(cluster, client):
    created = client.create(NAD.from_dict(nad()), namespace=NS)
    assert created.metadata.uid and created.spec["config"] == CONFIG
    assert [o.metadata.name for o in client.list(NAD, namespace=NS)] == [f"neutron-{NET_ID}"]
    bad = nad("other")
    bad["spec"]["cniVersion"] = "0.4.0"
    answer = httpx.post(f"{cluster.url}/apis/k8s.cni.cncf.io/v1/namespaces/{NS}/network-attachment-definitions"
                        "?fieldValidation=Strict", json=bad)
    assert answer.status_code == 400
    assert 'strict decoding error: unknown field "spec.cniVersion"' in answer.json()["message"]
    missing = httpx.get(f"{cluster.url}/apis/k8s.cni.cncf.io/v1/namespaces/{NS}/network-attachment-definitions/x")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'network-attachment-definitions.k8s.cni.cncf.io "x" not found'
    listing = httpx.get(f"{cluster.url}/apis/k8s.cni.cncf.io/v1").json()["resources"]
    assert {"name": "network-attachment-definitions", "singularName": "network-attachment-definition",
            "namespaced": True, "kind": "NetworkAttachmentDefinition", "shortNames": ["net-attach-def"]}.items() \
        <= listing[0].items()


def test_a_missing_attachment_definition_leaves_the_vmi_pending_until_it_exists(cluster, client):
    _boot(cluster, client, neutron_vm())
    message = ("failed to render launch manifest: failed to locate network attachment definition "
               f"{NS}/neutron-{NET_ID}")
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: any(
        c.get("type") == "Synchronized" for c in ((o or {}).get("status") or {}).get("conditions") or ()))
    cond = next(c for c in vmi["status"]["conditions"] if c["type"] == "Synchronized")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "FailedCreate", message)
    assert vmi["status"]["phase"] == "Pending"
    assert not [p for p in cluster.objects("Pod").values() if p["metadata"]["name"].startswith("virt-launcher-")]
    vm = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: any(
        c.get("type") == "Synchronized" for c in (o or {}).get("status", {}).get("conditions") or ()))
    assert vm["status"]["printableStatus"] == "Starting"
    client.create(NAD.from_dict(nad()), namespace=NS)
    running(cluster)
    assert not any(c["type"] == "Synchronized" for c in _vmi(cluster)["status"]["conditions"])


def test_a_bridge_interface_on_a_multus_network_carries_its_mac_and_the_guests_address(cluster, client):
    client.create(NAD.from_dict(nad()), namespace=NS)
    _boot(cluster, client, neutron_vm())
    running(cluster)
    pod = _pod(cluster)
    pod_iface = networks.pod_interface_name(PORT1[:8])
    assert json.loads(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]) == [
        {"name": f"neutron-{NET_ID}", "namespace": NS, "mac": MAC, "interface": pod_iface}]
    status_text = pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
    assert status_text.startswith('[{\n    "name": "ovn-kubernetes",\n    "interface": "eth0",\n    "ips": [\n')
    statuses = json.loads(status_text)
    assert statuses[0]["ips"] == [pod["status"]["podIP"]] and statuses[0]["default"] is True
    assert statuses[1] == {"name": f"{NS}/neutron-{NET_ID}", "interface": pod_iface, "mac": MAC, "dns": {}}
    vmi = _vmi(cluster)
    assert vmi["status"]["interfaces"] == [{
        "name": PORT1[:8], "mac": MAC, "ipAddress": "192.0.2.10", "ipAddresses": ["192.0.2.10", "fe80::f816:3eff:fe11:2233"],
        "interfaceName": "enp1s0", "infoSource": "domain, guest-agent, multus-status", "podInterfaceName": pod_iface,
        "queueCount": 1, "linkState": "up"}]
    assert any(c["type"] == "AgentConnected" and c["status"] == "True" for c in vmi["status"]["conditions"])
    assert vmi["status"]["guestOSInfo"]["prettyName"] == "Ubuntu 24.04.1 LTS"
    log = httpx.get(f"{cluster.url}/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log",
                    params={"container": "guest-console-log"}).text
    assert f"| enp1s0 | True | 192.0.2.10 | 255.255.255.0 | global | {MAC} |" in log


def test_without_a_guest_agent_kubevirt_knows_no_address_of_a_bridge_interface(cluster, client):
    client.create(NAD.from_dict(nad()), namespace=NS)
    _boot(cluster, client, neutron_vm(agent=False))
    running(cluster)
    vmi = _vmi(cluster)
    assert vmi["status"]["interfaces"] == [{
        "name": PORT1[:8], "mac": MAC, "infoSource": "domain, multus-status",
        "podInterfaceName": networks.pod_interface_name(PORT1[:8]), "queueCount": 1, "linkState": "up"}]
    assert not any(c["type"] == "AgentConnected" for c in vmi["status"]["conditions"])
    assert vmi["status"]["guestOSInfo"] == {}


def _template_interfaces(vm: dict) -> tuple[list, list]:
    spec = vm["spec"]["template"]["spec"]
    return spec["domain"]["devices"]["interfaces"], spec["networks"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda i, n: i.append(dict(i[0])), "Only one interface can be connected to one specific network"),
    (lambda i, n: n.append({"name": "lonely", "multus": {"networkName": "x"}}),
     "spec.template.spec.networks[1].name 'lonely' not found."),
    (lambda i, n: i.append({"name": "lonely", "bridge": {}}),
     "spec.template.spec.domain.devices.interfaces[1].name 'lonely' not found."),
    (lambda i, n: i[0].update(macAddress="fa:16:3e:zz:22:33"),
     "interface spec.template.spec.domain.devices.interfaces[0].name has malformed MAC address (fa:16:3e:zz:22:33)."),
    (lambda i, n: i[0].update(macAddress="02:00:5e:10:00:00:00:01"),
     ("interface spec.template.spec.domain.devices.interfaces[0].name has too long MAC address "
     "(02:00:5e:10:00:00:00:01).")),
    (lambda i, n: (i[0].pop("bridge"), i[0].update(masquerade={})),
     "Masquerade interface only implemented with pod network"),
    (lambda i, n: (i[0].pop("bridge"), i[0].update(masquerade={}, state="absent")),
     "\"" + PORT1[:8] + "\" interface's state \"absent\" is supported only for bridge binding, "
     "Masquerade interface only implemented with pod network"),
    (lambda i, n: n[0]["multus"].pop("networkName"), "CNI delegating plugin must have a networkName"),
    (lambda i, n: i[0].update(state="sleeping"), f"logical {PORT1[:8]} interface state value is unsupported: sleeping"),
    (lambda i, n: i[0].update(sriov={}), (f"logical {PORT1[:8]} interface must have exactly one binding method or "
                                         "binding plugin")),
    (lambda i, n: i[0].update(model="vmxnet3"),
     "interface spec.template.spec.domain.devices.interfaces[0].name uses model vmxnet3 that is not supported."),
])
def test_kubevirts_network_admission_refuses_what_it_refuses(cluster, client, change, message):
    vm = neutron_vm()
    change(*_template_interfaces(vm))
    with pytest.raises(ApiError) as caught:
        client.create(VM.from_dict(vm), namespace=NS)
    assert caught.value.status.code == 422
    assert caught.value.status.message == ('admission webhook "virtualmachine-validator.kubevirt.io" denied the '
                                           f"request: {message}")


def test_absent_is_refused_on_the_default_network(cluster, client):
    vm = server_vm()
    vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"] = [{"name": "default", "bridge": {},
                                                                          "state": "absent"}]
    with pytest.raises(ApiError) as caught:
        client.create(VM.from_dict(vm), namespace=NS)
    assert caught.value.status.message.endswith('"default" interface\'s state "absent" is not supported on '
                                                "default networks")


def _patch_template(client, ifaces: list, nets: list) -> None:
    client.patch(VM, VM_NAME, [{"op": "replace", "path": "/spec/template/spec/domain/devices/interfaces",
                                "value": ifaces},
                               {"op": "replace", "path": "/spec/template/spec/networks", "value": nets}],
                 namespace=NS, patch_type=__import__("lightkube").types.PatchType.JSON)


def test_an_interface_hotplugged_and_unplugged_on_a_running_vm(cluster, client):
    client.create(NAD.from_dict(nad()), namespace=NS)
    client.create(NAD.from_dict(nad("second")), namespace=NS)
    cluster.lifecycle.delays = type(cluster.lifecycle.delays)(**{**cluster.lifecycle.delays.__dict__,
                                                                  "hotplug": 0.3})
    _boot(cluster, client, neutron_vm())
    running(cluster)
    # the controller updates the network data first (the guest reads it when the NIC appears), then the VM
    secret = net_secret(network_data((PORT1, MAC, "192.0.2.10"), (PORT2, MAC2, "198.51.100.7")))
    cluster.seed(secret)
    vm = cluster.get("VirtualMachine", VM_NAME, NS)
    ifaces, nets = copy.deepcopy(_template_interfaces(vm))
    ifaces.append({"name": PORT2[:8], "bridge": {}, "macAddress": MAC2})
    nets.append({"name": PORT2[:8], "multus": {"networkName": f"{NS}/second"}})
    _patch_template(client, ifaces, nets)
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: any(
        c.get("type") == "MigrationRequired" for c in o["status"]["conditions"]))
    assert [i["name"] for i in vmi["spec"]["domain"]["devices"]["interfaces"]] == [PORT1[:8], PORT2[:8]]
    cond = next(c for c in vmi["status"]["conditions"] if c["type"] == "MigrationRequired")
    assert (cond["status"], cond["reason"]) == ("False", "AutoMigrationPending")
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: (_iface(o, PORT2[:8]) or {}).get("mac"))
    assert _iface(vmi, PORT2[:8]) == {
        "name": PORT2[:8], "mac": MAC2, "ipAddress": "198.51.100.7",
        "ipAddresses": ["198.51.100.7", "fe80::f816:3eff:fe44:5566"], "interfaceName": "enp2s0",
        "infoSource": "domain, guest-agent, multus-status",
        "podInterfaceName": networks.pod_interface_name(PORT2[:8]), "queueCount": 1, "linkState": "up"}
    assert not any(c["type"] == "MigrationRequired" for c in vmi["status"]["conditions"])
    statuses = json.loads(_pod(cluster)["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"])
    assert [s["name"] for s in statuses] == ["ovn-kubernetes", f"{NS}/neutron-{NET_ID}", f"{NS}/second"]
    vm = cluster.get("VirtualMachine", VM_NAME, NS)
    assert not any(c["type"] == "RestartRequired" for c in vm["status"]["conditions"])

    # unplug: absent first, then KubeVirt removes it from the VMI and from the VM
    ifaces[1]["state"] = "absent"
    _patch_template(client, ifaces, nets)
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS,
                           lambda o: _iface(o, PORT2[:8]) is not None and "mac" not in _iface(o, PORT2[:8]))
    assert _iface(vmi, PORT2[:8]) == {"name": PORT2[:8], "infoSource": "multus-status",
                                      "podInterfaceName": networks.pod_interface_name(PORT2[:8])}
    cluster.wait_for("VirtualMachine", VM_NAME, NS,
                     lambda o: len(_template_interfaces(o)[0]) == 1 and len(_template_interfaces(o)[1]) == 1)
    vmi = _vmi(cluster)
    assert [i["name"] for i in vmi["spec"]["domain"]["devices"]["interfaces"]] == [PORT1[:8]]
    assert [i["name"] for i in vmi["status"]["interfaces"]] == [PORT1[:8]]
    statuses = json.loads(_pod(cluster)["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"])
    assert [s["name"] for s in statuses] == ["ovn-kubernetes", f"{NS}/neutron-{NET_ID}"]
    assert not any(c["type"] == "RestartRequired" for c in cluster.get("VirtualMachine", VM_NAME, NS)["status"][
        "conditions"])


def test_an_interface_kubevirt_cannot_hotplug_asks_for_a_restart(cluster, client):
    client.create(NAD.from_dict(nad()), namespace=NS)
    _boot(cluster, client, neutron_vm())
    running(cluster)
    vm = cluster.get("VirtualMachine", VM_NAME, NS)
    ifaces, nets = copy.deepcopy(_template_interfaces(vm))
    ifaces.append({"name": "default", "masquerade": {}})
    nets.append({"name": "default", "pod": {}})
    _patch_template(client, ifaces, nets)
    vm = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: any(
        c["type"] == "RestartRequired" for c in o["status"].get("conditions") or ()))
    cond = next(c for c in vm["status"]["conditions"] if c["type"] == "RestartRequired")
    assert (cond["status"], cond["message"]) == ("True", "a non-live-updatable field was changed in the template spec")
    assert [i["name"] for i in _vmi(cluster)["spec"]["domain"]["devices"]["interfaces"]] == [PORT1[:8]]
    assert put(client, "virtualmachines", VM_NAME, "restart").status_code == 202
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: o is not None and len(
        o["spec"]["domain"]["devices"]["interfaces"]) == 2 and o["status"].get("phase") == "Running")
    vm = cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: not any(
        c["type"] == "RestartRequired" for c in o["status"].get("conditions") or ()))
    names = [e["name"] for e in _vmi(cluster)["status"]["interfaces"]]
    assert names == ["default", PORT1[:8]]  # the pod network first


def test_a_hotplug_under_way_goes_on_after_a_restart_and_a_stopped_vm_drops_absent_interfaces(kept):
    from openkeel_compute.controller.kube import make_client
    from openkeel_compute.emulator import Delays

    slow = Delays(**{**Delays.fast().__dict__, "hotplug": 0.6})
    cluster = kept(delays=slow)
    client = make_client(cluster.kubeconfig(), timeout=5)
    cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    client.create(NAD.from_dict(nad()), namespace=NS)
    client.create(NAD.from_dict(nad("second")), namespace=NS)
    _boot(cluster, client, neutron_vm())
    running(cluster)
    vm = cluster.get("VirtualMachine", VM_NAME, NS)
    ifaces, nets = copy.deepcopy(_template_interfaces(vm))
    ifaces.append({"name": PORT2[:8], "bridge": {}, "macAddress": MAC2})
    nets.append({"name": PORT2[:8], "multus": {"networkName": "second"}})
    _patch_template(client, ifaces, nets)
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: _iface(o, PORT2[:8]) is not None)
    client.close()
    cluster.stop()
    assert "mac" not in _iface(cluster.get("VirtualMachineInstance", VM_NAME, NS), PORT2[:8])  # cut mid-way

    again = kept(delays=slow)
    vmi = again.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: "mac" in (_iface(o, PORT2[:8]) or {}))
    assert _iface(vmi, PORT2[:8])["mac"] == MAC2
    client = make_client(again.kubeconfig(), timeout=5)
    assert put(client, "virtualmachines", VM_NAME, "stop").status_code == 202
    again.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: o is None)
    ifaces[1]["state"] = "absent"
    _patch_template(client, ifaces, nets)  # no VMI: KubeVirt drops it from the VM at once
    vm = again.wait_for("VirtualMachine", VM_NAME, NS, lambda o: len(_template_interfaces(o)[0]) == 1)
    assert [n["name"] for n in _template_interfaces(vm)[1]] == [PORT1[:8]]
    client.close()


def test_the_guest_agent_answers_through_virt_apis_subresources(cluster, client):
    client.create(NAD.from_dict(nad()), namespace=NS)
    base = f"{cluster.url}/apis/subresources.kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances/{VM_NAME}"
    assert httpx.get(f"{base}/guestosinfo").status_code == 404
    _boot(cluster, client, neutron_vm())
    running(cluster)
    info = httpx.get(f"{base}/guestosinfo").json()
    assert info["os"]["prettyName"] == "Ubuntu 24.04.1 LTS" and info["hostname"] == VM_NAME
    assert {"name": "guest-ping", "enabled": True} in info["supportedCommands"]
    root = info["fsInfo"]["disks"][0]
    assert (root["mountPoint"], root["fileSystemType"], root["disk"][0]["busType"]) == ("/", "ext4", "virtio")
    assert httpx.get(f"{base}/userlist").json() == {"metadata": {}, "items": []}
    assert httpx.get(f"{base}/filesystemlist").json()["items"] == [root]
    assert put(client, "virtualmachines", VM_NAME, "stop").status_code == 202
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: o is None)
    vm = neutron_vm(agent=False)
    client.delete(VM, VM_NAME, namespace=NS)
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o is None)
    client.create(VM.from_dict(vm), namespace=NS)
    assert put(client, "virtualmachines", VM_NAME, "start").status_code == 202
    running(cluster)
    refused = httpx.get(f"{base}/guestosinfo")
    assert (refused.status_code, refused.json()["message"]) == (
        409, (f'Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "{VM_NAME}": VMI does not have '
             "guest agent connected"))


def test_an_interface_hotplugged_onto_a_missing_network_waits_for_its_definition(cluster, client):
    client.create(NAD.from_dict(nad()), namespace=NS)
    _boot(cluster, client, neutron_vm())
    running(cluster)
    vm = cluster.get("VirtualMachine", VM_NAME, NS)
    ifaces, nets = copy.deepcopy(_template_interfaces(vm))
    ifaces.append({"name": PORT2[:8], "bridge": {}, "macAddress": MAC2})
    nets.append({"name": PORT2[:8], "multus": {"networkName": "later"}})
    _patch_template(client, ifaces, nets)
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: any(
        c.get("type") == "MigrationRequired" for c in o["status"]["conditions"]))
    cluster.lifecycle.step()
    cluster.lifecycle.step()
    vmi = cluster.get("VirtualMachineInstance", VM_NAME, NS)
    assert _iface(vmi, PORT2[:8]) is None  # Multus cannot attach it
    client.create(NAD.from_dict(nad("later")), namespace=NS)
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: "mac" in (_iface(o, PORT2[:8]) or {}))
    assert not any(c["type"] == "MigrationRequired" for c in vmi["status"]["conditions"])
