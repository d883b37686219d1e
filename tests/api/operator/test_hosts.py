"""os-hosts (up to 2.42): the enabled compute services by zone, a node's resources in total and per
project, and the actions a driver without them answers 501 for; on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin, user


def test_list_leaves_out_disabled_services_and_filters_by_zone(api):
    hosts = api.get("/v2.1/os-hosts", headers=admin("2.42")).json["hosts"]
    assert hosts == [{"host_name": f"emulated-node-{i}", "service": "compute", "zone": "nova"} for i in (1, 2, 3)]
    api.put("/v2.1/os-services/disable", headers=admin(), json_body={"host": "emulated-node-2",
                                                                     "binary": "nova-compute"})
    assert [h["host_name"] for h in api.get("/v2.1/os-hosts", headers=admin()).json["hosts"]] == [
        "emulated-node-1", "emulated-node-3"]
    assert api.get("/v2.1/os-hosts?zone=internal", headers=admin()).json["hosts"] == []
    assert api.get("/v2.1/os-hosts", headers=admin("2.43")).status_code == 404
    assert api.get("/v2.1/os-hosts", headers=user()).status_code == 403


def test_show_totals_and_projects(api, engine):
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="s", memory_mb=2048, vcpus=2, root_gb=20, ephemeral_gb=5, flavorid="s")
        for project in ("p1", "p2", "p1"):
            store.create(conn, actor=Actor("u", project), flavor=catalog.get(conn, "s"), extra_specs={},
                         display_name="x")
        conn.execute(sa.update(models.INSTANCES).values(host="emulated-node-1", node="emulated-node-1"))
    got = api.get("/v2.1/os-hosts/emulated-node-1", headers=admin()).json["host"]
    resources = [r["resource"] for r in got]
    assert [(r["project"], r["cpu"], r["memory_mb"], r["disk_gb"]) for r in resources] == [
        ("(total)", 16, 65536, 500), ("(used_now)", 6, 512 + 6144, 75), ("(used_max)", 6, 6144, 75),
        ("p1", 4, 4096, 50), ("p2", 2, 2048, 25)]
    assert {r["host"] for r in resources} == {"emulated-node-1"}
    assert api.get("/v2.1/os-hosts/nohost", headers=admin()).json == {
        "itemNotFound": {"code": 404, "message": "Host 'nohost' is not mapped to any cell"}}


def test_update_and_power_actions_answer_as_a_driver_without_them(api):
    got = api.put("/v2.1/os-hosts/emulated-node-1", headers=admin(), json_body={"status": "disable"})
    assert got.json == {"notImplemented": {"code": 501, "message": "The requested functionality is not supported."}}
    assert api.put("/v2.1/os-hosts/nohost", headers=admin(), json_body={"status": "disable"}).status_code == 404
    assert api.put("/v2.1/os-hosts/emulated-node-1", headers=admin(), json_body={}).status_code == 400
    for action in ("reboot", "shutdown", "startup"):
        assert api.get(f"/v2.1/os-hosts/emulated-node-1/{action}", headers=admin()).status_code == 501
        assert api.get(f"/v2.1/os-hosts/nohost/{action}", headers=admin()).status_code == 404
    services = api.get("/v2.1/os-services?host=emulated-node-1", headers=admin()).json["services"]
    assert services[0]["status"] == "enabled", "nothing changed"
