"""GET /servers/{id}/os-instance-actions (+ /{request_id}) against the answers recorded from
Nova 34.0.0: the actions of the recorded server, rebuilt row by row."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from openkeel_compute.compute.instances import deletion
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers import oracle_state as oracle

BASE = f"/v2.1/servers/{oracle.SERVER_A}/os-instance-actions"


def _t(text):
    return dt.datetime.fromisoformat(text) if text else None


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    listed = oracle.recorded("actions list @2.58 (updated_at, paging)")["body"]["instanceActions"]
    create = oracle.recorded("show create action @2.84 (admin)")["body"]["instanceAction"]
    A = models.INSTANCE_ACTIONS
    with db_api.transaction(engine) as conn:
        conn.execute(sa.delete(A))  # the boot's own "create": replaced by the recorded one
        for action in reversed(listed):
            values = {"action": action["action"], "instance_uuid": action["instance_uuid"],
                      "request_id": action["request_id"], "user_id": action["user_id"],
                      "project_id": action["project_id"], "start_time": _t(action["start_time"]),
                      "finish_time": None, "message": None, "created_at": _t(action["start_time"]),
                      "updated_at": _t(action["updated_at"]), "deleted": 0}
            action_id = conn.execute(sa.insert(A), values).inserted_primary_key[0]
            if action["request_id"] == create["request_id"]:
                for event in create["events"]:
                    conn.execute(sa.insert(models.INSTANCE_ACTIONS_EVENTS), {
                        "event": event["event"], "action_id": action_id, "start_time": _t(event["start_time"]),
                        "finish_time": _t(event["finish_time"]), "result": event["result"],
                        "traceback": event["traceback"], "host": event["host"], "details": event["details"],
                        "created_at": _t(event["start_time"]), "deleted": 0})
    return engine


def _headers(exchange):
    return {"X-Auth-Token": exchange["request_headers"]["X-Auth-Token"],
            "OpenStack-API-Version": exchange["request_headers"]["OpenStack-API-Version"]}


@pytest.mark.parametrize("step", [
    "actions list @2.1", "actions list @2.58 (updated_at, paging)", "actions list limit=2 @2.58",
    "show create action @2.51 (non-admin)", "show create action @2.84 (admin)", "unknown request id -> 404",
])
def test_instance_actions_as_nova(client, engine, db_engine, step):
    exchange = oracle.recorded(step)
    got = client.get(exchange["path"], headers=_headers(exchange))
    assert got.status_code == exchange["status"], got.text
    # (the order is created_at then id, newest first, on every engine: on MariaDB, whose timestamps
    # keep whole seconds, ties in created_at are ordered by id as Nova orders them)
    assert (oracle.to_the_second(got.json, db_engine)
            == oracle.to_the_second(oracle.as_ours(exchange["body"], client.host), db_engine))


def test_a_deleted_servers_actions_from_2_21(client, engine, db_engine):
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, oracle.SERVER_A)
    demo = {"X-Auth-Token": "demo:demo"}
    got = client.get(BASE, headers=dict(demo, **{"OpenStack-API-Version": "compute 2.20"}))
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"Instance {oracle.SERVER_A} could not be found.")
    got = client.get(BASE, headers=dict(demo, **{"OpenStack-API-Version": "compute 2.21"}))
    recorded = oracle.recorded("actions list @2.1")["body"]["instanceActions"]
    assert got.status_code == 200
    assert oracle.to_the_second(got.json["instanceActions"], db_engine) == oracle.to_the_second(recorded, db_engine)


def test_paging_and_its_refusals(client, engine):
    demo = {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.58"}
    first = client.get(f"{BASE}?limit=2", headers=demo).json
    marker = first["instanceActions"][-1]["request_id"]
    second = client.get(f"{BASE}?limit=2&marker={marker}", headers=demo).json
    assert [a["action"] for a in second["instanceActions"]] == ["unlock", "lock"]
    got = client.get(f"{BASE}?marker=req-nope", headers=demo)
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, "Marker None could not be found.")
    got = client.get(f"{BASE}?foo=1", headers=demo)
    assert got.status_code == 400
    got = client.get(f"{BASE}?changes-before=2026-01-01T00:00:00Z",
                     headers=dict(demo, **{"OpenStack-API-Version": "compute 2.65"}))
    assert got.status_code == 400
    got = client.get(f"{BASE}?changes-since=2026-12-01T09:55:27Z",
                     headers=dict(demo, **{"OpenStack-API-Version": "compute 2.66"}))
    assert [a["action"] for a in got.json["instanceActions"]] == ["unlock", "lock", "unlock"]
    got = client.get(f"{BASE}?changes-since=2026-12-02T00:00:00Z&changes-before=2026-12-01T00:00:00Z",
                     headers=dict(demo, **{"OpenStack-API-Version": "compute 2.66"}))
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, "The value of changes-since must be less than or equal to changes-before.")


def test_events_before_2_51_are_for_admins(client, engine):
    request_id = oracle.DEMO.request_id
    got = client.get(f"{BASE}/{request_id}", headers={"X-Auth-Token": "demo:demo",
                                                       "OpenStack-API-Version": "compute 2.50"})
    assert "events" not in got.json["instanceAction"]
    got = client.get(f"{BASE}/{request_id}", headers={"X-Auth-Token": "admin:admin",
                                                       "OpenStack-API-Version": "compute 2.50"})
    assert list(got.json["instanceAction"]["events"][0]) == ["event", "start_time", "finish_time", "result",
                                                              "traceback"]


def test_lock_and_unlock_events_are_the_apis_on_its_host(client, engine, conf):
    """Nova's API records api_lock / api_unlock itself, on its own host ([DEFAULT] host): the events show
    that host (admins, 2.62+) and its hostId (everyone, 2.62+), as the servers oracle answers."""
    admin = {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": "compute 2.62"}
    demo = {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.62"}
    for action in ("lock", "unlock"):
        got = client.post(f"/v2.1/servers/{oracle.SERVER_A}/action", headers=admin, json_body={action: None})
        assert got.status_code == 202, got.text
        request_id = got.header("x-openstack-request-id")
        (event,) = client.get(f"{BASE}/{request_id}", headers=admin).json["instanceAction"]["events"]
        assert (event["event"], event["host"]) == (f"api_{action}", conf.host)
        assert event["hostId"]
        (event,) = client.get(f"{BASE}/{request_id}", headers=demo).json["instanceAction"]["events"]
        assert "host" not in event and event["hostId"]


def test_actions_of_the_same_instant_are_ordered_by_id_newest_first_on_every_engine(client, engine):
    """Ties in created_at (whole seconds on MariaDB; any engine when two requests share a timestamp) are
    ordered as Nova orders them, by id, newest first, and the pages after a marker follow that order."""
    A = models.INSTANCE_ACTIONS
    at = dt.datetime(2026, 12, 1, 10, 0, 0)
    with db_api.transaction(engine) as conn:
        for n in range(4):
            conn.execute(sa.insert(A), {"action": "reboot", "instance_uuid": oracle.SERVER_A,
                                        "request_id": f"req-tie-{n}", "user_id": "demo", "project_id": "demo",
                                        "start_time": at, "created_at": at, "updated_at": at, "deleted": 0})
    demo = {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.58"}
    listed = [a["request_id"] for a in client.get(BASE, headers=demo).json["instanceActions"]][:4]
    assert listed == ["req-tie-3", "req-tie-2", "req-tie-1", "req-tie-0"]
    paged = []
    marker = ""
    for _ in range(4):
        page = client.get(f"{BASE}?limit=1{marker}", headers=demo).json["instanceActions"]
        paged += [a["request_id"] for a in page]
        marker = f"&marker={page[-1]['request_id']}"
    assert paged == listed
