"""Cold migration (``migrate``) end to end on two nodes: the API, the controller and the built-in cluster,
on each database engine. The resize's two-phase flow with the server's own flavor: VERIFY_RESIZE on the
other node, confirm keeps it there, revert brings it back; Nova's checks and messages (compared with the
servers oracle, which has two fake computes); with Placement the allocations move as Nova moves them."""

from __future__ import annotations

import pytest

from openkeel_compute import policies
from openkeel_compute.controller import compute_services, nodes
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import gateway_from, server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf, user
from tests.databases import ENGINES, throwaway_database
from tests.server_world import DEMO, IMAGE, image_service, server_world, until

NODE_1, NODE_2 = "emulated-node-1", "emulated-node-2"
MANAGER = user(version="2.96", **{"X-Roles": "manager,member,reader"})


@pytest.fixture(params=ENGINES)
def world(request, tmp_path):
    yield from _world(request.param, tmp_path, None)


@pytest.fixture(params=ENGINES)
def placed_world(request, tmp_path, placement_service):
    yield from _world(request.param, tmp_path, placement_service)


def _world(engine_name, tmp_path, placement_url):
    """Two nodes, their compute services published (the API knows the hosts); claims in the Placement at
    ``placement_url`` when given."""
    policies.reset()
    with throwaway_database(engine_name, tmp_path) as url, image_service(tmp_path) as glance_url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube),
                          placement_url, nodes=2) as (client, controller, cluster):
            gateway = gateway_from(conf, make_client(cluster.kubeconfig()))
            nodes.sync(engine, gateway)
            compute_services.heartbeat(engine, gateway)
            client.post("/v2.1/flavors", headers=admin(), json_body={
                "flavor": {"name": "m1.small", "ram": 512, "vcpus": 1, "disk": 1, "id": "small"}})
            try:
                yield client, controller, cluster
            finally:
                gateway.close()


def _until(client, controller, uuid, status):
    got = until(client, controller, uuid, lambda got: got.json["server"]["status"] == status
                and got.json["server"]["OS-EXT-STS:task_state"] is None)
    assert got.json["server"]["status"] == status, got.json["server"]
    return client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]


def _boot(client, controller):
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "small", "networks": "none"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    _until(client, controller, uuid, "ACTIVE")
    return uuid


def _migrate(client, uuid, body=None, headers=None, version="2.56"):
    return client.post(f"/v2.1/servers/{uuid}/action", headers=headers or admin(version),
                       json_body={"migrate": body})


def _vmi_node(cluster, uuid):
    found = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    return found[0]["status"].get("nodeName") if found else None


def _migrations(client):
    return client.get("/v2.1/os-migrations", headers=admin("2.96")).json["migrations"]


def _events(client, uuid, name):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=admin("2.96")).json["instanceActions"]
    (request_id,) = [a["request_id"] for a in actions if a["action"] == name][:1]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{request_id}", headers=admin("2.96"))
    return sorted((e["event"], e["result"], e["details"]) for e in got.json["instanceAction"]["events"])


def test_migrate_then_confirm_and_migrate_back_then_revert(world):
    client, controller, cluster = world
    uuid = _boot(client, controller)
    source = _until(client, controller, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]
    other = NODE_2 if source == NODE_1 else NODE_1
    assert _migrate(client, uuid).status_code == 202
    server = _until(client, controller, uuid, "VERIFY_RESIZE")
    assert (server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-STS:vm_state"]) == (other, "resized")
    assert server["flavor"]["original_name"] == "m1.small"
    assert _vmi_node(cluster, uuid) == other
    (m,) = _migrations(client)
    assert {k: m[k] for k in ("migration_type", "status", "source_compute", "dest_compute", "source_node",
                              "dest_node")} == {"migration_type": "migration", "status": "finished",
                                                "source_compute": source, "dest_compute": other,
                                                "source_node": source, "dest_node": other}
    assert m["old_instance_type_id"] == m["new_instance_type_id"]
    assert _events(client, uuid, "migrate") == sorted(
        (e, "Success", None) for e in ("conductor_migrate_server", "cold_migrate", "compute_prep_resize",
                                       "compute_resize_instance", "compute_finish_resize"))
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO,
                       json_body={"confirmResize": None}).status_code == 204
    server = _until(client, controller, uuid, "ACTIVE")
    assert server["OS-EXT-SRV-ATTR:host"] == other and _vmi_node(cluster, uuid) == other
    assert [m["status"] for m in _migrations(client)] == ["confirmed"]

    # and back with a named host (2.56), reverted: the server runs where it was
    assert _migrate(client, uuid, {"host": source}).status_code == 202
    server = _until(client, controller, uuid, "VERIFY_RESIZE")
    assert server["OS-EXT-SRV-ATTR:host"] == source and _vmi_node(cluster, uuid) == source
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO,
                       json_body={"revertResize": None}).status_code == 202
    server = _until(client, controller, uuid, "ACTIVE")
    assert server["OS-EXT-SRV-ATTR:host"] == other and _vmi_node(cluster, uuid) == other
    assert sorted(m["status"] for m in _migrations(client)) == ["confirmed", "reverted"]


def test_a_stopped_server_migrates_stopped(world):
    client, controller, cluster = world
    uuid = _boot(client, controller)
    source = _until(client, controller, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-stop": None}).status_code == 202
    _until(client, controller, uuid, "SHUTOFF")
    assert _migrate(client, uuid).status_code == 202
    server = _until(client, controller, uuid, "VERIFY_RESIZE")
    assert server["OS-EXT-SRV-ATTR:host"] != source and _vmi_node(cluster, uuid) is None
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO,
                       json_body={"confirmResize": None}).status_code == 204
    server = _until(client, controller, uuid, "SHUTOFF")
    assert server["OS-EXT-SRV-ATTR:host"] != source and _vmi_node(cluster, uuid) is None


