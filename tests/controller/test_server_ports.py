"""With [neutron] set the controller's build makes the server's interfaces Neutron ports (issue 29.3,
29.4, 29.9): ports created or taken with Nova's fields, bound to the server's node, a Multus
NetworkAttachmentDefinition per Neutron network in the server's namespace, one VM interface per port
with the port's MAC (the built-in cluster's launcher pod and VMI show it), the build waiting for
network-vif-plugged as Nova's driver does, and the delete deleting OpenKeel's ports, unbinding the
user's and collecting the NetworkAttachmentDefinitions. Runs on every database engine, against the
in-memory Neutron over HTTP; the events reach OpenKeel through POST /os-server-external-events, as
Neutron's nova notifier sends them."""

from __future__ import annotations

import dataclasses
import json
import urllib.request

import pytest

from openkeel_compute.api.deploy import deploy
from openkeel_compute.compute import network_requests
from openkeel_compute.compute.instances import instance_faults
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.model import states
from tests.conftest import admin, make_conf
from tests.controller.helpers import Both, active, boot, row_of, until
from tests.databases import ENGINES, throwaway_database
from tests.network.fake_neutron import FakeNeutron
from tests.wsgi_client import Client

NAD = "NetworkAttachmentDefinition"
STATUS = "k8s.v1.cni.cncf.io/network-status"


@pytest.fixture
def neutron():
    fake = FakeNeutron()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


def _conf(tmp_path, url, neutron, **default):
    return make_conf(tmp_path, DEFAULT=default, controller={"poll_interval": "0.05", "workers": "4"},
                     database={"connection": url}, glance={"api_servers": "http://glance.test:9292"},
                     neutron={"auth_type": "admin_token", "endpoint": neutron.url, "token": "neutron-admin",
                              "endpoint_override": neutron.url})


@pytest.fixture(params=ENGINES)
def conf(request, tmp_path, neutron):
    marker = request.node.get_closest_marker("vif")
    options = marker.kwargs if marker else {"vif_plugging_timeout": "30"}
    with throwaway_database(request.param, tmp_path) as url:
        conf = _conf(tmp_path, url, neutron, **options)
        migration.sync(db_api.get_engine(conf))
        yield conf
        db_api.dispose_all()


@pytest.fixture
def world(conf, apiserver, ctl, neutron):
    """(loop, engine, the API as Neutron's nova notifier reaches it)."""
    api = Client(deploy(conf))
    neutron.notify = lambda events: api.post("/v2.1/os-server-external-events", headers=admin("2.1"),
                                             json_body={"events": events})
    client = make_client(apiserver.kubeconfig())
    loop = server_loop_from(conf, db_api.get_engine(conf), client)
    yield Both(ctl, loop), db_api.get_engine(conf), api
    loop.close()
    client.close()


def _boot(engine, requests):
    uuid = boot(engine, requested_networks="requested")
    with db_api.transaction(engine) as conn:
        network_requests.record(conn, uuid, [{"position": i, **r} for i, r in enumerate(requests)])
    return uuid


def _plug_all(neutron, uuid):
    for port in [p for p in neutron.ports.values() if p["device_id"] == uuid]:
        neutron.plug(port["id"])


