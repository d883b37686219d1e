"""A server's Neutron ports across shelve offload and unshelve (the in-memory Neutron over HTTP), on every
database engine: the offload unbinds them from the node the server leaves (``binding:host_id`` cleared, the
port still the server's: ``device_id``, ``device_owner``, its address kept), as Nova's offload cleans the
host's bindings; the unshelve binds them to the node it claimed (``binding:host_id``, ``device_owner``
``compute:<zone>``) before the VM is made, and the VM has the same interfaces (the ports' MACs) again."""

from __future__ import annotations

import pytest

from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.images import glance
from openkeel_compute.network.client import NeutronClient
from tests.conftest import admin, conf_on
from tests.server_world import DEMO, IMAGE, image_service, server_world, until

PROJECT = "demo-project"


@pytest.fixture
def world(tmp_path, db_engine, placement_service, neutron):
    options = {"auth_type": "admin_token", "endpoint": neutron.url, "token": "neutron-admin",
               "endpoint_override": neutron.url}
    with conf_on(db_engine, tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                 neutron=options) as conf:
        conf.set_override("shelved_offload_time", 0)
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with image_service(tmp_path) as url:
            glance.register_opts(conf)
            conf.set_override("api_servers", [url], group="glance")
            make = lambda kube: make_loop(kube, engine, images=ImageAccess.from_conf(conf), network=NeutronClient(conf),
                                          shelved_offload_time=0.0, vif_plugging_timeout=0)
            with server_world(conf, make, placement_service, nodes=2) as (client, controller, cluster):
                yield client, controller, cluster


def _settled(status):
    return lambda got: (got.status_code == 200 and got.json["server"]["status"] == status
                        and got.json["server"]["OS-EXT-STS:task_state"] is None)


def _vm_macs(cluster, uuid):
    found = [o for k, o in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    if not found:
        return None
    return [i.get("macAddress") for i in found[0]["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]]


def test_offload_unbinds_the_ports_and_unshelve_binds_them_on_the_new_node(world, neutron):
    client, controller, cluster = world
    net = neutron.network(name="private", project_id=PROJECT)
    mine = neutron.port(net, project_id=PROJECT)
    assert client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.np", "ram": 512, "vcpus": 1, "disk": 1, "id": "np"}}).status_code == 200
    got = client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
        "name": "web-1", "imageRef": IMAGE, "flavorRef": "np", "networks": [{"uuid": net["id"]}, {"port": mine["id"]}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    server = until(client, controller, uuid, _settled("ACTIVE")).json["server"]
    assert server["status"] == "ACTIVE"
    first = client.get(f"/v2.1/servers/{uuid}", headers=admin()).json["server"]["OS-EXT-SRV-ATTR:host"]
    made = next(p for p in neutron.ports.values() if p["device_id"] == uuid and p["id"] != mine["id"])
    ours = [neutron.ports[made["id"]], neutron.ports[mine["id"]]]
    assert [(p["device_id"], p["device_owner"], p["binding:host_id"]) for p in ours] == [
        (uuid, "compute:nova", first)] * 2
    macs = _vm_macs(cluster, uuid)
    assert macs == [made["mac_address"], mine["mac_address"]]

    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    assert until(client, controller, uuid, _settled("SHELVED_OFFLOADED")).json["server"]["status"] == \
        "SHELVED_OFFLOADED"
    # unbound from the node left, still the server's (its addresses kept, as Nova's offloaded server shows)
    assert [(p["device_id"], p["device_owner"], p["binding:host_id"], p["binding:vif_type"]) for p in ours] == [
        (uuid, "compute:nova", None, "unbound")] * 2
    assert {p["id"] for p in neutron.ports.values() if p["device_id"] == uuid} == {made["id"], mine["id"]}
    shown = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]
    assert shown["addresses"]["private"][0]["addr"] == made["fixed_ips"][0]["ip_address"]
    assert _vm_macs(cluster, uuid) is None
    # its interfaces still listed, as the servers oracle lists an offloaded server's (Neutron's device_id)
    listed = client.get(f"/v2.1/servers/{uuid}/os-interface", headers=DEMO).json["interfaceAttachments"]
    assert sorted(i["port_id"] for i in listed) == sorted([made["id"], mine["id"]])

    binds = len(neutron.requests)
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"unshelve": None})
    assert got.status_code == 202, got.text
    server = until(client, controller, uuid, _settled("ACTIVE")).json["server"]
    assert server["status"] == "ACTIVE"
    other = client.get(f"/v2.1/servers/{uuid}", headers=admin()).json["server"]["OS-EXT-SRV-ATTR:host"]
    assert other
    assert [(p["device_id"], p["device_owner"], p["binding:host_id"], p["binding:vif_type"]) for p in ours] == [
        (uuid, "compute:nova", other, "ovs")] * 2
    # bound to the node claimed (Nova's setup_instance_network_on_host), the VM has the same interfaces
    writes = [r.get("body") for r in neutron.requests[binds:] if r["method"] == "PUT"]
    assert writes == [{"port": {"binding:host_id": other, "device_owner": "compute:nova"}}] * 2, writes
    assert _vm_macs(cluster, uuid) == macs

    # deleted at last: OpenKeel's port goes, the user's is unbound and kept
    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    until(client, controller, uuid, lambda got: got.status_code == 404)
    assert made["id"] not in neutron.ports
    assert (neutron.ports[mine["id"]]["device_id"], neutron.ports[mine["id"]]["binding:host_id"]) == ("", None)
