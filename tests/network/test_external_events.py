"""POST /os-server-external-events as Nova 34.0.0 answers it: per-event codes (200, 400, 404, 422),
overall 200/207, names by microversion, the service-or-admin policy; accepted events are kept for
the controller. Runs on every database engine."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import external_events
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin, make_conf, user
from tests.databases import ENGINES, throwaway_database

UNKNOWN = "11111111-2222-3333-4444-555555555555"
URL = "/v2.1/os-server-external-events"


def _server(engine, host: str | None = "node-1", deleted: bool = False) -> str:
    ident = str(uuid.uuid4())
    now = models.utcnow()
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.INSTANCES), {
            "uuid": ident, "project_id": "demo", "user_id": "demo", "display_name": "s", "hostname": "s",
            "host": host, "node": host, "vm_state": "active", "power_state": 1, "memory_mb": 64, "vcpus": 1,
            "root_gb": 1, "ephemeral_gb": 0, "instance_type_id": 1, "created_at": now, "launch_index": 0,
            "deleted": 1 if deleted else 0})
    return ident


@pytest.fixture(scope="module", params=ENGINES)
def database_url(request, tmp_path_factory):
    with throwaway_database(request.param, tmp_path_factory.mktemp("db")) as url:
        yield url


@pytest.fixture
def conf(tmp_path, database_url):
    from openkeel_compute import policies

    policies.reset()
    conf = make_conf(tmp_path, database={"connection": database_url})
    yield conf
    policies.reset()


@pytest.fixture
def engine(app, conf):
    return db_api.get_engine(conf)


def _post(client, events, version="2.104", headers=None):
    return client.post(URL, headers=headers or admin(version), json_body={"events": events})


def test_accepted_events_are_kept_for_the_controller(client, engine):
    server = _server(engine)
    events = [{"name": "network-vif-plugged", "server_uuid": server, "tag": "port-1"},
              {"name": "network-changed", "server_uuid": server, "status": "failed"}]
    resp = _post(client, events)
    assert resp.status_code == 200
    assert resp.json == {"events": [
        {"name": "network-vif-plugged", "server_uuid": server, "tag": "port-1", "status": "completed", "code": 200},
        {"name": "network-changed", "server_uuid": server, "status": "completed", "code": 200}]}
    with db_api.reader(engine) as conn:
        kept = external_events.pending(conn, server)
    assert [(e["name"], e["status"], e["tag"], e["host"]) for e in kept] == [
        ("network-vif-plugged", "completed", "port-1", "node-1"), ("network-changed", "failed", None, "node-1")]
    with db_api.transaction(engine) as conn:
        external_events.handled(conn, [kept[0]["id"]])
    with db_api.reader(engine) as conn:
        assert [e["name"] for e in external_events.pending(conn, server)] == ["network-changed"]


def test_per_event_codes_and_207(client, engine):
    on_host, no_host, gone = _server(engine), _server(engine, host=None), _server(engine, deleted=True)
    resp = _post(client, [
        {"name": "network-vif-plugged", "server_uuid": on_host},
        {"name": "network-vif-plugged", "server_uuid": UNKNOWN},
        {"name": "network-vif-plugged", "server_uuid": gone},
        {"name": "network-vif-plugged", "server_uuid": no_host},
        {"name": "volume-extended", "server_uuid": on_host},
        {"name": "volume-extended", "server_uuid": on_host, "tag": "vol-1"},
        {"name": "power-update", "server_uuid": on_host, "tag": "POWER_OFF"},
    ])
    assert resp.status_code == 207
    assert [(e["status"], e["code"]) for e in resp.json["events"]] == [
        ("completed", 200), ("failed", 404), ("failed", 404), ("failed", 422), ("failed", 400), ("completed", 200),
        ("completed", 200)]
    with db_api.reader(engine) as conn:
        assert [e["name"] for e in external_events.pending(conn, on_host)] == [
            "network-vif-plugged", "volume-extended", "power-update"]


def test_none_accepted_is_still_207(client, engine):
    """As the Nova 34.0.0 servers oracle answers: no overall 404 any more, each event says why."""
    no_host = _server(engine, host=None)
    resp = _post(client, [{"name": "network-vif-plugged", "server_uuid": UNKNOWN},
                          {"name": "network-changed", "server_uuid": no_host}])
    assert (resp.status_code, resp.json) == (207, {"events": [
        {"name": "network-vif-plugged", "server_uuid": UNKNOWN, "status": "failed", "code": 404},
        {"name": "network-changed", "server_uuid": no_host, "status": "failed", "code": 422}]})
    with db_api.reader(engine) as conn:
        assert external_events.pending(conn, no_host) == []


@pytest.mark.parametrize(("name", "first"), [("volume-extended", "2.51"), ("power-update", "2.76"),
                                             ("accelerator-request-bound", "2.82"), ("volume-reimaged", "2.93")])
def test_names_by_microversion(client, engine, name, first):
    server = _server(engine)
    major, minor = first.split(".")
    before = f"{major}.{int(minor) - 1}"
    assert _post(client, [{"name": name, "server_uuid": server, "tag": "t"}], version=before).status_code == 400
    assert _post(client, [{"name": name, "server_uuid": server, "tag": "t"}], version=first).status_code == 200


def test_schema_messages_as_novas(client, engine):
    server = _server(engine)
    resp = _post(client, [{"name": "power-update", "server_uuid": server, "tag": "POWER_OFF"}], version="2.75")
    assert resp.json == {"badRequest": {"code": 400, "message": (
        "Invalid input for field/attribute name. Value: power-update. 'power-update' is not one of "
        "['network-changed', 'network-vif-plugged', 'network-vif-unplugged', 'network-vif-deleted', "
        "'volume-extended']")}}
    assert _post(client, []).json == {"badRequest": {"code": 400, "message": (
        "Invalid input for field/attribute events. Value: []. [] should be non-empty")}}


@pytest.mark.parametrize("body", [
    [], [{"name": "network-changed"}], [{"name": "network-changed", "server_uuid": "not-a-uuid"}],
    [{"name": "network-changed", "server_uuid": UNKNOWN, "status": "done"}],
    [{"name": "network-changed", "server_uuid": UNKNOWN, "tag": "x" * 256}],
    [{"name": "network-changed", "server_uuid": UNKNOWN, "extra": 1}],
])
def test_schema(client, body):
    assert _post(client, body).status_code == 400


def test_policy_service_or_admin(client, engine):
    server = _server(engine)
    events = [{"name": "network-changed", "server_uuid": server}]
    resp = _post(client, events, headers=user("demo", version="2.1"))
    assert (resp.status_code, resp.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:os-server-external-events:create to be performed.")
    service = user("service", name="neutron", version="2.1", **{"X-Roles": "service"})
    assert _post(client, events, headers=service).status_code == 200


def test_tags_required_as_novas(client, engine):
    """As the oracle answered: power-update and accelerator-request-bound without a tag are 400 (207 in
    all), volume-reimaged without one is accepted (Cinder always names the volume; an untagged one then
    matches no rebuild's wait)."""
    server = _server(engine)
    resp = _post(client, [{"name": "power-update", "server_uuid": server},
                          {"name": "accelerator-request-bound", "server_uuid": server}])
    assert (resp.status_code, [e["code"] for e in resp.json["events"]]) == (207, [400, 400])
    resp = _post(client, [{"name": "volume-reimaged", "server_uuid": server, "status": "failed"}])
    assert (resp.status_code, resp.json) == (200, {"events": [
        {"name": "volume-reimaged", "server_uuid": server, "status": "completed", "code": 200}]})
    resp = _post(client, [{"name": "volume-reimaged", "server_uuid": server, "tag": "v", "status": "failed"},
                          {"name": "volume-reimaged", "server_uuid": UNKNOWN, "tag": "v"}])
    assert (resp.status_code, [e["code"] for e in resp.json["events"]]) == (207, [200, 404])
    with db_api.reader(engine) as conn:
        kept = [(e["name"], e["tag"], e["status"]) for e in external_events.pending(conn, server)]
    assert kept == [("volume-reimaged", None, "failed"), ("volume-reimaged", "v", "failed")]