def test_build_binds_ports_and_gives_the_vm_their_macs(world, apiserver, neutron):
    loop, engine, api = world
    net = neutron.network(name="private", project_id="project-1")
    theirs = neutron.port(net, project_id="project-1")
    uuid = _boot(engine, [{"network_id": net["id"]}, {"network_id": net["id"], "port_id": theirs["id"]}])
    row = until(loop, engine, uuid, lambda r: r["node"] and r["namespace"]
                and all(p.get("binding:host_id") for p in neutron.ports.values()))
    ours = [p for p in neutron.ports.values() if p["id"] != theirs["id"]]
    assert len(ours) == 1
    created = neutron.requests[[r["method"] for r in neutron.requests].index("POST")]["body"]["port"]
    assert created == {"device_id": uuid, "network_id": net["id"], "admin_state_up": True, "tenant_id": "project-1"}
    for port in (ours[0], theirs):
        assert (port["device_id"], port["device_owner"], port["binding:host_id"]) == (uuid, "compute:nova", row["node"])
    # waiting for the plug events: still BUILD although the VM runs
    assert row_of(engine, uuid)["vm_state"] == states.BUILDING
    namespace = row["namespace"]
    nad = apiserver.get(NAD, f"neutron-{net['id']}", namespace)
    assert json.loads(nad["spec"]["config"]) == {
        "cniVersion": "0.3.1", "name": f"neutron-{net['id']}", "type": "ovn-k8s-cni-overlay", "topology": "layer2",
        "netAttachDefName": f"{namespace}/neutron-{net['id']}", "mtu": 1450}
    vm = apiserver.get("VirtualMachine", uuid, namespace)
    tspec = vm["spec"]["template"]["spec"]
    assert [(i["name"], i["macAddress"]) for i in tspec["domain"]["devices"]["interfaces"]] == [
        (f"port-{ours[0]['id']}", ours[0]["mac_address"]), (f"port-{theirs['id']}", theirs["mac_address"])]
    assert {n["multus"]["networkName"] for n in tspec["networks"]} == {f"neutron-{net['id']}"}
    assert not any("pod" in n for n in tspec["networks"])

    _plug_all(neutron, uuid)
    row = until(loop, engine, uuid, active)
    assert active(row)
    vmi = apiserver.get("VirtualMachineInstance", uuid, namespace)
    macs = {i.get("mac") for i in vmi["status"].get("interfaces") or ()}
    assert {ours[0]["mac_address"], theirs["mac_address"]} <= macs
    pods = [p for p in apiserver.handler.store.objects.of_kind("pods").values()
            if p["metadata"].get("labels", {}).get("kubevirt.io/created-by") == vmi["metadata"]["uid"]]
    status = json.loads(pods[0]["metadata"]["annotations"][STATUS])
    assert {s.get("mac") for s in status} >= {ours[0]["mac_address"], theirs["mac_address"]}
    addresses = json.loads(row["network_info"])
    assert addresses == {"private": [
        {"version": 4, "addr": ours[0]["fixed_ips"][0]["ip_address"], "OS-EXT-IPS:type": "fixed",
         "OS-EXT-IPS-MAC:mac_addr": ours[0]["mac_address"]},
        {"version": 4, "addr": theirs["fixed_ips"][0]["ip_address"], "OS-EXT-IPS:type": "fixed",
         "OS-EXT-IPS-MAC:mac_addr": theirs["mac_address"]}]}
    assert api.get(f"/v2.1/servers/{uuid}/ips", headers=admin("2.1")).json == {"addresses": {"private": [
        {"version": 4, "addr": ours[0]["fixed_ips"][0]["ip_address"]},
        {"version": 4, "addr": theirs["fixed_ips"][0]["ip_address"]}]}}

    # network-changed: the addresses read again from Neutron (a floating IP now on our port)
    neutron.floating_ips["f1"] = {"id": "f1", "port_id": ours[0]["id"], "floating_ip_address": "172.24.4.9"}
    api.post("/v2.1/os-server-external-events", headers=admin("2.1"),
             json_body={"events": [{"name": "network-changed", "server_uuid": uuid, "tag": ours[0]["id"]}]})
    row = until(loop, engine, uuid, lambda r: "172.24.4.9" in (r["network_info"] or ""))
    assert json.loads(row["network_info"])["private"][1] == {
        "version": 4, "addr": "172.24.4.9", "OS-EXT-IPS:type": "floating",
        "OS-EXT-IPS-MAC:mac_addr": ours[0]["mac_address"]}

    # the user's port deleted behind OpenKeel's back: network-vif-deleted drops its address and interface
    request = urllib.request.Request(f"{neutron.url}/v2.0/ports/{theirs['id']}", method="DELETE")
    urllib.request.urlopen(request).close()
    row = until(loop, engine, uuid, lambda r: theirs["mac_address"] not in (r["network_info"] or ""))
    assert [a["OS-EXT-IPS-MAC:mac_addr"] for a in json.loads(row["network_info"])["private"]] == [
        ours[0]["mac_address"]] * 2
    vm = apiserver.get("VirtualMachine", uuid, namespace)
    assert [i.get("state") for i in vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]
            if i["name"] == f"port-{theirs['id']}"] in ([], ["absent"])
    neutron.ports[theirs["id"]] = theirs  # back, for the delete's unbinding below

    # the delete: our port deleted, the user's unbound and kept, the NetworkAttachmentDefinition collected
    api.delete(f"/v2.1/servers/{uuid}", headers=admin("2.1"))
    until(loop, engine, uuid, lambda r: r["deleted"])
    assert list(neutron.ports) == [theirs["id"]]
    assert (theirs["device_id"], theirs["device_owner"], theirs["binding:host_id"]) == ("", "", None)
    assert apiserver.get(NAD, f"neutron-{net['id']}", namespace) is None


