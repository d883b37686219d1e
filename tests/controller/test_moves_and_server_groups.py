"""Moves honour the server's group (three nodes; SQLite, PostgreSQL and MariaDB): an evacuation and a resize
to another node refuse a node holding an anti-affinity member, an affinity member keeps to its members'
node, and when no node fits the move ends as Nova's conductor ends it (the servers oracle, two fake
computes, an affinity pair evacuated: ERROR, "No valid host was found. There are not enough hosts
available.", the migration ``error``, the conductor's ``rebuild_server`` event failed)."""

from __future__ import annotations

import pytest

from tests.conftest import admin
from tests.controller.evacuate_world import NODES, evacuate_world
from tests.databases import ENGINES
from tests.server_world import DEMO

NOT_ENOUGH = "No valid host was found. There are not enough hosts available."


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service):
    with evacuate_world(request.param, tmp_path, placement_service) as w:
        yield w


def _group(world, policy):
    got = world.client.post("/v2.1/os-server-groups", headers=DEMO, json_body={
        "server_group": {"name": policy, "policy": policy}})
    assert got.status_code == 200, got.text
    return got.json["server_group"]["id"]


def _members(world, policy, count):
    group = _group(world, policy)
    return [world.boot(f"m{i}", hints={"group": group}) for i in range(count)]


def test_evacuate_skips_a_node_holding_an_anti_affinity_member(world):
    first, second = _members(world, "anti-affinity", 2)
    source, taken = first["OS-EXT-SRV-ATTR:host"], second["OS-EXT-SRV-ATTR:host"]
    world.node_down(source)
    assert world.evacuate(first["id"]).status_code == 200
    done = world.wait(first["id"], "ACTIVE")
    assert done["OS-EXT-SRV-ATTR:host"] not in (source, taken)
    assert world.allocations(first["id"]) == {source, done["OS-EXT-SRV-ATTR:host"]}


def test_no_node_for_an_anti_affinity_member_ends_as_novas_conductor_ends_it(world):
    first, *_rest = _members(world, "anti-affinity", 3)
    uuid, source = first["id"], first["OS-EXT-SRV-ATTR:host"]
    world.node_down(source)
    assert world.evacuate(uuid).status_code == 200
    failed = world.wait(uuid, "ERROR")
    assert failed["fault"]["message"] == NOT_ENOUGH and failed["fault"]["code"] == 500
    assert failed["OS-EXT-SRV-ATTR:host"] == source
    (migration,) = world.migrations(uuid)
    assert (migration["status"], migration["dest_compute"]) == ("error", None)
    assert world.events(uuid, "evacuate") == [("rebuild_server", "Error")]
    assert world.allocations(uuid) == {source}  # nothing claimed, the source's kept
    assert world.beat() == []  # no evacuation to complete


def test_an_affinity_member_keeps_to_its_members_node(world):
    first, second = _members(world, "affinity", 2)
    source = first["OS-EXT-SRV-ATTR:host"]
    assert second["OS-EXT-SRV-ATTR:host"] == source
    world.node_down(source)
    assert world.evacuate(first["id"]).status_code == 200
    assert world.wait(first["id"], "ERROR")["fault"]["message"] == NOT_ENOUGH


def test_a_soft_affinity_member_is_evacuated_its_policy_only_weighs(world):
    if world.engine.dialect.name != "sqlite":
        pytest.skip("soft policies run on SQLite; the hard ones on every engine")
    first, _second = _members(world, "soft-affinity", 2)
    source = first["OS-EXT-SRV-ATTR:host"]
    world.node_down(source)
    assert world.evacuate(first["id"]).status_code == 200
    assert world.wait(first["id"], "ACTIVE")["OS-EXT-SRV-ATTR:host"] != source


def test_a_resize_to_another_node_honours_anti_affinity(world):
    if world.engine.dialect.name != "sqlite":
        pytest.skip("the resize's group check runs on SQLite; the evacuations' on every engine")
    world.flavor("large", ram=1024)
    first, second = _members(world, "anti-affinity", 2)
    got = world.client.post(f"/v2.1/servers/{first['id']}/action", headers=DEMO,
                            json_body={"resize": {"flavorRef": "large"}})
    assert got.status_code == 202, got.text
    resized = world.wait(first["id"], "VERIFY_RESIZE")
    assert resized["OS-EXT-SRV-ATTR:host"] != second["OS-EXT-SRV-ATTR:host"]
    third = world.boot("m-last", hints={"group": _group_of(world, first["id"])})
    assert {s["OS-EXT-SRV-ATTR:host"] for s in (resized, second, third)} == set(NODES)
    got = world.client.post(f"/v2.1/servers/{second['id']}/action", headers=DEMO,
                            json_body={"resize": {"flavorRef": "large"}})
    assert got.status_code == 202
    back = world.wait(second["id"], "ACTIVE")  # every other node holds a member: Nova's no valid host
    assert back["flavor"]["original_name"] == "m1.small" and "fault" not in back  # shown in ERROR only
    assert world.events(second["id"], "resize") == [("conductor_migrate_server", "Error")]
    assert [m["status"] for m in world.client.get(f"/v2.1/os-migrations?instance_uuid={second['id']}",
                                                  headers=admin("2.80")).json["migrations"]] == ["error"]


def _group_of(world, uuid):
    return world.client.get(f"/v2.1/servers/{uuid}", headers=admin("2.71")).json["server"]["server_groups"][0]
