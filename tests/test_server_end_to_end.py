"""A server boots end to end: POST /servers through the API app, then the controller's loops against the
built-in cluster, until the servers API shows it ACTIVE; then stop, start and delete. Its console output
is the guest's boot log, read from the launcher pod while the API waits."""

from __future__ import annotations

import pytest

from openkeel_compute import policies
from openkeel_compute.controller import providers
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator.lifecycle import NODE
from openkeel_compute.images import glance
from tests.conftest import admin, make_conf
from tests.server_world import DEMO, IMAGE, controller_running, image_service, server_world, until


@pytest.fixture
def world(tmp_path, placement_service):
    policies.reset()
    conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"})
    migration.sync(db_api.get_engine(conf))
    with image_service(tmp_path) as url:
        glance.register_opts(conf)
        conf.set_override("api_servers", [url], group="glance")
        with server_world(conf, lambda kube: make_loop(kube, db_api.get_engine(conf)),
                          placement_url=placement_service) as world:
            yield world


def _status(status):
    return lambda got: got.status_code == 200 and got.json["server"]["status"] == status


def test_a_server_boots_stops_starts_and_is_deleted(world):
    client, controller, cluster = world
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.e2e", "ram": 512, "vcpus": 1, "disk": 1, "id": "e2e"}})
    assert flavor.status_code == 200, flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "e2e", "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]

    shown = until(client, controller, uuid, _status("ACTIVE"))
    server = shown.json["server"]
    assert server["status"] == "ACTIVE", server
    # its resources were claimed on the node it runs on, which is its host
    placement = controller.servers.claims.placement
    node = providers.provider_uuid(NODE)
    assert placement.get_allocations(uuid).allocations == {node: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}
    assert client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"][
        "OS-EXT-SRV-ATTR:hypervisor_hostname"] == NODE
    (ips,) = server["addresses"].values()
    assert ips and ips[0]["addr"].startswith("10.244.")
    (namespace,) = {k[0] for k in cluster.objects("VirtualMachine") if k[1] == uuid}
    assert [k for k in cluster.objects("Secret") if k[0] == namespace]  # its user data, before the delete

    stop = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-stop": None})
    assert stop.status_code == 202, stop.text
    assert until(client, controller, uuid, _status("SHUTOFF")).json["server"]["status"] == "SHUTOFF"

    start = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-start": None})
    assert start.status_code == 202, start.text
    assert until(client, controller, uuid, _status("ACTIVE")).json["server"]["status"] == "ACTIVE"

    deleted = client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert deleted.status_code == 204, deleted.text
    assert until(client, controller, uuid, lambda g: g.status_code == 404).status_code == 404
    for kind in ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "Secret", "VirtualMachinePreference"):
        assert [k for k in cluster.objects(kind) if k[0] == namespace] == [], kind
    assert placement.get_allocations(uuid).allocations == {}  # given back


def test_console_output_is_the_guests_boot_log_and_goes_with_a_stop(world):
    client, controller, _cluster = world
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.console", "ram": 512, "vcpus": 1, "disk": 1, "id": "console"}})
    assert flavor.status_code == 200, flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "console", "networks": "auto"}})
    uuid = got.json["server"]["id"]
    assert until(client, controller, uuid, _status("ACTIVE")).json["server"]["status"] == "ACTIVE"
    path = f"/v2.1/servers/{uuid}/action"

    with controller_running(controller):
        ten = client.post(path, headers=DEMO, json_body={"os-getConsoleOutput": {"length": 10}})
        whole = client.post(path, headers=DEMO, json_body={"os-getConsoleOutput": {}})
    assert ten.status_code == 200, ten.text
    # Nova's tail: the last 10 pieces between newlines, the last one empty after the final newline
    assert len(ten.json["output"].split("\n")) == 10 and ten.json["output"].endswith("web-1 login: \n")
    assert "\r" not in whole.json["output"] and "\x1b" not in whole.json["output"]
    assert len(whole.json["output"].split("\n")) > 40 and "Hostname set to <web-1>" in whole.json["output"]

    stop = client.post(path, headers=DEMO, json_body={"os-stop": None})
    assert stop.status_code == 202, stop.text
    assert until(client, controller, uuid, _status("SHUTOFF")).json["server"]["status"] == "SHUTOFF"
    with controller_running(controller):
        stopped = client.post(path, headers=DEMO, json_body={"os-getConsoleOutput": {"length": 10}})
    assert (stopped.status_code, stopped.json) == (200, {"output": ""})  # the log went with the pod


