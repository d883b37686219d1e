"""Deleting a server whose node failed, on SQLite, PostgreSQL and MariaDB (the API, the controller claiming
in Placement and the built-in cluster with three nodes): the delete never waits for the dead node. Its
launcher pod there is force-deleted (the node's kubelet never confirms it stopped), so nothing of the
server stays in the cluster or in Placement."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from openkeel_compute.db.models import OUTBOX
from tests.conftest import admin
from tests.controller.evacuate_world import evacuate_world, notifications
from tests.databases import ENGINES
from tests.server_world import DEMO, until


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service):
    with evacuate_world(request.param, tmp_path, placement_service) as w:
        yield w


def _left(world, uuid: str) -> list[tuple[str, str]]:
    """The server's objects still in the cluster (kind, name), pods included."""
    return sorted((kind, key[1]) for kind in ("VirtualMachine", "VirtualMachineInstance", "Pod", "DataVolume")
                  for key, obj in world.cluster.objects(kind).items()
                  if uuid in key[1] or uuid in str((obj.get("metadata") or {}).get("labels")))


def test_a_server_on_a_not_ready_node_is_deleted_without_waiting_for_it(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    assert world.pods_on(source, uuid)
    world.node_down(source, force=False)  # NotReady, its service still up (service_down_time not passed)
    assert world.service(source)["state"] == "up"

    got = world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert got.status_code == 204, got.text
    got = until(world.client, world.controller, uuid, lambda g: g.status_code == 404)
    assert got.status_code == 404, got.json
    assert _left(world, uuid) == []
    assert world.allocations(uuid) == set()


@pytest.mark.parametrize("forced", [True, False], ids=["forced-down", "down"])
def test_a_server_whose_compute_service_is_down_is_deleted_locally_as_nova_does(world, forced):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    world.node_down(source, force=forced)
    if not forced:  # down once its heartbeat is older than service_down_time
        world.conf.set_override("service_down_time", 1)
        time.sleep(1.5)
        world.beat()
    assert world.service(source)["state"] == "down"

    got = world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert got.status_code == 204, got.text
    # gone at once, before the controller ran: Nova's API deleted it itself
    assert world.client.get(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 404
    deleted = world.client.get(f"/v2.1/servers/detail?all_tenants=1&deleted=True&uuid={uuid}", headers=_admin())
    (row,) = deleted.json["servers"]
    assert (row["status"], row["OS-EXT-STS:vm_state"], row["OS-EXT-STS:task_state"], row["OS-EXT-STS:power_state"]) == (
        "DELETED", "deleted", None, 1)  # as the servers oracle answers: the power state as it was (no compute ran)
    actions = world.client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=_admin()).json["instanceActions"]
    assert [a["action"] for a in actions] == ["delete", "create"]
    got = world.client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{actions[0]['request_id']}", headers=_admin())
    assert got.json["instanceAction"]["events"] == []  # no compute ran it

    for _ in range(200):  # the controller cleans what the server had in the cluster and in Placement
        world.controller.run_once()
        if not _left(world, uuid):
            break
    assert _left(world, uuid) == []
    assert world.allocations(uuid) == set()
    world.controller.run_once()
    assert _pending(world) == []


def test_a_soft_delete_on_a_down_service_deletes_for_good_as_novas_local_delete(world):
    world.conf.set_override("reclaim_instance_interval", 3600)
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    world.node_down(source)
    assert world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    assert world.client.get(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 404  # not SOFT_DELETED
    deleted = world.client.get(f"/v2.1/servers/detail?all_tenants=1&deleted=True&uuid={uuid}", headers=_admin())
    (row,) = deleted.json["servers"]  # the row as Nova's local soft delete leaves it
    assert (row["status"], row["OS-EXT-STS:vm_state"], row["OS-EXT-STS:task_state"]) == ("DELETED", "soft-delete", None)
    assert _pending(world) == ["local-delete"]
    for _ in range(200):
        world.controller.run_once()
        if not _left(world, uuid):
            break
    assert _left(world, uuid) == []
    assert world.allocations(uuid) == set()


def test_force_delete_of_a_soft_deleted_server_on_a_down_service_is_local(world):
    world.conf.set_override("reclaim_instance_interval", 3600)
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    assert world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    world.wait(uuid, "SOFT_DELETED")
    world.node_down(source)
    got = world.client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"forceDelete": None})
    assert got.status_code == 202, got.text
    assert world.client.get(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 404
    assert _pending(world) == ["local-delete"]
    for _ in range(200):
        world.controller.run_once()
        if not _left(world, uuid):
            break
    assert _left(world, uuid) == []
    assert world.allocations(uuid) == set()


def _admin():
    return admin("2.96")


def _pending(world) -> list[str]:
    with world.engine.connect() as conn:
        return [r[0] for r in conn.execute(select(OUTBOX.c.operation).where(OUTBOX.c.done_at.is_(None)))]


@pytest.mark.parametrize("engine_name", ENGINES[:1])
def test_a_local_delete_notifies_from_the_api_as_nova_does(engine_name, tmp_path, placement_service):
    with evacuate_world(engine_name, tmp_path, placement_service, notifying=True) as world:
        server = world.boot()
        uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
        world.node_down(source)
        before = len(notifications())
        assert world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
        sent = notifications()[before:]
    deletes = [(t, p) for t, p in sent if ".delete." in t or ".shutdown." in t]  # no compute's shutdown
    assert [d for d in deletes if d[0].startswith("instance.")] == [
        ("instance.delete.start", "nova-api:fake-mini"), ("instance.delete.end", "nova-api:fake-mini")]
    assert [d for d in deletes if d[0].startswith("compute.")] == [
        ("compute.instance.delete.start", "compute.fake-mini"), ("compute.instance.delete.end", "compute.fake-mini")]


@pytest.mark.parametrize("engine_name", ENGINES[:1])
def test_a_local_force_delete_notifies_force_delete_legacy_only(engine_name, tmp_path, placement_service):
    with evacuate_world(engine_name, tmp_path, placement_service, notifying=True) as world:
        world.conf.set_override("reclaim_instance_interval", 3600)
        server = world.boot()
        uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
        assert world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
        world.wait(uuid, "SOFT_DELETED")
        world.node_down(source)
        before = len(notifications())
        got = world.client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"forceDelete": None})
        assert got.status_code == 202, got.text
        sent = notifications()[before:]
    assert [(t, p) for t, p in sent if "delete" in t] == [
        ("compute.instance.force_delete.start", "compute.fake-mini"),
        ("compute.instance.force_delete.end", "compute.fake-mini")]


def test_a_locked_server_on_a_down_service_is_refused_as_nova_refuses_it(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    got = world.client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"lock": None})
    assert got.status_code == 202, got.text
    world.node_down(source)
    got = world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {
        "code": 409, "message": f"Instance {uuid} is locked"}})
    assert world.server(uuid)["status"] == "ACTIVE"  # nothing done
    assert _pending(world) == []
    # the admin may: deleted locally
    assert world.client.delete(f"/v2.1/servers/{uuid}", headers=_admin()).status_code == 204
    assert world.client.get(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 404
