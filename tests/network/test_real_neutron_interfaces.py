"""Interface attach and detach against a real Neutron 29 (the session's, tests/network/shared_neutron.py),
through the API with real Keystone tokens (keystonemiddleware) and the controller on the built-in cluster:
a server booted on the shared ``private`` network gets a port the project made and a port on a network of
its own attached; each comes back bound to the server's node with Nova's fields (``device_id``,
``device_owner`` ``compute:nova``, ``binding:host_id``, ``binding:vif_type`` ``ovs``: an Open vSwitch agent
is registered for the cluster's nodes, as neutron-up.sh's ``agent`` does) and the VM has its interface; once
detached, the project's port is unbound and kept, the port OpenKeel made is deleted, and the VM no longer
has them. No agent plugs the ports here: ``vif_plugging_timeout = 0`` (the build and the attach do not
wait for network-vif-plugged). A server's ports across shelve offload (unbound from the node, still the
server's) and unshelve (bound to the node claimed again) are checked the same way. A server's body lists the
security groups of its port as Neutron has them: after addSecurityGroup, removeSecurityGroup, and a change of
the port's groups made in Neutron itself."""

from __future__ import annotations

import os
import pathlib
import subprocess
import time
import types

import pytest

from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.images import glance
from openkeel_compute.network.client import NeutronClient
from tests.conftest import make_conf
from tests.network.shared_neutron import RECIPES
from tests.network.test_real_neutron import _env
from tests.server_world import IMAGE, image_service, server_world

pytestmark = pytest.mark.xdist_group("real-neutron")
NODES = ("emulated-node-1",)


def _token(ks, who):
    from keystoneauth1 import session
    from keystoneauth1.identity import v3

    auth = v3.Password(auth_url=ks["KEYSTONE_URL"], username=ks[f"{who}_USERNAME"], password=ks[f"{who}_PASSWORD"],
                       project_name=ks[f"{who}_PROJECT_NAME"], user_domain_name="Default",
                       project_domain_name="Default")
    sess = session.Session(auth=auth)
    return sess.get_token(), sess.get_project_id()


def _agents(base: pathlib.Path) -> None:
    """An Open vSwitch agent reported alive on each node (neutron-up.sh agent): Neutron binds ports there."""
    cache = pathlib.Path(os.environ.get("OPENKEEL_CACHE", pathlib.Path.home() / ".cache" / "openkeel"))
    own = base / "neutron-venv"  # neutron-up.sh's default: a Neutron OPENKEEL_TEST_NEUTRON_DIR names may have it
    venv = os.environ.get("NEUTRON_VENV") or str(own if own.exists() else cache / "shared-neutron" / "neutron-venv")
    env = {**os.environ, "OKC_SERVICES_DIR": str(base), "HARNESS_DIR": str(base / "harness"), "NEUTRON_VENV": venv,
           "PYTHONWARNINGS": "ignore"}
    subprocess.run([str(RECIPES / "neutron-up.sh"), "agent", *NODES], env=env, check=True, capture_output=True,
                   stdin=subprocess.DEVNULL, timeout=300)


@pytest.fixture(scope="module")
def cloud(real_neutron_dir):
    base = pathlib.Path(real_neutron_dir)
    ks, nets = _env(base / "harness" / "keystone.env"), _env(base / "networks.env")
    _agents(base)
    demo, project = _token(ks, "DEMO")
    admin, _ = _token(ks, "ADMIN")
    return types.SimpleNamespace(ks=ks, nets=nets, demo=demo, admin=admin, project=project)


@pytest.fixture
def world(tmp_path, cloud, placement_service):
    from openkeel_compute import policies

    ks = cloud.ks
    service = {"auth_type": "password", "auth_url": ks["KEYSTONE_URL"], "username": ks["SERVICE_USERNAME"],
               "password": ks["SERVICE_PASSWORD"], "project_name": ks["SERVICE_PROJECT_NAME"],
               "user_domain_name": "Default", "project_domain_name": "Default", "region_name": "RegionOne"}
    policies.reset()
    conf = make_conf(tmp_path, auth_strategy="keystone", controller={"poll_interval": "0.05", "workers": "4"},
                     DEFAULT={"vif_plugging_timeout": "0"}, neutron=service,
                     keystone_authtoken={**service, "www_authenticate_uri": ks["KEYSTONE_URL"].removesuffix("/v3"),
                                         "interface": "public", "service_type": "compute"})
    conf.set_override("shelved_offload_time", 0)  # a shelve offloads at once
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    with image_service(tmp_path) as url:
        glance.register_opts(conf)
        conf.set_override("api_servers", [url], group="glance")
        network = NeutronClient(conf)
        make = lambda kube: make_loop(kube, engine, images=ImageAccess.from_conf(conf), network=network,
                                      vif_plugging_timeout=0, shelved_offload_time=0.0)
        with server_world(conf, make, placement_service) as (client, controller, cluster):
            yield types.SimpleNamespace(api=client, controller=controller, cluster=cluster, neutron=network.admin(),
                                        made=[])
    policies.reset()