def _fault(engine, uuid):
    with db_api.reader(engine) as conn:
        return instance_faults.latest_faults(conn, [uuid])[uuid]["message"]


ABORTED = "Build of instance {} aborted: Failed to allocate the network(s), not rescheduling."


@pytest.mark.vif(vif_plugging_timeout="1")
def test_a_plug_that_never_comes_fails_the_build_as_nova(world, neutron):
    loop, engine, _api = world
    net = neutron.network(project_id="project-1")
    uuid = _boot(engine, [{"network_id": net["id"]}])
    row = until(loop, engine, uuid, lambda r: r["vm_state"] == states.ERROR)
    assert row["vm_state"] == states.ERROR
    assert _fault(engine, uuid) == ABORTED.format(uuid)
    assert neutron.ports == {}  # the port made for it given back at once, as Nova's build abort


@pytest.mark.vif(vif_plugging_timeout="1", vif_plugging_is_fatal="false")
def test_a_plug_that_never_comes_is_not_fatal_when_told(world, neutron):
    loop, engine, _api = world
    net = neutron.network(project_id="project-1")
    uuid = _boot(engine, [{"network_id": net["id"]}])
    assert active(until(loop, engine, uuid, active))


def test_a_port_neutron_cannot_bind_fails_the_build_and_leaks_nothing(world, apiserver, neutron):
    loop, engine, _api = world
    neutron.agent_hosts = set()  # no L2 agent anywhere: every binding fails
    net = neutron.network(project_id="project-1")
    theirs = neutron.port(net, project_id="project-1")
    uuid = _boot(engine, [{"network_id": net["id"]}, {"network_id": net["id"], "port_id": theirs["id"]}])
    row = until(loop, engine, uuid, lambda r: r["vm_state"] == states.ERROR)
    assert _fault(engine, uuid) == ABORTED.format(uuid)
    assert list(neutron.ports) == [theirs["id"]]  # ours deleted, the user's unbound and kept
    assert (theirs["device_id"], theirs["device_owner"], theirs["binding:host_id"]) == ("", "", None)
    assert row["vm_state"] == states.ERROR


def test_a_user_port_gone_before_the_build_fails_it(world, neutron):
    loop, engine, _api = world
    net = neutron.network(project_id="project-1")
    theirs = neutron.port(net, project_id="project-1")
    uuid = _boot(engine, [{"network_id": net["id"]}, {"network_id": net["id"], "port_id": theirs["id"]}])
    del neutron.ports[theirs["id"]]  # deleted behind OpenKeel's back after the API's checks
    until(loop, engine, uuid, lambda r: r["vm_state"] == states.ERROR)
    assert _fault(engine, uuid) == ABORTED.format(uuid)
    assert neutron.ports == {}  # the port OpenKeel made first is given back


def test_neutron_down_during_a_boot_ends_it_as_nova_once_its_attempts_are_spent(conf, apiserver, ctl, neutron):
    from openkeel_compute.controller.images import ImageAccess
    from openkeel_compute.controller.servers import ServerLoop
    from openkeel_compute.controller.settings import ServerSettings
    from openkeel_compute.network.client import NeutronClient
    from tests.controller.helpers import backend_for

    engine = db_api.get_engine(conf)
    settings = dataclasses.replace(ServerSettings.from_conf(conf), step_attempts=2, retry_delay=0.01)
    servers = ServerLoop(engine, backend_for(apiserver), settings, images=ImageAccess.from_conf(conf),
                         network=NeutronClient(conf))
    try:
        net = neutron.network(project_id="project-1")
        uuid = _boot(engine, [{"network_id": net["id"]}])
        neutron.fail_with = 503
        row = until(Both(ctl, servers), engine, uuid, lambda r: r["vm_state"] == states.ERROR)
        assert row["vm_state"] == states.ERROR
        assert _fault(engine, uuid) == ABORTED.format(uuid)
        assert row["namespace"] is None and neutron.ports == {}  # no VM made, no port
    finally:
        servers.close()
        servers.cluster.close()
