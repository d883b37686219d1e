"""os-simple-tenant-usage over servers whose launch and termination times are known, on SQLite,
PostgreSQL and MariaDB (tests/api/test_tenant_usage_against_nova.py compares with Nova itself).

The period is November 2026. Charged: a server launched before it and still running (the whole
month, 720 h), one launched and deleted inside it (36 h, "terminated"), one launched half an hour
before its end (0.5 h, another project). Not charged: one terminated before the period, one
launched after it, one never launched.
"""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from openkeel_compute.api.deploy import deploy
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import states
from tests.conftest import admin, make_conf, user
from tests.databases import ENGINES, throwaway_database
from tests.wsgi_client import Client

SPAN = "00000000-0000-4000-8000-000000000001"
DELETED = "00000000-0000-4000-8000-000000000002"
LATE = "00000000-0000-4000-8000-000000000003"
BEFORE = "00000000-0000-4000-8000-000000000004"
AFTER = "00000000-0000-4000-8000-000000000005"
NEVER = "00000000-0000-4000-8000-000000000006"
PERIOD = "start=2026-11-01T00:00:00&end=2026-12-01T00:00:00"


def _t(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def _server(conn, uuid, name, project, flavorid, launched, terminated=None, vm_state=states.ACTIVE):
    store.create(conn, actor=Actor("u-" + project, project), flavor=catalog.get(conn, flavorid), extra_specs={},
                 display_name=name, uuid=uuid)
    values = {"launched_at": _t(launched), "vm_state": vm_state, "task_state": None}
    if terminated:
        values.update(terminated_at=_t(terminated), deleted_at=_t(terminated), deleted=models.INSTANCES.c.id,
                      vm_state=states.DELETED)
    conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(**values))


@pytest.fixture(params=ENGINES)
def cloud(request, tmp_path):
    with throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with db_api.transaction(engine) as conn:
            catalog.create(conn, name="small", memory_mb=2048, vcpus=2, root_gb=20, ephemeral_gb=5, flavorid="s")
            catalog.create(conn, name="tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="t")
            _server(conn, SPAN, "span", "p1", "s", "2026-10-20T00:00:00")
            _server(conn, DELETED, "gone", "p1", "t", "2026-11-10T00:00:00", terminated="2026-11-11T12:00:00")
            _server(conn, LATE, "late", "p2", "t", "2026-11-30T23:30:00", vm_state=states.STOPPED)
            _server(conn, BEFORE, "before", "p1", "t", "2026-10-01T00:00:00", terminated="2026-10-15T00:00:00")
            _server(conn, AFTER, "after", "p1", "t", "2026-12-02T00:00:00")
            _server(conn, NEVER, "never", "p1", "t", None, vm_state=states.BUILDING)
        yield Client(deploy(conf))
        db_api.dispose_all()


def test_hours_and_totals_are_novas_for_servers_running_deleted_and_late_in_the_period(cloud):
    got = cloud.get(f"/v2.1/os-simple-tenant-usage?detailed=1&{PERIOD}", headers=admin())
    assert got.status_code == 200, got.text
    p1, p2 = got.json["tenant_usages"]
    assert [u["instance_id"] for u in p1["server_usages"]] == [SPAN, DELETED]
    span, gone = p1["server_usages"]
    assert span["hours"] == 720.0 and span["state"] == "active" and span["ended_at"] is None
    assert (span["flavor"], span["memory_mb"], span["local_gb"], span["vcpus"]) == ("small", 2048, 25, 2)
    assert span["started_at"] == "2026-10-20T00:00:00.000000"
    assert gone == {"hours": 36.0, "flavor": "tiny", "instance_id": DELETED, "name": "gone", "tenant_id": "p1",
                    "memory_mb": 512, "local_gb": 1, "vcpus": 1, "started_at": "2026-11-10T00:00:00.000000",
                    "ended_at": "2026-11-11T12:00:00.000000", "state": "terminated", "uptime": 36 * 3600}
    assert {k: v for k, v in p1.items() if k != "server_usages"} == {
        "tenant_id": "p1", "total_local_gb_usage": 25 * 720 + 36, "total_vcpus_usage": 2 * 720 + 36,
        "total_memory_mb_usage": 2048 * 720 + 512 * 36, "total_hours": 756.0,
        "start": "2026-11-01T00:00:00.000000", "stop": "2026-12-01T00:00:00.000000"}
    assert p2["server_usages"][0]["hours"] == 0.5 and p2["server_usages"][0]["state"] == "stopped"
    assert p2["total_memory_mb_usage"] == 256.0


def test_without_detailed_the_list_has_totals_only(cloud):
    got = cloud.get(f"/v2.1/os-simple-tenant-usage?{PERIOD}", headers=admin())
    assert [sorted(u) for u in got.json["tenant_usages"]] == [sorted(
        ["tenant_id", "total_local_gb_usage", "total_vcpus_usage", "total_memory_mb_usage", "total_hours", "start",
         "stop"])] * 2


def test_a_project_sees_its_own_usage_and_an_empty_one_for_a_project_without_servers(cloud):
    got = cloud.get(f"/v2.1/os-simple-tenant-usage/p2?{PERIOD}", headers=user(project="p2"))
    assert got.json["tenant_usage"]["total_hours"] == 0.5
    assert cloud.get(f"/v2.1/os-simple-tenant-usage/p3?{PERIOD}", headers=admin()).json == {"tenant_usage": {}}


def test_pages_follow_project_then_server_order_with_next_links_from_2_40(cloud):
    first = cloud.get(f"/v2.1/os-simple-tenant-usage?detailed=1&{PERIOD}&limit=2", headers=admin("2.40")).json
    assert [u["instance_id"] for t in first["tenant_usages"] for u in t["server_usages"]] == [SPAN, DELETED]
    href = first["tenant_usages_links"][0]["href"]
    assert href == ("http://127.0.0.1:18774/v2.1/os-simple-tenant-usage?detailed=1&end=2026-12-01T00%3A00%3A00"
                    f"&limit=2&start=2026-11-01T00%3A00%3A00&marker={DELETED}")
    second = cloud.get(href.split("18774", 1)[1], headers=admin("2.40")).json
    assert [u["instance_id"] for t in second["tenant_usages"] for u in t["server_usages"]] == [LATE]
    assert "tenant_usages_links" not in second
    # before 2.40 limit and marker are not read
    old = cloud.get(f"/v2.1/os-simple-tenant-usage?detailed=1&{PERIOD}&limit=1&marker={LATE}", headers=admin("2.39"))
    assert len(old.json["tenant_usages"]) == 2 and "tenant_usages_links" not in old.json


@pytest.mark.parametrize(("query", "message"), [
    ("start=2026-11-01", "Invalid datetime string: Datetime is in invalid format"),
    ("start=2026-12-01T00:00:00&end=2026-11-01T00:00:00",
     "Invalid start time. The start time cannot occur after the end time."),
    (f"{PERIOD}&marker=nope", "Marker nope could not be found."),
])
def test_bad_periods_and_markers_are_novas_400s(cloud, query, message):
    got = cloud.get(f"/v2.1/os-simple-tenant-usage?{query}", headers=admin("2.40"))
    assert (got.status_code, got.json) == (400, {"badRequest": {"code": 400, "message": message}})


def test_listing_every_project_is_an_administrators_and_another_projects_usage_is_refused(cloud):
    assert cloud.get("/v2.1/os-simple-tenant-usage", headers=user(project="p1")).json["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-simple-tenant-usage:list to be performed.")
    assert cloud.get("/v2.1/os-simple-tenant-usage/p1", headers=user(project="p2")).status_code == 403