def _h(token, version="2.1"):
    return {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"}


def _until(world, done, timeout=120.0, what=""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        world.controller.run_once()
        got = done()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not reached in {timeout} s: {what}")


def _port(world, port_id):
    found = world.neutron.list_ports(id=port_id)
    return found[0] if found else None


def _vm_macs(world, uuid):
    vm = next((o for k, o in world.cluster.objects("VirtualMachine").items() if k[1] == uuid), None)
    interfaces = vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"] if vm else []
    return [i.get("macAddress") for i in interfaces if i.get("state") != "absent"]


def _vmi_macs(world, uuid):
    vmi = next((o for k, o in world.cluster.objects("VirtualMachineInstance").items() if k[1] == uuid), None)
    return {i.get("mac") for i in ((vmi or {}).get("status") or {}).get("interfaces") or ()}


def test_attach_and_detach_against_a_real_neutron(world, cloud):
    api, neutron = world.api, world.neutron
    demo, admin = _h(cloud.demo), _h(cloud.admin)
    got = api.post("/v2.1/flavors", headers=admin, json_body={
        "flavor": {"name": "m1.rn", "ram": 512, "vcpus": 1, "disk": 1, "id": "rn"}})
    assert got.status_code == 200, got.text
    own = neutron.request("POST", "/networks", ok=(201,), body={"network": {
        "name": "okc-backend", "project_id": cloud.project}})["network"]
    neutron.request("POST", "/subnets", ok=(201,), body={"subnet": {
        "network_id": own["id"], "project_id": cloud.project, "cidr": "10.77.0.0/24", "ip_version": 4}})
    user_port = neutron.request("POST", "/ports", ok=(201,), body={"port": {
        "network_id": cloud.nets["PRIVATE_NETWORK_ID"], "project_id": cloud.project, "name": "okc-user"}})["port"]
    uuid = None
    try:
        got = api.post("/v2.1/servers", headers=_h(cloud.demo, "2.49"), json_body={"server": {
            "name": "rn-1", "imageRef": IMAGE, "flavorRef": "rn",
            "networks": [{"uuid": cloud.nets["PRIVATE_NETWORK_ID"]}]}})
        assert got.status_code == 202, got.text
        uuid = got.json["server"]["id"]

        def active():
            server = api.get(f"/v2.1/servers/{uuid}", headers=admin).json["server"]
            return server if server["status"] == "ACTIVE" and server["OS-EXT-STS:task_state"] is None else None

        node = _until(world, active, what="ACTIVE")["OS-EXT-SRV-ATTR:host"]
        assert node in NODES
        [first] = neutron.list_ports(device_id=uuid)
        assert (first["device_owner"], first["binding:host_id"], first["binding:vif_type"]) == (
            "compute:nova", node, "ovs")

        # the project's own port, then a port on its own network
        got = api.post(f"/v2.1/servers/{uuid}/os-interface", headers=_h(cloud.demo, "2.49"),
                       json_body={"interfaceAttachment": {"port_id": user_port["id"], "tag": "user"}})
        assert got.status_code == 200, got.text
        assert got.json["interfaceAttachment"]["port_id"] == user_port["id"]
        got = api.post(f"/v2.1/servers/{uuid}/os-interface", headers=demo,
                       json_body={"interfaceAttachment": {"net_id": own["id"]}})
        assert got.status_code == 200, got.text
        made = got.json["interfaceAttachment"]
        assert (made["net_id"], made["port_state"]) == (own["id"], "DOWN")  # Neutron's, before binding

        def bound(port_id):
            port = _port(world, port_id)
            return port if port and port["binding:host_id"] == node and port["mac_address"] in _vmi_macs(
                world, uuid) else None

        for port_id in (user_port["id"], made["port_id"]):
            port = _until(world, lambda port_id=port_id: bound(port_id), what=f"port {port_id} bound and plugged")
            assert (port["device_id"], port["device_owner"], port["binding:vif_type"]) == (uuid, "compute:nova", "ovs")
        assert _vm_macs(world, uuid) == [first["mac_address"], user_port["mac_address"], made["mac_addr"]]
        listed = api.get(f"/v2.1/servers/{uuid}/os-interface", headers=demo).json["interfaceAttachments"]
        assert sorted(i["port_id"] for i in listed) == sorted([first["id"], user_port["id"], made["port_id"]])
        addresses = _until(world, lambda: (a := api.get(f"/v2.1/servers/{uuid}", headers=demo).json["server"][
            "addresses"]) and "okc-backend" in a and a, what="addresses")
        assert addresses["okc-backend"][0]["addr"] == made["fixed_ips"][0]["ip_address"]

        # detached: the project's port unbound and kept, OpenKeel's deleted, both out of the VM
        for port_id in (user_port["id"], made["port_id"]):
            got = api.delete(f"/v2.1/servers/{uuid}/os-interface/{port_id}", headers=demo)
            assert got.status_code == 202, got.text
        kept = _until(world, lambda: (p := _port(world, user_port["id"])) and not p["device_id"] and p,
                      what="the user's port unbound")
        assert (kept["device_id"], kept["device_owner"], kept["binding:host_id"], kept["binding:vif_type"]) == (
            "", "", "", "unbound")
        _until(world, lambda: _port(world, made["port_id"]) is None, what="OpenKeel's port deleted")
        _until(world, lambda: user_port["mac_address"] not in _vmi_macs(world, uuid)
               and made["mac_addr"] not in _vmi_macs(world, uuid), what="the VMI without them")
        assert _vm_macs(world, uuid) == [first["mac_address"]]
        listed = api.get(f"/v2.1/servers/{uuid}/os-interface", headers=demo).json["interfaceAttachments"]
        assert [i["port_id"] for i in listed] == [first["id"]]
        assert api.get(f"/v2.1/servers/{uuid}", headers=admin).json["server"]["status"] == "ACTIVE"
    finally:
        if uuid is not None:
            api.delete(f"/v2.1/servers/{uuid}", headers=admin)
            try:
                _until(world, lambda: api.get(f"/v2.1/servers/{uuid}", headers=admin).status_code == 404, 60)
            except AssertionError:
                pass
        for port in neutron.list_ports(network_id=own["id"]):
            neutron.request("DELETE", f"/ports/{port['id']}", ok=(204, 404))
        neutron.request("DELETE", f"/ports/{user_port['id']}", ok=(204, 404))
        neutron.request("DELETE", f"/networks/{own['id']}", ok=(204, 404))


def test_shelve_offload_unbinds_and_unshelve_binds_against_a_real_neutron(world, cloud):
    api, neutron = world.api, world.neutron
    demo, admin = _h(cloud.demo), _h(cloud.admin)
    got = api.post("/v2.1/flavors", headers=admin, json_body={
        "flavor": {"name": "m1.rs", "ram": 512, "vcpus": 1, "disk": 1, "id": "rs"}})
    assert got.status_code == 200, got.text
    got = api.post("/v2.1/servers", headers=demo, json_body={"server": {
        "name": "rs-1", "imageRef": IMAGE, "flavorRef": "rs", "networks": [{"uuid": cloud.nets["PRIVATE_NETWORK_ID"]}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]

    def settled(status):
        def check():
            server = api.get(f"/v2.1/servers/{uuid}", headers=admin).json["server"]
            return server if server["status"] == status and server["OS-EXT-STS:task_state"] is None else None
        return check

    try:
        node = _until(world, settled("ACTIVE"), what="ACTIVE")["OS-EXT-SRV-ATTR:host"]
        [port] = neutron.list_ports(device_id=uuid)
        assert (port["device_owner"], port["binding:host_id"], port["binding:vif_type"]) == ("compute:nova", node, "ovs")
        assert api.post(f"/v2.1/servers/{uuid}/action", headers=demo, json_body={"shelve": None}).status_code == 202
        _until(world, settled("SHELVED_OFFLOADED"), what="SHELVED_OFFLOADED")
        [offloaded] = neutron.list_ports(device_id=uuid)
        assert (offloaded["id"], offloaded["device_owner"], offloaded["binding:host_id"],
                offloaded["binding:vif_type"], offloaded["fixed_ips"]) == (
            port["id"], "compute:nova", "", "unbound", port["fixed_ips"])
        assert api.post(f"/v2.1/servers/{uuid}/action", headers=demo, json_body={"unshelve": None}).status_code == 202
        again = _until(world, settled("ACTIVE"), what="ACTIVE again")["OS-EXT-SRV-ATTR:host"]
        [unshelved] = neutron.list_ports(device_id=uuid)
        assert (unshelved["id"], unshelved["device_owner"], unshelved["binding:host_id"],
                unshelved["binding:vif_type"]) == (port["id"], "compute:nova", again, "ovs")
        assert _vm_macs(world, uuid) == [port["mac_address"]]
    finally:
        api.delete(f"/v2.1/servers/{uuid}", headers=admin)
        try:
            _until(world, lambda: api.get(f"/v2.1/servers/{uuid}", headers=admin).status_code == 404, 60)
        except AssertionError:
            pass
    assert neutron.list_ports(device_id=uuid) == []


def test_server_bodies_show_the_ports_security_groups_against_a_real_neutron(world, cloud):
    """addSecurityGroup: the server's show lists the group; removeSecurityGroup: gone; the port's groups
    emptied in Neutron itself: no ``security_groups`` at all (Nova's view reads them from the ports)."""
    api, neutron = world.api, world.neutron
    demo, admin = _h(cloud.demo), _h(cloud.admin)
    got = api.post("/v2.1/flavors", headers=admin, json_body={
        "flavor": {"name": "m1.sg", "ram": 512, "vcpus": 1, "disk": 1, "id": "sg"}})
    assert got.status_code == 200, got.text
    name = f"okc-sg-{os.getpid()}"
    group = neutron.request("POST", "/security-groups", ok=(201,), body={"security_group": {
        "name": name, "project_id": cloud.project}})["security_group"]
    got = api.post("/v2.1/servers", headers=demo, json_body={"server": {
        "name": "sg-1", "imageRef": IMAGE, "flavorRef": "sg", "networks": [{"uuid": cloud.nets["PRIVATE_NETWORK_ID"]}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]

    def shown(version="2.1"):
        return api.get(f"/v2.1/servers/{uuid}", headers=_h(cloud.demo, version)).json["server"]

    def in_detail():
        servers = api.get("/v2.1/servers/detail", headers=demo).json["servers"]
        return next(s for s in servers if s["id"] == uuid).get("security_groups")

    def port_names():
        """The names of the port's groups in the order Neutron lists them."""
        [port] = neutron.list_ports(device_id=uuid)
        by_id = {g["id"]: g["name"] for g in neutron.list_security_groups(id=port["security_groups"])}
        return [{"name": by_id[g]} for g in port["security_groups"]]

    try:
        _until(world, lambda: (s := shown()) and s["status"] == "ACTIVE" and s["OS-EXT-STS:task_state"] is None,
               what="ACTIVE")
        assert shown()["security_groups"] == [{"name": "default"}]
        act = f"/v2.1/servers/{uuid}/action"
        assert api.post(act, headers=demo, json_body={"addSecurityGroup": {"name": name}}).status_code == 202
        assert sorted(g["name"] for g in shown()["security_groups"]) == sorted(["default", name])
        assert shown()["security_groups"] == port_names() == in_detail()
        assert shown("2.96")["security_groups"] == port_names()
        assert api.post(act, headers=demo, json_body={"removeSecurityGroup": {"name": name}}).status_code == 202
        assert shown()["security_groups"] == [{"name": "default"}] == in_detail()

        # the port's groups changed in Neutron itself
        [port] = neutron.list_ports(device_id=uuid)
        neutron.update_port(port["id"], {"security_groups": [group["id"]]})
        assert shown()["security_groups"] == [{"name": name}]
        neutron.update_port(port["id"], {"security_groups": []})
        assert "security_groups" not in shown() and in_detail() is None
    finally:
        api.delete(f"/v2.1/servers/{uuid}", headers=admin)
        try:
            _until(world, lambda: api.get(f"/v2.1/servers/{uuid}", headers=admin).status_code == 404, 60)
        except AssertionError:
            pass
        neutron.request("DELETE", f"/security-groups/{group['id']}", ok=(204, 404))
