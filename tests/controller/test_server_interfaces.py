"""Interfaces attached to and detached from a running server (issue 29.6), end to end on every database
engine: POST /os-interface through the API, the controller binding the port to the server's node and
hotplugging it into the VM (KubeVirt's declarative hotplug: the built-in cluster's VMI and launcher pod show
the port's MAC), the attach waiting for network-vif-plugged, Nova's events and fault when it cannot be done;
DELETE unplugging it (``state: absent``), then deleting OpenKeel's port or unbinding the user's."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from openkeel_compute.api.deploy import deploy
from openkeel_compute.compute import network_requests, working_state
from openkeel_compute.compute.instances import instance_faults, store
from openkeel_compute.compute.rebuild import begin_rebuild
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states
from tests.conftest import admin, make_conf
from tests.controller.helpers import IMAGE, OWNER, Both, active, boot, row_of, until
from tests.databases import ENGINES, throwaway_database
from tests.network.fake_neutron import FakeNeutron
from tests.wsgi_client import Client

TOKEN = {"X-Auth-Token": "user-1:project-1"}


@pytest.fixture
def neutron():
    fake = FakeNeutron()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture(params=ENGINES)
def conf(request, tmp_path, neutron):
    marker = request.node.get_closest_marker("vif")
    options = marker.kwargs if marker else {"vif_plugging_timeout": "30"}
    with throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, DEFAULT=options, controller={"poll_interval": "0.05", "workers": "4"},
                         database={"connection": url}, glance={"api_servers": "http://glance.test:9292"},
                         neutron={"auth_type": "admin_token", "endpoint": neutron.url, "token": "neutron-admin",
                                  "endpoint_override": neutron.url})
        migration.sync(db_api.get_engine(conf))
        yield conf
        db_api.dispose_all()


@pytest.fixture
def world(conf, apiserver, ctl, neutron):
    api = Client(deploy(conf))
    neutron.notify = lambda events: api.post("/v2.1/os-server-external-events", headers=admin("2.1"),
                                             json_body={"events": events})
    client = make_client(apiserver.kubeconfig())
    loop = server_loop_from(conf, db_api.get_engine(conf), client)
    yield Both(ctl, loop), db_api.get_engine(conf), api
    loop.close()
    client.close()


def _running_server(loop, engine, neutron, net):
    uuid = boot(engine, requested_networks="requested")
    with db_api.transaction(engine) as conn:
        network_requests.record(conn, uuid, [{"position": 0, "network_id": net["id"]}])
    until(loop, engine, uuid, lambda r: any(p["device_id"] == uuid for p in neutron.ports.values())
          and row_of(engine, uuid)["node"])
    for port in [p for p in neutron.ports.values() if p["device_id"] == uuid]:
        neutron.plug(port["id"])
    row = until(loop, engine, uuid, active)
    assert active(row)
    return uuid, row


def _headers(version="2.1"):
    return {**TOKEN, "OpenStack-API-Version": f"compute {version}"}


def _events(engine, uuid, action):
    with db_api.reader(engine) as conn:
        found = conn.execute(
            sa.select(models.INSTANCE_ACTIONS_EVENTS.c.event, models.INSTANCE_ACTIONS_EVENTS.c.result)
            .join(models.INSTANCE_ACTIONS, models.INSTANCE_ACTIONS.c.id == models.INSTANCE_ACTIONS_EVENTS.c.action_id)
            .where(models.INSTANCE_ACTIONS.c.instance_uuid == uuid, models.INSTANCE_ACTIONS.c.action == action)
            .order_by(models.INSTANCE_ACTIONS_EVENTS.c.id)).all()
    return [tuple(e) for e in found]


def _vm_interfaces(apiserver, uuid, namespace):
    vm = apiserver.get("VirtualMachine", uuid, namespace)
    return [(i["name"], i.get("macAddress"), i.get("state")) for i in
            vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"]]


def _vmi_macs(apiserver, uuid, namespace):
    vmi = apiserver.get("VirtualMachineInstance", uuid, namespace) or {}
    return {i.get("mac") for i in (vmi.get("status") or {}).get("interfaces") or ()}


def test_attach_hotplugs_the_port_and_detach_gives_it_back(world, apiserver, neutron):
    loop, engine, api = world
    net = neutron.network(name="private", project_id="project-1")
    other = neutron.network(name="backend", project_id="project-1", subnet="10.1.0.0/24")
    uuid, row = _running_server(loop, engine, neutron, net)
    namespace = row["namespace"]
    first = next(p for p in neutron.ports.values() if p["device_id"] == uuid)

    resp = api.post(f"/v2.1/servers/{uuid}/os-interface", headers=_headers("2.49"),
                    json_body={"interfaceAttachment": {"net_id": other["id"], "tag": "backend"}})
    assert resp.status_code == 200, resp.json
    port_id = resp.json["interfaceAttachment"]["port_id"]
    port = neutron.ports[port_id]
    # bound to the server's node as the build binds, plugged into the VM, waiting for network-vif-plugged
    until(loop, engine, uuid, lambda r: port.get("binding:host_id") == row["node"]
          and port["mac_address"] in _vmi_macs(apiserver, uuid, namespace))
    assert (port["device_id"], port["device_owner"]) == (uuid, "compute:nova")
    assert _vm_interfaces(apiserver, uuid, namespace) == [
        (f"port-{first['id']}", first["mac_address"], None), (f"port-{port_id}", port["mac_address"], None)]
    assert apiserver.get("NetworkAttachmentDefinition", f"neutron-{other['id']}", namespace) is not None
    assert _events(engine, uuid, "attach_interface") == [("compute_attach_interface", None)]
    neutron.plug(port_id)
    until(loop, engine, uuid, lambda r: _events(engine, uuid, "attach_interface")[0][1] is not None)
    assert _events(engine, uuid, "attach_interface") == [("compute_attach_interface", "Success")]
    # the guest configured the new interface from the cloud-init network data (the guest agent reports it)
    until(loop, engine, uuid, lambda r: _guest_ips(apiserver, uuid, namespace).get(port["mac_address"]))
    guest = _guest_ips(apiserver, uuid, namespace)
    assert guest[first["mac_address"]] == first["fixed_ips"][0]["ip_address"]
    assert guest[port["mac_address"]] == port["fixed_ips"][0]["ip_address"]
    addresses = json.loads(row_of(engine, uuid)["network_info"])
    assert addresses["backend"] == [{"version": 4, "addr": port["fixed_ips"][0]["ip_address"],
                                     "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": port["mac_address"]}]
    listed = api.get(f"/v2.1/servers/{uuid}/os-interface", headers=_headers("2.70")).json["interfaceAttachments"]
    assert [(i["port_id"], i["tag"]) for i in listed] == [(first["id"], None), (port_id, "backend")]
    assert active(row_of(engine, uuid))

    resp = api.delete(f"/v2.1/servers/{uuid}/os-interface/{port_id}", headers=_headers())
    assert resp.status_code == 202
    until(loop, engine, uuid, lambda r: port_id not in neutron.ports)
    assert _events(engine, uuid, "detach_interface") == [("compute_detach_interface", "Success")]
    assert port["mac_address"] not in _vmi_macs(apiserver, uuid, namespace)
    assert [name for name, _mac, _state in _vm_interfaces(apiserver, uuid, namespace)] == [f"port-{first['id']}"]
    assert "backend" not in json.loads(row_of(engine, uuid)["network_info"])
    assert [r["port_id"] for r in _requests(engine, uuid)] == [first["id"]]

    # a port the server does not have: 202, the compute event in Error, as Nova's compute
    resp = api.delete(f"/v2.1/servers/{uuid}/os-interface/{port_id}", headers=_headers())
    assert resp.status_code == 202
    until(loop, engine, uuid, lambda r: len(_events(engine, uuid, "detach_interface")) == 2
          and _events(engine, uuid, "detach_interface")[1][1] is not None)
    assert _events(engine, uuid, "detach_interface")[1] == ("compute_detach_interface", "Error")
    assert active(row_of(engine, uuid))


def _guest_ips(apiserver, uuid, namespace):
    vmi = apiserver.get("VirtualMachineInstance", uuid, namespace)
    return {i.get("mac"): i.get("ipAddress") for i in (vmi.get("status") or {}).get("interfaces") or ()
            if i.get("ipAddress")}


def _requests(engine, uuid):
    with db_api.reader(engine) as conn:
        return network_requests.of(conn, uuid)


def test_the_users_port_is_unbound_and_kept(world, apiserver, neutron):
    loop, engine, api = world
    net = neutron.network(name="private", project_id="project-1")
    uuid, row = _running_server(loop, engine, neutron, net)
    theirs = neutron.port(net, project_id="project-1")
    resp = api.post(f"/v2.1/servers/{uuid}/os-interface", headers=_headers(),
                    json_body={"interfaceAttachment": {"port_id": theirs["id"]}})
    assert resp.status_code == 200
    until(loop, engine, uuid, lambda r: theirs["mac_address"] in _vmi_macs(apiserver, uuid, row["namespace"]))
    neutron.plug(theirs["id"])
    until(loop, engine, uuid, lambda r: (_events(engine, uuid, "attach_interface") or [(0, None)])[0][1])
    api.delete(f"/v2.1/servers/{uuid}/os-interface/{theirs['id']}", headers=_headers())
    until(loop, engine, uuid, lambda r: not theirs["device_id"])
    assert theirs["id"] in neutron.ports
    assert (theirs["device_id"], theirs["device_owner"], theirs["binding:host_id"]) == ("", "", None)
    assert theirs["mac_address"] not in _vmi_macs(apiserver, uuid, row["namespace"])


@pytest.mark.vif(vif_plugging_timeout="1")
def test_a_plug_that_never_comes_fails_the_attach_as_nova(world, apiserver, neutron):
    loop, engine, api = world
    net = neutron.network(name="private", project_id="project-1")
    uuid, row = _running_server(loop, engine, neutron, net)
    resp = api.post(f"/v2.1/servers/{uuid}/os-interface", headers=_headers(),
                    json_body={"interfaceAttachment": {"net_id": net["id"]}})
    port_id = resp.json["interfaceAttachment"]["port_id"]
    until(loop, engine, uuid, lambda r: (_events(engine, uuid, "attach_interface") or [(0, None)])[0][1], 30)
    assert _events(engine, uuid, "attach_interface") == [("compute_attach_interface", "Error")]
    assert port_id not in neutron.ports  # the port OpenKeel made is given back
    assert [r["port_id"] for r in _requests(engine, uuid)] != [] and port_id not in [
        r["port_id"] for r in _requests(engine, uuid)]
    with db_api.reader(engine) as conn:
        fault = instance_faults.latest_faults(conn, [uuid])[uuid]
    assert fault["message"] == f"Failed to attach network adapter device to {uuid}"
    server = row_of(engine, uuid)
    assert (server["vm_state"], server["task_state"]) == (states.ACTIVE, None)
    until(loop, engine, uuid, lambda r: all(name != f"port-{port_id}" for name, _m, _s in
                                            _vm_interfaces(apiserver, uuid, row["namespace"])))
    assert all(name != f"port-{port_id}" for name, _m, _s in _vm_interfaces(apiserver, uuid, row["namespace"]))


def test_a_rebuild_waits_for_the_ports_neutron_reported_unplugged(world, apiserver, neutron):
    """A rebuild of a server whose port Neutron reported unplugged (network-vif-unplugged, its device down
    with the stopped guest) stays in rebuild_spawning, its guest running, until the port is plugged again;
    then the observation ends it ACTIVE, as Nova's spawn waits for the vifs its network info shows inactive."""
    loop, engine, _api = world
    net = neutron.network(name="private", project_id="project-1")
    uuid, row = _running_server(loop, engine, neutron, net)
    port = next(p for p in neutron.ports.values() if p["device_id"] == uuid)
    neutron.unplug(port["id"])
    until(loop, engine, uuid, lambda r: '"active": false' in _network_info(engine, uuid))
    with db_api.transaction(engine) as conn:
        begin_rebuild(conn, store.get(conn, uuid), OWNER, image={"id": IMAGE, "min_disk": 1, "disk_format": "qcow2"},
                      flavor={"root_gb": 1}, changes={}, metadata=None)
    row = until(loop, engine, uuid, lambda r: r["task_state"] == task_states.REBUILD_SPAWNING
                and (apiserver.get("VirtualMachineInstance", uuid, r["namespace"]) or {}).get(
                    "status", {}).get("phase") == "Running")
    assert row["task_state"] == task_states.REBUILD_SPAWNING
    for _ in range(5):  # the guest runs; the task waits for the port
        loop.run_once()
    assert row_of(engine, uuid)["task_state"] == task_states.REBUILD_SPAWNING
    neutron.plug(port["id"])
    assert active(until(loop, engine, uuid, active))
    with db_api.reader(engine) as conn:
        assert sysmeta_of(conn, uuid).get(sysmeta.VIF_WAIT) is None