def test_novas_checks_and_messages(world):
    """As the servers oracle answers (two fake computes): same host, unknown host, the policies of the
    two rules, schema, a second migrate while one runs, the source's service down."""
    client, controller, _cluster = world
    uuid = _boot(client, controller)
    host = _until(client, controller, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]

    def fault(got):
        return got.status_code, next(iter(got.json.values()))["message"]

    assert fault(_migrate(client, uuid, {"host": host})) == (400, "Cannot migrate to the host where the server exists.")
    assert fault(_migrate(client, uuid, {"host": "nope"})) == (400, "Compute host nope could not be found.")
    assert fault(_migrate(client, uuid, None, headers=DEMO)) == (
        403, "Policy doesn't allow os_compute_api:os-migrate-server:migrate to be performed.")
    assert fault(_migrate(client, uuid, {"host": NODE_2}, headers=user(version="2.56"))) == (
        403, "Policy doesn't allow os_compute_api:os-migrate-server:migrate:host to be performed.")
    got = _migrate(client, uuid, {"hostx": NODE_2})
    assert fault(got) == (400, ("Invalid input for field/attribute migrate. Value: {'hostx': "
                                "'emulated-node-2'}. Additional properties are not allowed ('hostx' was unexpected)"))
    assert fault(_migrate(client, uuid, {"host": ""})) == (
        400, "Invalid input for field/attribute host. Value: . '' should be non-empty")
    # a project manager may migrate without a host, and is refused a locked server
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=admin(), json_body={"lock": None}).status_code == 202
    assert fault(_migrate(client, uuid, None, headers=MANAGER)) == (409, f"Instance {uuid} is locked")
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=admin(), json_body={"unlock": None}).status_code == 202
    # the source's compute service forced down: 409 without naming it
    services = client.get("/v2.1/os-services", headers=admin("2.53")).json["services"]
    (mine,) = [s for s in services if s["host"] == host]
    assert client.put(f"/v2.1/os-services/{mine['id']}", headers=admin("2.53"),
                      json_body={"forced_down": True}).status_code == 200
    assert fault(_migrate(client, uuid)) == (409, "Service is unavailable at this time.")
    assert client.put(f"/v2.1/os-services/{mine['id']}", headers=admin("2.53"),
                      json_body={"forced_down": False}).status_code == 200
    # 2.55: the body's host is not read (the whole action is as before 2.56)
    assert _migrate(client, uuid, {"host": "nope"}, version="2.55").status_code == 202
    assert fault(_migrate(client, uuid)) == (
        409, f"Cannot 'migrate' instance {uuid} while it is in task_state resize_prep")
    _until(client, controller, uuid, "VERIFY_RESIZE")
    assert fault(_migrate(client, uuid)) == (409, f"Cannot 'migrate' instance {uuid} while it is in vm_state resized")


def test_no_other_host_ends_as_novas_conductor_ends_it(world):
    """The only other node's service disabled: 202, then the server back ACTIVE where it was, no task, the
    migration in error with no destination, both conductor events failed with Nova's reason."""
    client, controller, cluster = world
    uuid = _boot(client, controller)
    host = _until(client, controller, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]
    services = client.get("/v2.1/os-services", headers=admin("2.53")).json["services"]
    (other,) = [s for s in services if s["host"] != host]
    assert client.put(f"/v2.1/os-services/{other['id']}", headers=admin("2.53"),
                      json_body={"status": "disabled"}).status_code == 200
    for body in (None, {"host": other["host"]}):
        assert _migrate(client, uuid, body).status_code == 202
        server = _until(client, controller, uuid, "ACTIVE")
        assert server["OS-EXT-SRV-ATTR:host"] == host and _vmi_node(cluster, uuid) == host
        assert "fault" not in server  # shown in ERROR only, as Nova
    statuses = [(m["status"], m["dest_compute"], m["migration_type"]) for m in _migrations(client)]
    assert statuses == [("error", None, "migration")] * 2
    reason = "No valid host was found. No valid host found for cold migrate"
    assert _events(client, uuid, "migrate") == [("cold_migrate", "Error", reason),
                                                ("conductor_migrate_server", "Error", reason)]


def test_allocations_move_to_the_migration_as_novas(placed_world):
    """During VERIFY_RESIZE the migration holds the source node's allocation and the server the
    destination's; confirm gives the migration's back; a revert moves it back onto the server."""
    client, controller, _cluster = placed_world
    placement = controller.servers.claims.placement
    uuid = _boot(client, controller)
    source = _until(client, controller, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]

    def by_node(consumer):
        return {placement.provider(rp)["name"]: r for rp, r in placement.get_allocations(consumer).allocations.items()}

    flavor = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    for ending in ("revertResize", "confirmResize"):
        here = _until(client, controller, uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]
        assert _migrate(client, uuid).status_code == 202
        there = _until(client, controller, uuid, "VERIFY_RESIZE")["OS-EXT-SRV-ATTR:host"]
        assert there != here
        migration_uuid = _migrations(client)[0]["uuid"]
        assert by_node(migration_uuid) == {here: flavor} and by_node(uuid) == {there: flavor}
        assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={ending: None}).status_code in (
            202, 204)
        server = _until(client, controller, uuid, "ACTIVE")
        assert server["OS-EXT-SRV-ATTR:host"] == (here if ending == "revertResize" else there)
        assert by_node(migration_uuid) == {} and by_node(uuid) == {server["OS-EXT-SRV-ATTR:host"]: flavor}
    assert source  # the server booted somewhere
