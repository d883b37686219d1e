"""The different_host and same_host scheduler hints (three nodes; SQLite, PostgreSQL and MariaDB): with
Nova's DifferentHostFilter and SameHostFilter enabled a build, a cold migration, a live migration, an
evacuation and an unshelve keep to the nodes the hints allow, and when none is left it is Nova's "No valid
host was found. There are not enough hosts available."; with Nova's default filters the hints do not act."""

from __future__ import annotations

import uuid as uuidlib

import pytest

from openkeel_compute.conf.scheduling import DEFAULT_FILTERS
from tests.conftest import admin
from tests.controller.evacuate_world import NODES, evacuate_world
from tests.databases import ENGINES
from tests.server_world import DEMO, IMAGE, until

NOT_ENOUGH = "No valid host was found. There are not enough hosts available."
HINTS = [*DEFAULT_FILTERS, "DifferentHostFilter", "SameHostFilter"]


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service):
    with evacuate_world(request.param, tmp_path, placement_service, filters=HINTS) as w:
        yield w


def _host(server):
    return server["OS-EXT-SRV-ATTR:host"]


def _spread(world):
    """Three servers, one a node, placed so by their different_host hints."""
    a = world.boot("a")
    b = world.boot("b", hints={"different_host": a["id"]})
    c = world.boot("c", hints={"different_host": [a["id"], b["id"]]})
    assert {_host(a), _host(b), _host(c)} == set(NODES)
    return a, b, c


def _boot_failing(world, hints):
    got = world.client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
        "name": "nowhere", "imageRef": IMAGE, "flavorRef": "small", "networks": "none"},
        "os:scheduler_hints": hints})
    assert got.status_code == 202, got.text
    failed = world.wait(got.json["server"]["id"], "ERROR")
    assert (failed["fault"]["code"], failed["fault"]["message"]) == (500, NOT_ENOUGH)
    assert world.allocations(failed["id"]) == set()  # the claim given back


def test_a_build_keeps_to_the_nodes_its_hints_allow(world):
    a, b, c = _spread(world)
    assert _host(world.boot("d", hints={"same_host": b["id"]})) == _host(b)
    assert _host(world.boot("e", hints={"same_host": [b["id"], c["id"]]})) in (_host(b), _host(c))
    # both hints at once: near b, away from c
    assert _host(world.boot("f", hints={"same_host": [b["id"], c["id"]], "different_host": c["id"]})) == _host(b)
    _boot_failing(world, {"different_host": [a["id"], b["id"], c["id"]]})
    _boot_failing(world, {"same_host": str(uuidlib.uuid4())})  # a server that is nowhere


def test_a_cold_migration_keeps_to_the_nodes_its_hints_allow(world):
    a, b, _c = _spread(world)
    d = world.boot("d", hints={"different_host": a["id"]})  # on b's or c's node
    got = world.client.post(f"/v2.1/servers/{d['id']}/action", headers=admin("2.56"), json_body={"migrate": None})
    assert got.status_code == 202, got.text
    moved = world.wait(d["id"], "VERIFY_RESIZE")
    assert _host(moved) not in (_host(a), _host(d))
    got = world.client.post(f"/v2.1/servers/{b['id']}/action", headers=admin("2.56"), json_body={"migrate": None})
    assert got.status_code == 202  # b's hint keeps it away from a, and c's node is taken by nothing: it moves
    assert _host(world.wait(b["id"], "VERIFY_RESIZE")) != _host(a)


def test_moves_with_no_node_left_end_in_no_valid_host(world):
    _a, _b, c = _spread(world)  # c: away from a and b; the only other node is its own
    got = world.client.post(f"/v2.1/servers/{c['id']}/action", headers=admin("2.56"), json_body={"migrate": None})
    assert got.status_code == 202, got.text
    back = world.wait(c["id"], "ACTIVE")
    assert _host(back) == _host(c)
    assert ("conductor_migrate_server", "Error") in world.events(c["id"], "migrate")
    got = world.client.post(f"/v2.1/servers/{c['id']}/action", headers=admin("2.30"),
                            json_body={"os-migrateLive": {"host": None, "block_migration": "auto"}})
    assert got.status_code == 202, got.text
    assert _host(world.wait(c["id"], "ACTIVE")) == _host(c)
    assert [m["status"] for m in world.migrations(c["id"])] == ["error", "error"]
    world.node_down(_host(c))
    assert world.evacuate(c["id"]).status_code == 200
    failed = world.wait(c["id"], "ERROR")
    assert failed["fault"]["message"] == NOT_ENOUGH and _host(failed) == _host(c)


def test_an_unshelve_keeps_to_the_nodes_its_hints_allow(world):
    a, b, _c = _spread(world)
    d = world.boot("d", hints={"same_host": b["id"]})
    assert world.client.post(f"/v2.1/servers/{d['id']}/action", headers=DEMO,
                             json_body={"shelve": None}).status_code == 202
    world.wait(d["id"], "SHELVED_OFFLOADED")
    assert world.client.post(f"/v2.1/servers/{d['id']}/action", headers=DEMO,
                             json_body={"unshelve": None}).status_code == 202
    assert _host(world.wait(d["id"], "ACTIVE")) == _host(b)
    assert world.client.post(f"/v2.1/servers/{d['id']}/action", headers=DEMO,
                             json_body={"shelve": None}).status_code == 202
    world.wait(d["id"], "SHELVED_OFFLOADED")
    assert world.client.delete(f"/v2.1/servers/{b['id']}", headers=DEMO).status_code == 204
    assert until(world.client, world.controller, b["id"], lambda g: g.status_code == 404).status_code == 404
    assert world.client.post(f"/v2.1/servers/{d['id']}/action", headers=DEMO,
                             json_body={"unshelve": None}).status_code == 202
    still = world.wait(d["id"], "SHELVED_OFFLOADED")  # b is gone: no node has it, the unshelve finds none
    assert _host(still) is None and ("schedule_instances", "Error") in world.events(d["id"], "unshelve")
    assert world.allocations(d["id"]) == set()
    del a


@pytest.mark.parametrize("engine_name", ENGINES)
def test_with_novas_default_filters_the_hints_do_not_act(engine_name, tmp_path, placement_service):
    with evacuate_world(engine_name, tmp_path, placement_service) as world:
        a = world.boot("a")
        # refused everywhere were the filters enabled (see _boot_failing above)
        d = world.boot("d", hints={"same_host": str(uuidlib.uuid4()), "different_host": a["id"]})
        assert _host(d) in NODES