def _network_info(engine, uuid):
    with db_api.reader(engine) as conn:
        return working_state.get(conn, uuid, sysmeta.NETWORK_INFO) or ""


def sysmeta_of(conn, uuid):
    return store.metadata_of(conn, uuid, system=True)


def test_a_stopped_server_gets_the_interface_at_its_next_start(world, apiserver, neutron):
    loop, engine, api = world
    net = neutron.network(name="private", project_id="project-1")
    uuid, row = _running_server(loop, engine, neutron, net)
    assert api.post(f"/v2.1/servers/{uuid}/action", headers=_headers(), json_body={"os-stop": None}).status_code == 202
    until(loop, engine, uuid, lambda r: r["vm_state"] == states.STOPPED and r["task_state"] is None)
    resp = api.post(f"/v2.1/servers/{uuid}/os-interface", headers=_headers(),
                    json_body={"interfaceAttachment": {"net_id": net["id"]}})
    port = neutron.ports[resp.json["interfaceAttachment"]["port_id"]]
    until(loop, engine, uuid, lambda r: (_events(engine, uuid, "attach_interface") or [(0, None)])[0][1])
    # no guest to plug into: done once the VM template has it, without waiting for Neutron
    assert _events(engine, uuid, "attach_interface") == [("compute_attach_interface", "Success")]
    assert (f"port-{port['id']}", port["mac_address"], None) in _vm_interfaces(apiserver, uuid, row["namespace"])
    assert port["binding:host_id"] == row["node"]
    assert api.post(f"/v2.1/servers/{uuid}/action", headers=_headers(), json_body={"os-start": None}).status_code == 202
    until(loop, engine, uuid, lambda r: port["mac_address"] in _vmi_macs(apiserver, uuid, row["namespace"]))
    assert port["mac_address"] in _vmi_macs(apiserver, uuid, row["namespace"])


