"""PUT and DELETE /servers/{id} against the answers recorded from Nova 34.0.0."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.compute.instances import deletion, instance_actions, locks
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers import oracle_state as oracle
from tests.conftest import admin, user

DEMO = {"X-Auth-Token": "demo:demo"}


@pytest.fixture
def engine(app, conf):
    return db_api.get_engine(conf)


def _legacy(engine):
    oracle.boot(engine, uuid=oracle.SERVER_LEGACY, name="srv-legacy", created="2026-12-01T09:55:10Z",
                updated="2026-12-01T09:55:11Z", launched="2026-12-01T09:55:11.185680", system_metadata=oracle.NO_INTERFACE)


def _headers(exchange):
    return {"X-Auth-Token": exchange["request_headers"]["X-Auth-Token"],
            "OpenStack-API-Version": exchange["request_headers"]["OpenStack-API-Version"]}


@pytest.mark.parametrize("step", ["rename @2.1", "rename + description @2.75 (full server view)"])
def test_update_answers_as_nova(client, engine, db_engine, step):
    _legacy(engine)
    exchange = oracle.recorded(step)
    got = client.put(exchange["path"], headers=_headers(exchange), json_body=exchange["request_body"])
    assert got.status_code == 200, got.text
    expected = oracle.to_the_second(oracle.as_ours(exchange["body"], client.host), db_engine)
    body = oracle.to_the_second(got.json, db_engine)
    # the update moved updated_at; the recording happened within the same second as the boot
    assert body["server"].pop("updated") >= expected["server"].pop("updated")
    assert body == expected
    assert list(body["server"]) == list(expected["server"])


def test_update_at_2_1_hides_the_extended_address_fields(client, engine):
    oracle.boot_server_a(engine)
    got = client.put(f"/v2.1/servers/{oracle.SERVER_A}", headers=DEMO, json_body={"server": {"name": "x"}})
    assert got.json["server"]["addresses"] == {"private": [{"version": 4, "addr": "192.168.1.31"}]}


def test_update_access_ips_description_hostname(client, engine):
    oracle.boot_server_a(engine)
    body = {"server": {"accessIPv4": "10.0.0.1", "accessIPv6": "2001:0db8:0000::0001", "description": "d",
                       "hostname": "new-host", "OS-DCF:diskConfig": "AUTO"}}
    got = client.put(f"/v2.1/servers/{oracle.SERVER_A}", headers=user("demo", version="2.90"), json_body=body)
    assert got.status_code == 200, got.text
    server = got.json["server"]
    assert (server["accessIPv4"], server["accessIPv6"], server["description"], server["OS-EXT-SRV-ATTR:hostname"],
            server["OS-DCF:diskConfig"]) == ("10.0.0.1", "2001:db8::1", "d", "new-host", "AUTO")
    got = client.put(f"/v2.1/servers/{oracle.SERVER_A}", headers=user("demo", version="2.89"),
                     json_body={"server": {"hostname": "x1"}})
    assert got.status_code == 400
    # as the live Nova API words them
    assert got.json["badRequest"]["message"] == (
        "Invalid input for field/attribute server. Value: {'hostname': 'x1'}. Additional properties are not "
        "allowed ('hostname' was unexpected)")
    got = client.put(f"/v2.1/servers/{oracle.SERVER_A}", headers=user("demo", version="2.89"),
                     json_body={"server": {"accessIPv4": "1.2"}})
    assert got.json["badRequest"]["message"] == (
        "Invalid input for field/attribute accessIPv4. Value: 1.2. '1.2' is not a 'ipv4'")


def test_update_of_another_projects_server_is_not_found(client, engine):
    oracle.boot_server_a(engine)
    got = client.put(f"/v2.1/servers/{oracle.SERVER_A}", headers=user("other"), json_body={"server": {"name": "x"}})
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"Instance {oracle.SERVER_A} could not be found.")


def test_delete_starts_the_delete_and_asks_the_controller(client, engine):
    _legacy(engine)
    exchange = oracle.recorded("DELETE @2.1")
    got = client.delete(exchange["path"], headers=_headers(exchange))
    assert (got.status_code, got.content) == (204, b"")
    shown = client.get(exchange["path"], headers=DEMO)
    assert shown.json["server"]["OS-EXT-STS:task_state"] == "deleting"
    with db_api.reader(engine) as conn:
        rows = conn.execute(sa.select(models.OUTBOX.c.kind, models.OUTBOX.c.object_id, models.OUTBOX.c.operation)
                            .where(models.OUTBOX.c.kind == "server")).all()
        actions = [a["action"] for a in instance_actions.actions_of(conn, oracle.SERVER_LEGACY)]
    assert rows == [("server", oracle.SERVER_LEGACY, "delete")]
    assert actions == ["delete", "create"]
    # a repeated delete changes nothing and asks nothing more
    assert client.delete(exchange["path"], headers=DEMO).status_code == 204
    with db_api.reader(engine) as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.OUTBOX)
                            .where(models.OUTBOX.c.kind == "server")).scalar() == 1


def test_delete_of_a_locked_server_is_a_conflict_and_of_a_deleted_one_not_found(client, engine):
    oracle.boot_server_a(engine)
    with db_api.transaction(engine) as conn:
        locks.lock(conn, oracle.SERVER_A, oracle.ADMIN)
    exchange = oracle.recorded("DELETE while locked -> 409")
    got = client.delete(exchange["path"], headers=DEMO)
    assert (got.status_code, got.json) == (409, exchange["body"])
    assert client.delete(exchange["path"], headers=admin()).status_code == 204
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, oracle.SERVER_A)
    again = oracle.recorded("DELETE again -> 404")
    got = client.delete(f"/v2.1/servers/{oracle.SERVER_A}", headers=DEMO)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, again["body"]["itemNotFound"]["message"].replace(oracle.SERVER_B, oracle.SERVER_A))


def test_a_reader_may_show_but_not_update_or_delete(client, engine):
    oracle.boot_server_a(engine)
    reader = {"X-Auth-Token": "demo:demo", "X-Roles": "reader"}
    path = f"/v2.1/servers/{oracle.SERVER_A}"
    assert client.get(path, headers=reader).status_code == 200
    got = client.delete(path, headers=reader)
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:servers:delete to be performed.")
    got = client.put(path, headers=reader, json_body={"server": {"name": "x"}})
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:servers:update to be performed.")
