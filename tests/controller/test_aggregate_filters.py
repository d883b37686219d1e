"""Nova's scheduler filters that read aggregates, a node's servers and the request (three nodes; SQLite,
PostgreSQL and MariaDB): enabled in ``[filter_scheduler] enabled_filters`` they keep a build, a resize, a
cold or live migration, an evacuation and an unshelve to the nodes they let pass, and a request none
passes ends in Nova's "No valid host was found. There are not enough hosts available."."""

from __future__ import annotations

import json
import logging

import pytest

from openkeel_compute.conf.scheduling import DEFAULT_FILTERS
from openkeel_compute.controller import service
from tests.conftest import admin, make_conf
from tests.controller.evacuate_world import NODES, evacuate_world
from tests.databases import ENGINES
from tests.server_world import DEMO, IMAGE, IMAGE_ALT

NOT_ENOUGH = "No valid host was found. There are not enough hosts available."


def _world(request, tmp_path, placement_service, *names: str, **options: str):
    return evacuate_world(request.param, tmp_path, placement_service, filters=[*DEFAULT_FILTERS, *names],
                          filter_options=options)


def _host(server):
    return server["OS-EXT-SRV-ATTR:host"]


def _aggregate(world, name: str, hosts, metadata: dict[str, str]) -> None:
    got = world.client.post("/v2.1/os-aggregates", headers=admin(), json_body={"aggregate": {"name": name}})
    assert got.status_code == 200, got.text
    url = f"/v2.1/os-aggregates/{got.json['aggregate']['id']}/action"
    for host in hosts:
        assert world.client.post(url, headers=admin(), json_body={"add_host": {"host": host}}).status_code == 200
    got = world.client.post(url, headers=admin(), json_body={"set_metadata": {"metadata": metadata}})
    assert got.status_code == 200, got.text


def _flavor(world, flavorid: str, extra_specs: dict[str, str]) -> None:
    world.flavor(flavorid)
    got = world.client.post(f"/v2.1/flavors/{flavorid}/os-extra_specs", headers=admin(),
                            json_body={"extra_specs": extra_specs})
    assert got.status_code == 200, got.text


def _boot(world, name: str, *, flavor: str = "small", image: str = IMAGE) -> dict:
    got = world.client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
        "name": name, "imageRef": image, "flavorRef": flavor, "networks": "none"}})
    assert got.status_code == 202, got.text
    return world.wait(got.json["server"]["id"], "ACTIVE")


def _boot_failing(world, *, flavor: str = "small", image: str = IMAGE, hints: dict | None = None) -> None:
    got = world.client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
        "name": "nowhere", "imageRef": image, "flavorRef": flavor, "networks": "none"},
        **({"os:scheduler_hints": hints} if hints else {})})
    assert got.status_code == 202, got.text
    failed = world.wait(got.json["server"]["id"], "ERROR")
    assert (failed["fault"]["code"], failed["fault"]["message"]) == (500, NOT_ENOUGH)
    assert world.allocations(failed["id"]) == set()


def _action(world, server: dict, body: dict, headers=None) -> None:
    got = world.client.post(f"/v2.1/servers/{server['id']}/action", headers=headers or admin("2.56"), json_body=body)
    assert got.status_code == 202, got.text


def _migrate_refused(world, server: dict) -> None:
    """A cold migration no node passes: the server stays where it is, the conductor's event an error."""
    _action(world, server, {"migrate": None})
    assert _host(world.wait(server["id"], "ACTIVE")) == _host(server)
    assert ("conductor_migrate_server", "Error") in world.events(server["id"], "migrate")


@pytest.fixture(params=ENGINES)
def extra_specs_world(request, tmp_path, placement_service):
    with _world(request, tmp_path, placement_service, "AggregateInstanceExtraSpecsFilter") as world:
        _aggregate(world, "fast", NODES[1:], {"disk": "ssd", "cpus": "8"})
        _flavor(world, "ssd", {"aggregate_instance_extra_specs:disk": "s== ssd", "cpus": ">= 4"})
        _flavor(world, "hdd", {"disk": "hdd"})
        yield world


def test_the_flavors_extra_specs_keep_to_the_aggregates_that_match(extra_specs_world):
    world = extra_specs_world
    fast = _boot(world, "fast", flavor="ssd")
    assert _host(fast) in NODES[1:]
    _boot_failing(world, flavor="hdd")  # no aggregate has disk=hdd
    _action(world, fast, {"migrate": None})  # the other node of the aggregate
    assert _host(world.wait(fast["id"], "VERIFY_RESIZE")) in set(NODES[1:]) - {_host(fast)}
    plain = _boot(world, "plain")  # a flavor without extra specs: any node
    _action(world, plain, {"resize": {"flavorRef": "ssd"}}, headers=DEMO)  # the new flavor's specs count
    assert _host(world.wait(plain["id"], "VERIFY_RESIZE")) in NODES[1:]


@pytest.fixture(params=ENGINES)
def tenancy_world(request, tmp_path, placement_service):
    with _world(request, tmp_path, placement_service, "AggregateMultiTenancyIsolation") as world:
        _aggregate(world, "theirs", NODES[:2], {"filter_tenant_id": "other-project,third-project"})
        yield world


def test_an_aggregate_kept_for_other_projects_takes_none_of_ours(tenancy_world):
    world = tenancy_world
    ours = [_boot(tenancy_world, f"ours-{i}") for i in range(2)]
    assert {_host(s) for s in ours} == {NODES[2]}
    _migrate_refused(world, ours[0])
    _action(world, ours[1], {"os-migrateLive": {"host": None, "block_migration": "auto"}}, headers=admin("2.30"))
    assert _host(world.wait(ours[1]["id"], "ACTIVE")) == NODES[2]
    assert [m["status"] for m in world.migrations(ours[1]["id"])] == ["error"]