def test_a_detach_while_neutron_is_away_gives_the_port_back_once_it_answers(world, apiserver, neutron):
    loop, engine, api = world
    net = neutron.network(name="private", project_id="project-1")
    uuid, row = _running_server(loop, engine, neutron, net)
    resp = api.post(f"/v2.1/servers/{uuid}/os-interface", headers=_headers(),
                    json_body={"interfaceAttachment": {"net_id": net["id"]}})
    port_id = resp.json["interfaceAttachment"]["port_id"]
    until(loop, engine, uuid, lambda r: neutron.ports[port_id]["mac_address"] in _vmi_macs(apiserver, uuid,
                                                                                        row["namespace"]))
    neutron.plug(port_id)
    until(loop, engine, uuid, lambda r: (_events(engine, uuid, "attach_interface") or [(0, None)])[0][1])
    neutron.fail_with = 503
    api.delete(f"/v2.1/servers/{uuid}/os-interface/{port_id}", headers=_headers())
    until(loop, engine, uuid, lambda r: False, timeout=3)
    assert port_id in neutron.ports  # not given back, and not forgotten either
    assert port_id in [r["port_id"] for r in _requests(engine, uuid)]
    neutron.fail_with = None
    until(loop, engine, uuid, lambda r: port_id not in neutron.ports, timeout=30)
    assert port_id not in neutron.ports
    assert _events(engine, uuid, "detach_interface") == [("compute_detach_interface", "Success")]
    assert port_id not in [r["port_id"] for r in _requests(engine, uuid)]
