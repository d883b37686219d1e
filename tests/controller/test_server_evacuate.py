"""Evacuate end to end: the API, the controller claiming in Placement and the built-in cluster with three
nodes, on SQLite, PostgreSQL and MariaDB. A server whose node failed (NotReady, its service forced down or
down) is rebuilt on another node: claimed there beside the source, its launcher pod on the failed node
force-deleted, its VM made again from its record pinned to the target, the migration accepted → pre-migrating
→ done; once the source is Ready again its part of the allocation is given back and the migration
completed."""

from __future__ import annotations

import time

import pytest

from tests.conftest import admin
from tests.controller.evacuate_world import NODES, evacuate_world, notifications
from tests.databases import ENGINES
from tests.server_world import DEMO


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service):
    with evacuate_world(request.param, tmp_path, placement_service) as w:
        yield w


def test_a_server_of_a_failed_node_is_rebuilt_elsewhere_and_the_source_gives_back_when_it_returns(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    assert world.allocations(uuid) == {source}
    assert world.pods_on(source, uuid)  # its launcher pod runs there

    got = world.evacuate(uuid)  # its service is up: refused as Nova refuses it
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400, "message": f"Compute service of {source} is still in use."}})

    world.node_down(source)
    got = world.evacuate(uuid)
    assert (got.status_code, got.text) == (200, "")
    assert world.server(uuid)["OS-EXT-STS:task_state"] == "rebuilding"
    (accepted,) = world.migrations(uuid)
    assert (accepted["migration_type"], accepted["status"], accepted["source_compute"], accepted["dest_compute"]) == (
        "evacuation", "accepted", source, None)

    done = world.wait(uuid, "ACTIVE")
    target = done["OS-EXT-SRV-ATTR:host"]
    assert target in NODES and target != source
    assert done["OS-EXT-SRV-ATTR:hypervisor_hostname"] == target
    (migration,) = world.migrations(uuid)
    assert (migration["status"], migration["source_compute"], migration["source_node"], migration["dest_compute"],
            migration["dest_node"]) == ("done", source, source, target, target)
    assert world.events(uuid, "evacuate") == [("compute_rebuild_instance", "Success"), ("rebuild_server", "Success")]
    # the running VMI is on the target, nothing of the server is left on the failed node
    vmis = [v for k, v in world.cluster.objects("VirtualMachineInstance").items() if uuid in k[1]]
    assert [(v["status"]["phase"], v["status"]["nodeName"]) for v in vmis] == [("Running", target)]
    assert world.pods_on(source, uuid) == []
    # Nova's accounting: the target claimed in the server's consumer, the source's part kept meanwhile
    assert world.allocations(uuid) == {source, target}
    assert world.beat() == []  # the source is still NotReady: nothing given back

    world.cluster.set_node_ready(source, True)
    assert world.beat() == [migration["uuid"]]
    assert world.allocations(uuid) == {target}
    assert world.migrations(uuid)[0]["status"] == "completed"
    # and the operator may force the service up again (Nova refuses while a done evacuation remains)
    got = world.client.put(f"/v2.1/os-services/{world.service(source)['id']}",
                           headers=admin("2.53"),
                           json_body={"forced_down": False})
    assert got.status_code == 200, got.text
    assert world.beat() == []
    assert world.server(uuid)["status"] == "ACTIVE"


@pytest.mark.parametrize("engine_name", ENGINES[:1])
def test_notifications_as_novas_api_conductor_and_compute_send_them(engine_name, tmp_path, placement_service):
    with evacuate_world(engine_name, tmp_path, placement_service, notifying=True) as world:
        server = world.boot()
        uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
        world.node_down(source)
        assert world.evacuate(uuid).status_code == 200
        target = world.wait(uuid, "ACTIVE")["OS-EXT-SRV-ATTR:host"]
        sent = notifications()
    types = [t for t, _p in sent]
    start = types.index("instance.evacuate")
    wanted = ["instance.evacuate", "instance.rebuild_scheduled", "instance.exists", "instance.rebuild.start",
              "instance.rebuild.end"]
    assert [t for t in types[start:] if t in wanted] == wanted
    legacy = ["compute.instance.evacuate", "compute.instance.rebuild.scheduled", "compute.instance.exists",
              "compute.instance.rebuild.start", "compute.instance.rebuild.end"]
    assert [t for t in types[types.index("compute.instance.evacuate"):] if t in legacy] == legacy
    # the API's from its host, the compute's from the target
    assert ("instance.evacuate", "nova-api:fake-mini") in sent and ("compute.instance.evacuate", "compute.fake-mini") in sent
    assert ("instance.rebuild.end", f"nova-compute:{target}") in sent


def test_a_source_back_during_the_evacuation_never_runs_the_server_twice(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    world.node_down(source)
    assert world.evacuate(uuid).status_code == 200
    world.controller.run_once()  # the target claimed, the VM being stopped on the failed node
    world.cluster.set_node_ready(source, True)
    assert world.beat() == []  # not done yet: nothing to give back
    done = world.wait(uuid, "ACTIVE")
    target = done["OS-EXT-SRV-ATTR:host"]
    assert target != source
    vmis = [v for k, v in world.cluster.objects("VirtualMachineInstance").items() if uuid in k[1]]
    assert [(v["status"]["phase"], v["status"]["nodeName"]) for v in vmis] == [("Running", target)]
    assert world.pods_on(source, uuid) == []
    (migration,) = world.migrations(uuid)
    assert world.beat() == [migration["uuid"]]
    assert world.allocations(uuid) == {target}


@pytest.mark.parametrize("claimed, ends", [(True, "error"), (False, "failed")])
def test_a_server_deleted_during_its_evacuation_leaves_nothing(world, claimed, ends):
    """Claimed: the delete closes the migration under way as it closes a resize's (``error``); still
    ``accepted`` (its node back meanwhile, so that its delete ends): the next heartbeat closes it
    (``failed``, as Nova's compute ends a rebuild whose server went). Either way nothing holds the
    failed node's service any more."""
    if world.engine.dialect.name != "sqlite" and not claimed:
        pytest.skip("the accepted case runs on SQLite; the claimed one on every engine")
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    world.node_down(source)
    assert world.evacuate(uuid).status_code == 200
    if claimed:
        world.controller.run_once()
        assert world.allocations(uuid) - {source}  # the target claimed beside the source
    assert world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    if not claimed:  # its launcher pod on the failed node goes once the node is back (nothing forced it)
        world.cluster.set_node_ready(source, True)
    # its service forced down: deleted at once by the API (Nova's local delete), the controller cleans up
    assert world.client.get(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 404
    deadline = time.monotonic() + 120
    while [k for k in world.cluster.objects("VirtualMachine") if uuid in k[1]] or world.allocations(uuid):
        assert time.monotonic() < deadline
        world.controller.run_once()
        time.sleep(0.05)
    world.beat()
    got = world.client.get(f"/v2.1/os-migrations?instance_uuid={uuid}", headers=admin("2.80")).json["migrations"]
    assert [m["status"] for m in got] == [ends]
    assert world.allocations(uuid) == set()
    assert not [k for k in world.cluster.objects("VirtualMachine") if uuid in k[1]]
    # and the failed node's service may be deleted: no migration holds it any more
    got = world.client.delete(f"/v2.1/os-services/{world.service(source)['id']}", headers=admin("2.53"))
    assert got.status_code == 204, got.text