@pytest.fixture(params=ENGINES)
def isolated_world(request, tmp_path, placement_service):
    with _world(request, tmp_path, placement_service, "IsolatedHostsFilter", isolated_images=IMAGE,
                isolated_hosts=NODES[1]) as world:
        yield world


def test_isolated_images_keep_to_isolated_hosts(isolated_world):
    world = isolated_world
    isolated = _boot(world, "isolated")
    assert _host(isolated) == NODES[1]
    assert _host(_boot(world, "plain", image=IMAGE_ALT)) != NODES[1]  # the isolated host takes no other image
    world.node_down(NODES[1])
    assert world.evacuate(isolated["id"]).status_code == 200
    failed = world.wait(isolated["id"], "ERROR")
    assert failed["fault"]["message"] == NOT_ENOUGH and _host(failed) == NODES[1]


@pytest.mark.parametrize("engine_name", ENGINES)
def test_num_instances_per_host(engine_name, tmp_path, placement_service):
    with evacuate_world(engine_name, tmp_path, placement_service, filters=[*DEFAULT_FILTERS, "NumInstancesFilter"],
                        filter_options={"max_instances_per_host": "1"}) as world:
        assert {_host(_boot(world, f"s{i}")) for i in range(3)} == set(NODES)
        _boot_failing(world)


@pytest.fixture(params=ENGINES)
def aggregate_num_world(request, tmp_path, placement_service):
    with _world(request, tmp_path, placement_service, "AggregateNumInstancesFilter") as world:
        _aggregate(world, "closed", NODES[:2], {"max_instances_per_host": "0"})
        yield world


def test_an_aggregates_max_instances_per_host(aggregate_num_world):
    world = aggregate_num_world
    servers = [_boot(world, f"s{i}") for i in range(2)]
    assert {_host(s) for s in servers} == {NODES[2]}  # the global 50 where no aggregate says less
    _action(world, servers[0], {"shelve": None}, headers=DEMO)
    world.wait(servers[0]["id"], "SHELVED_OFFLOADED")
    _action(world, servers[0], {"unshelve": None}, headers=DEMO)
    assert _host(world.wait(servers[0]["id"], "ACTIVE")) == NODES[2]


@pytest.fixture(params=ENGINES)
def image_properties_world(request, tmp_path, placement_service):
    with _world(request, tmp_path, placement_service, "AggregateImagePropertiesIsolation") as world:
        _aggregate(world, "windows", NODES[:2], {"os_distro": "windows", "my_property": "x"})
        got = world.client.post(f"/v2.1/images/{IMAGE_ALT}/metadata", headers=admin("2.35"),
                                json_body={"metadata": {"os_distro": "ubuntu", "my_property": "y"}})
        assert got.status_code == 200, got.text
        yield world


def test_image_properties_keep_to_the_aggregates_that_match(image_properties_world):
    world = image_properties_world
    ubuntu = _boot(world, "ubuntu", image=IMAGE_ALT)
    assert _host(ubuntu) == NODES[2]
    _migrate_refused(world, ubuntu)
    assert _host(_boot(world, "plain")) in NODES  # an image without os_distro goes anywhere


@pytest.fixture(params=ENGINES)
def hints_world(request, tmp_path, placement_service):
    with _world(request, tmp_path, placement_service, "SimpleCIDRAffinityFilter", "JsonFilter") as world:
        yield world


def test_a_build_near_a_host_ip_keeps_to_its_network(hints_world):
    world = hints_world
    got = world.client.get("/v2.1/os-hypervisors/detail", headers=admin("2.53"))
    address = {h["hypervisor_hostname"]: h["host_ip"] for h in got.json["hypervisors"]}
    near = world.boot("near", hints={"build_near_host_ip": address[NODES[1]], "cidr": "/32"})
    assert _host(near) == NODES[1]
    _migrate_refused(world, near)  # the hints stay with the server
    assert _host(world.boot("nearby", hints={"build_near_host_ip": address[NODES[1]]})) in NODES  # a /24
    _boot_failing(world, hints={"build_near_host_ip": "10.9.9.9", "cidr": "/16"})


def test_a_json_query_keeps_to_the_hosts_it_selects(hints_world):
    world = hints_world
    there = world.boot("there", hints={"query": json.dumps(["and", ["=", "$host", NODES[2]],
                                                               [">=", "$free_ram_mb", 512]])})
    assert _host(there) == NODES[2]
    _action(world, there, {"os-migrateLive": {"host": None, "block_migration": "auto"}}, headers=admin("2.30"))
    assert _host(world.wait(there["id"], "ACTIVE")) == NODES[2]
    assert [m["status"] for m in world.migrations(there["id"])] == ["error"]
    _boot_failing(world, hints={"query": json.dumps(["<", "$num_instances", 0])})


def test_filters_without_effect_are_warned_of(tmp_path, caplog):
    conf = make_conf(tmp_path, filter_scheduler={
        "enabled_filters": "ComputeFilter,NUMATopologyFilter,SameHostFilter,IoOpsFilter,JsonFilter"})
    with caplog.at_level(logging.WARNING):
        assert service.warn_filters_without_effect(conf) == ["NUMATopologyFilter", "IoOpsFilter"]
    (record,) = [r for r in caplog.records if "no effect on KubeVirt" in r.getMessage()]
    assert record.getMessage().endswith("no effect on KubeVirt: NUMATopologyFilter, IoOpsFilter")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert service.warn_filters_without_effect(make_conf(tmp_path)) == []  # Nova's default filters
    assert "no effect" not in caplog.text
