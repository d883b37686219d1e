"""os-hypervisors: one hypervisor per node with its capacity and what its servers use, every operation
across microversions (2.28 cpu_info, 2.33 paging, 2.53 uuids, search and servers as query parameters,
2.75 empty servers, 2.88 field removal), on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.controller import providers
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin, user

NODES = ["emulated-node-1", "emulated-node-2", "emulated-node-3"]
S1 = "00000000-0000-4000-8000-000000000001"
S2 = "00000000-0000-4000-8000-000000000002"


@pytest.fixture
def servers(engine):
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="small", memory_mb=2048, vcpus=2, root_gb=20, ephemeral_gb=5, flavorid="s")
        for server in (S1, S2):
            store.create(conn, actor=Actor("u", "p"), flavor=catalog.get(conn, "s"), extra_specs={},
                         display_name="s", uuid=server)
        conn.execute(sa.update(models.INSTANCES).values(host="emulated-node-2", node="emulated-node-2",
                                                        vm_state="active"))
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == S2).values(vm_state="building"))
        ids = dict(conn.execute(sa.select(models.INSTANCES.c.uuid, models.INSTANCES.c.id)).all())
    return [{"name": f"instance-{ids[s]:08x}", "uuid": s} for s in (S1, S2)]


def _get(api, path, version):
    got = api.get(f"/v2.1/os-hypervisors{path}", headers=admin(version))
    return got


def test_index_lists_each_node_with_ids_before_and_uuids_from_253(api):
    old = _get(api, "", "2.1").json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in old] == NODES
    assert all(isinstance(h["id"], int) and set(h) == {"id", "hypervisor_hostname", "state", "status"} for h in old)
    new = _get(api, "", "2.53").json["hypervisors"]
    assert [h["id"] for h in new] == [providers.provider_uuid(n) for n in NODES], "the node's provider in Placement"
    assert {(h["state"], h["status"]) for h in new} == {("up", "enabled")}


def test_detail_before_288_has_capacity_and_usage_as_novas_resource_tracker(api, servers):
    detail = _get(api, "/detail", "2.53").json["hypervisors"][1]
    services = api.get("/v2.1/os-services?host=emulated-node-2", headers=admin("2.53")).json["services"]
    assert detail["service"] == {"id": services[0]["id"], "host": "emulated-node-2", "disabled_reason": None}
    assert (detail["hypervisor_type"], detail["host_ip"].startswith("192.168.122.")) == ("KubeVirt", True)
    assert {k: detail[k] for k in ("vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used",
                                   "local_gb_used", "free_ram_mb", "free_disk_gb", "running_vms",
                                   "current_workload")} == {
        "vcpus": 16, "memory_mb": 65536, "local_gb": 500, "vcpus_used": 4, "memory_mb_used": 512 + 4096,
        "local_gb_used": 50, "free_ram_mb": 65536 - 4608, "free_disk_gb": 450, "running_vms": 2,
        "current_workload": 1}
    assert detail["cpu_info"]["topology"] == {"cores": 16, "threads": 1, "sockets": 1}
    assert isinstance(_get(api, "/detail", "2.27").json["hypervisors"][0]["cpu_info"], str)
    new = _get(api, "/detail", "2.88").json["hypervisors"][1]
    assert set(new) == {"id", "hypervisor_hostname", "state", "status", "hypervisor_type", "hypervisor_version",
                        "host_ip", "service", "uptime"} and new["uptime"] is None


def test_show_with_servers_and_the_ids_errors(api, servers):
    first = _get(api, "", "2.53").json["hypervisors"][1]
    got = _get(api, f"/{first['id']}?with_servers=true", "2.53").json["hypervisor"]
    assert got["servers"] == servers
    empty = _get(api, "", "2.53").json["hypervisors"][0]["id"]
    assert "servers" not in _get(api, f"/{empty}?with_servers=1", "2.53").json["hypervisor"]
    assert _get(api, f"/{empty}?with_servers=1", "2.75").json["hypervisor"]["servers"] == []
    assert _get(api, "/abc", "2.53").json["badRequest"]["message"] == "Invalid uuid abc"
    missing = str(uuid.uuid4())
    assert _get(api, f"/{missing}", "2.53").json["itemNotFound"]["message"] == (
        f"Hypervisor with ID '{missing}' could not be found.")
    assert _get(api, "/abc", "2.1").json["itemNotFound"]["message"] == "Hypervisor with ID 'abc' could not be found."
    assert _get(api, "/99", "2.1").json["itemNotFound"]["message"] == "Hypervisor with ID '99' could not be found."
    old = _get(api, "", "2.1").json["hypervisors"][1]["id"]
    assert _get(api, f"/{old}", "2.1").json["hypervisor"]["running_vms"] == 2
    assert _get(api, f"/{first['id']}?with_servers=maybe", "2.53").status_code == 400


def test_paging_from_233_and_the_pattern_from_253(api):
    page = _get(api, "?limit=1", "2.53").json
    assert len(page["hypervisors"]) == 1
    assert page["hypervisors_links"][0]["href"].endswith(
        f"/v2.1/os-hypervisors?limit=1&marker={page['hypervisors'][0]['id']}")
    nxt = _get(api, f"?limit=2&marker={page['hypervisors'][0]['id']}", "2.53").json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in nxt] == NODES[1:]
    assert _get(api, "?marker=abc", "2.53").json["badRequest"]["message"] == "marker [abc] not found"
    old = _get(api, "/detail?limit=1&marker=1", "2.33").json
    assert [h["id"] for h in old["hypervisors"]] == [2] and "/os-hypervisors/detail?" in (
        old["hypervisors_links"][0]["href"])
    assert [h["hypervisor_hostname"] for h in _get(api, "?hypervisor_hostname_pattern=node-3", "2.53")
            .json["hypervisors"]] == ["emulated-node-3"]
    assert _get(api, "?hypervisor_hostname_pattern=zz", "2.53").json["itemNotFound"]["message"] == (
        "No hypervisor matching 'zz' could be found.")
    assert _get(api, "?hypervisor_hostname_pattern=node&limit=1", "2.53").status_code == 400
    assert _get(api, "?foo=1", "2.53").status_code == 400
    assert len(_get(api, "?foo=1", "2.52").json["hypervisors"]) == 3


def test_search_servers_statistics_and_uptime_before_their_removal(api, servers):
    found = _get(api, "/NODE-2/search", "2.1").json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in found] == ["emulated-node-2"] and "servers" not in found[0]
    assert _get(api, "/zzz/search", "2.1").json["itemNotFound"]["message"] == (
        "No hypervisor matching 'zzz' could be found.")
    on = _get(api, "/emulated/servers", "2.1").json["hypervisors"]
    assert [h.get("servers") for h in on] == [None, servers, None]
    assert _get(api, "/emulated/search", "2.53").status_code == 404
    stats = _get(api, "/statistics", "2.1").json["hypervisor_statistics"]
    assert (stats["count"], stats["vcpus"], stats["vcpus_used"], stats["running_vms"]) == (3, 48, 4, 2)
    assert stats["memory_mb_used"] == 3 * 512 + 4096
    assert _get(api, "/statistics", "2.88").status_code == 404
    old = _get(api, "", "2.1").json["hypervisors"][0]["id"]
    got = _get(api, f"/{old}/uptime", "2.1")
    assert got.status_code == 501
    assert got.json == {"notImplemented": {"code": 501, "message": "The requested functionality is not supported."}}
    assert _get(api, "/77/uptime", "2.1").status_code == 404


def test_a_disabled_service_shows_on_its_hypervisor_and_only_admins_look(api):
    service = api.get("/v2.1/os-services?host=emulated-node-1", headers=admin("2.53")).json["services"][0]
    api.put(f"/v2.1/os-services/{service['id']}", headers=admin("2.53"),
            json_body={"status": "disabled", "disabled_reason": "drain"})
    first = _get(api, "/detail", "2.53").json["hypervisors"][0]
    assert (first["status"], first["service"]["disabled_reason"]) == ("disabled", "drain")
    got = api.get("/v2.1/os-hypervisors", headers=user())
    assert got.status_code == 403
    assert json.loads(got.text)["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-hypervisors:list to be performed.")