def test_a_node_deleted_under_running_servers_shuts_them_off_and_a_start_moves_them(world):
    """Two servers on two nodes; one node is deleted (``kubectl delete node``): its server ends SHUTOFF
    with no host status, its allocation stays on the gone node's provider until it leaves; the other
    server is untouched. A start claims on a node that exists, or fails with No valid host."""
    from openkeel_compute.controller import nodes
    from openkeel_compute.controller.gateway import Gateway
    from openkeel_compute.controller.kube import make_client
    from openkeel_compute.emulator.server import node

    client, controller, cluster = world
    engine = controller.servers.engine
    placement = controller.servers.claims.placement
    kube = make_client(cluster.kubeconfig())
    cluster.seed(node("emulated-node-2"))

    def publish():  # what the controller's node publisher does every resync_interval
        nodes.sync(engine, Gateway(kube))
        return providers.sync(placement, [n for n in cluster.objects("Node").values()])

    publish()
    # 40,000 MB: a node (64 GiB, 512 MB reserved, ratio 1) can hold one such server only
    quota = client.put("/v2.1/os-quota-sets/demo-project", headers=admin(), json_body={"quota_set": {"ram": 100000}})
    assert quota.status_code == 200, quota.text
    assert client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": {
        "name": "m1.wide", "ram": 40000, "vcpus": 1, "disk": 1, "id": "wide"}}).status_code == 200
    uuids = []
    for name in ("doomed", "survivor"):
        got = client.post("/v2.1/servers", headers=DEMO, json_body={
            "server": {"name": name, "imageRef": IMAGE, "flavorRef": "wide", "networks": "auto"}})
        assert got.status_code == 202, got.text
        uuids.append(got.json["server"]["id"])
    doomed, survivor = uuids
    for uuid in uuids:
        booted = until(client, controller, uuid, lambda g: g.json["server"]["status"] in ("ACTIVE", "ERROR"))
        assert booted.json["server"]["status"] == "ACTIVE", booted.json["server"].get("fault")

    def as_admin(uuid):
        return client.get(f"/v2.1/servers/{uuid}", headers=admin("2.16")).json["server"]

    gone, other = as_admin(doomed)["OS-EXT-SRV-ATTR:host"], as_admin(survivor)["OS-EXT-SRV-ATTR:host"]
    assert {gone, other} == {NODE, "emulated-node-2"}
    wide = {"VCPU": 1, "MEMORY_MB": 40000, "DISK_GB": 1}
    before = as_admin(survivor)

    cluster.remove("Node", gone)  # the operator's `kubectl delete node` (not a call of the controller's)
    shown = until(client, controller, doomed, _status("SHUTOFF")).json["server"]
    assert shown["status"] == "SHUTOFF", shown
    report = publish()
    assert report.kept == [gone]
    server = as_admin(doomed)
    assert (server["OS-EXT-STS:vm_state"], server["OS-EXT-STS:task_state"], server["OS-EXT-STS:power_state"]) == (
        "stopped", None, 4)
    assert (server["OS-EXT-SRV-ATTR:host"], server["host_status"]) == (gone, "")  # Nova: the service is gone
    after = as_admin(survivor)
    assert (after["status"], after["OS-EXT-STS:power_state"], after["host_status"]) == ("ACTIVE", 1, "UP")
    assert after["OS-EXT-SRV-ATTR:host"] == other and after["addresses"] == before["addresses"]
    # as Nova's power sync stops a guest it finds off: a "stop" action of no user, its event on the host
    (stop,) = [a for a in client.get(f"/v2.1/servers/{doomed}/os-instance-actions", headers=admin("2.16")).json[
        "instanceActions"] if a["action"] == "stop"]
    assert (stop["user_id"], stop["project_id"]) == (None, None)
    events = client.get(f"/v2.1/servers/{doomed}/os-instance-actions/{stop['request_id']}",
                        headers=admin("2.62")).json["instanceAction"]["events"]
    assert [(e["event"], e["result"], e["host"]) for e in events] == [("compute_stop_instance", "Success", gone)]
    gone_rp = providers.provider_uuid(gone)
    assert placement.provider_usages(gone_rp) == wide
    assert placement.provider_allocations(gone_rp) == {doomed: wide}

    # the other node is full: the start fails with Nova's fault, the server stays SHUTOFF, nothing moved
    start = client.post(f"/v2.1/servers/{doomed}/action", headers=DEMO, json_body={"os-start": None})
    assert start.status_code == 202, start.text
    shown = until(client, controller, doomed, lambda g: g.json["server"]["OS-EXT-STS:task_state"] is None)
    assert shown.json["server"]["status"] == "SHUTOFF"
    actions = client.get(f"/v2.1/servers/{doomed}/os-instance-actions", headers=admin("2.16")).json
    start_id = next(a["request_id"] for a in actions["instanceActions"] if a["action"] == "start")
    events = client.get(f"/v2.1/servers/{doomed}/os-instance-actions/{start_id}", headers=admin("2.16")).json[
        "instanceAction"]["events"]
    assert [(e["event"], e["result"]) for e in events] == [("compute_start_instance", "Error")]
    assert placement.provider_allocations(gone_rp) == {doomed: wide}

    # once the survivor is deleted the other node has space: the start claims there and the gone node's provider goes
    assert client.delete(f"/v2.1/servers/{survivor}", headers=DEMO).status_code == 204
    assert until(client, controller, survivor, lambda g: g.status_code == 404).status_code == 404
    start = client.post(f"/v2.1/servers/{doomed}/action", headers=DEMO, json_body={"os-start": None})
    assert start.status_code == 202, start.text
    assert until(client, controller, doomed, _status("ACTIVE")).json["server"]["status"] == "ACTIVE"
    server = as_admin(doomed)
    assert (server["OS-EXT-SRV-ATTR:host"], server["host_status"], server["OS-EXT-STS:power_state"]) == (
        other, "UP", 1)
    assert placement.get_allocations(doomed).allocations == {providers.provider_uuid(other): wide}
    assert publish().deleted == [gone]
    assert placement.provider(gone_rp) is None
    assert client.delete(f"/v2.1/servers/{doomed}", headers=DEMO).status_code == 204
    assert until(client, controller, doomed, lambda g: g.status_code == 404).status_code == 404
    assert placement.get_allocations(doomed).allocations == {}
    kube.close()
