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
