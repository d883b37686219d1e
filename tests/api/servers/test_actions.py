"""POST /servers/{id}/action: the power and lock actions, against the answers recorded from Nova
34.0.0; what each leaves for the controller (the console output: test_console_output.py)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.compute.instances import cas, deletion, instance_actions, instance_faults, locks, store
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.model import states
from tests.api.servers import oracle_state as oracle
from tests.conftest import admin

DEMO = {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.96"}
PATH = f"/v2.1/servers/{oracle.SERVER_A}/action"


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


def _row(engine):
    with db_api.reader(engine) as conn:
        return store.get(conn, oracle.SERVER_A)


def _set(engine, **values):
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == oracle.SERVER_A).values(values))


def _outbox(engine):
    with db_api.reader(engine) as conn:
        return [(r.operation, r.payload) for r in conn.execute(
            sa.select(models.OUTBOX.c.operation, models.OUTBOX.c.payload)
            .where(models.OUTBOX.c.kind == "server").order_by(models.OUTBOX.c.id))]


def _actions(engine):
    with db_api.reader(engine) as conn:
        return [a["action"] for a in instance_actions.actions_of(conn, oracle.SERVER_A)]


def _same(got, exchange):
    assert got.status_code == exchange["status"], got.text
    if exchange["body"] is None:
        assert got.content == b""
    else:
        assert got.json == exchange["body"]


def test_stop_then_start_as_nova(client, engine):
    _same(client.post(PATH, headers=DEMO, json_body={"os-start": None}), oracle.recorded("os-start while ACTIVE -> 409"))
    _same(client.post(PATH, headers=DEMO, json_body={"os-stop": None}), oracle.recorded("os-stop"))
    row = _row(engine)
    assert (row["vm_state"], row["task_state"]) == ("active", "powering-off")
    # the controller's part, done here by hand
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, oracle.SERVER_A, expected_task_state="powering-off", vm_state=states.STOPPED,
                       task_state=None, power_state=states.power_state.SHUTDOWN)
    _same(client.post(PATH, headers=DEMO, json_body={"os-stop": None}), oracle.recorded("os-stop while SHUTOFF -> 409"))
    _same(client.post(PATH, headers=DEMO, json_body={"reboot": {"type": "SOFT"}}),
          oracle.recorded("SOFT reboot while SHUTOFF -> 409"))
    _same(client.post(PATH, headers=DEMO, json_body={"os-start": None}), oracle.recorded("os-start"))
    assert _row(engine)["task_state"] == "powering-on"
    ops = _outbox(engine)
    assert [op for op, _ in ops] == ["stop", "start"]
    assert ops[0][1]["task_state"] == "powering-off" and ops[0][1]["request_id"].startswith("req-")
    assert _actions(engine) == ["start", "stop", "create"]


def test_reboots_as_nova(client, engine):
    _same(client.post(PATH, headers=DEMO, json_body={"reboot": {"type": "SOFT"}}), oracle.recorded("SOFT reboot"))
    assert _row(engine)["task_state"] == "rebooting"
    # a hard reboot may interrupt a soft one
    _same(client.post(PATH, headers=DEMO, json_body={"reboot": {"type": "HARD"}}), oracle.recorded("HARD reboot"))
    assert _row(engine)["task_state"] == "rebooting_hard"
    assert [op for op, _ in _outbox(engine)] == ["reboot-soft", "reboot-hard"]
    for step in ("reboot bad type -> 400", "unknown action -> 400", "two actions in one body -> 400"):
        exchange = oracle.recorded(step)
        _same(client.post(PATH, headers=DEMO, json_body=exchange["request_body"]), exchange)


def test_unknown_server(client, engine):
    exchange = oracle.recorded("action on unknown server -> 404")
    _same(client.post(exchange["path"], headers=DEMO, json_body={"os-stop": None}), exchange)
    # a deleted server keeps its cell mapping in Nova: it is "not found", and other actions
    # say "not found" for unknown servers too
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, oracle.SERVER_A)
    for body in ({"os-stop": None}, {"pause": None}):
        got = client.post(PATH, headers=DEMO, json_body=body)
        assert (got.status_code, got.json["itemNotFound"]["message"]) == (
            404, f"Instance {oracle.SERVER_A} could not be found.")
    got = client.post(exchange["path"], headers=DEMO, json_body={"pause": None})
    assert got.json["itemNotFound"]["message"] == f"Instance {oracle.IMAGE} could not be found."


def test_lock_and_unlock_as_nova(client, engine):
    _same(client.post(PATH, headers=DEMO, json_body={"lock": None}), oracle.recorded("lock (owner)"))
    shown = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers={"X-Auth-Token": "demo:demo",
                                                                  "OpenStack-API-Version": "compute 2.9"})
    assert shown.json["server"]["locked"] is True
    _same(client.post(PATH, headers=DEMO, json_body={"os-stop": None}),
          oracle.recorded("os-stop while locked (owner) -> 409"))
    _same(client.post(PATH, headers=DEMO, json_body={"unlock": None}), oracle.recorded("unlock (owner)"))
    exchange = oracle.recorded("admin lock with reason @2.73")
    _same(client.post(PATH, headers=admin("2.73"), json_body=exchange["request_body"]), exchange)
    got = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers={"X-Auth-Token": "demo:demo",
                                                                "OpenStack-API-Version": "compute 2.73"})
    assert got.json["server"]["locked_reason"] == "maintenance"
    _same(client.post(PATH, headers=DEMO, json_body={"unlock": None}), oracle.recorded("owner unlock of admin lock -> 403"))
    _same(client.post(PATH, headers=admin("2.96"), json_body={"unlock": None}), oracle.recorded("admin unlock"))
    assert _actions(engine) == ["unlock", "lock", "unlock", "lock", "create"]
    # before 2.73 a lock takes no reason
    got = client.post(PATH, headers=admin("2.72"), json_body={"lock": {"locked_reason": "x"}})
    assert got.status_code == 202 and _row(engine)["locked_reason"] is None


def test_pause_and_unpause(client, engine):
    assert client.post(PATH, headers=DEMO, json_body={"unpause": None}).json["conflictingRequest"]["message"] == (
        f"Cannot 'unpause' instance {oracle.SERVER_A} while it is in vm_state active")
    assert client.post(PATH, headers=DEMO, json_body={"pause": None}).status_code == 202
    assert _row(engine)["task_state"] == "pausing"
    _set(engine, vm_state=states.PAUSED, task_state=None)
    assert client.post(PATH, headers=DEMO, json_body={"unpause": None}).status_code == 202
    assert [op for op, _ in _outbox(engine)] == ["pause", "unpause"]
    assert _actions(engine) == ["unpause", "pause", "create"]


def test_a_reader_may_not_act(client, engine):
    reader = {"X-Auth-Token": "demo:demo", "X-Roles": "reader"}
    got = client.post(PATH, headers=reader, json_body={"os-stop": None})
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:servers:stop to be performed.")
    assert _outbox(engine) == [] and _row(engine)["task_state"] is None


def test_suspend_is_accepted_then_fails_as_with_a_driver_without_it(client, engine):
    assert client.post(PATH, headers=DEMO, json_body={"resume": None}).json["conflictingRequest"]["message"] == (
        f"Cannot 'resume' instance {oracle.SERVER_A} while it is in vm_state active")
    got = client.post(PATH, headers=DEMO, json_body={"suspend": None})
    assert (got.status_code, got.content) == (202, b"")
    row = _row(engine)
    # back where it was, with no task, as Nova's compute service leaves it
    assert (row["vm_state"], row["task_state"], store.status(row)) == ("active", None, "ACTIVE")
    assert _outbox(engine) == []
    with db_api.reader(engine) as conn:
        faults = instance_faults.latest_faults(conn, [oracle.SERVER_A])
        action = instance_actions.get_action(conn, oracle.SERVER_A, instance_actions.actions_of(conn, oracle.SERVER_A)[0]
                                             ["request_id"])
    assert (faults[oracle.SERVER_A]["code"], faults[oracle.SERVER_A]["message"]) == (500, "NotImplementedError")
    assert action["action"] == "suspend"
    assert [(e["event"], e["result"], e["details"], e["host"]) for e in action["events"]] == [
        ("compute_suspend_instance", "Error", "NotImplementedError", "compute1")]
    # a locked server refuses it before anything is recorded
    with db_api.transaction(engine) as conn:
        locks.lock(conn, oracle.SERVER_A, oracle.ADMIN)
    got = client.post(PATH, headers=DEMO, json_body={"suspend": None})
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (
        409, f"Instance {oracle.SERVER_A} is locked")
