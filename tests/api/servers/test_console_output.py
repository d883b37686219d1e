"""os-getConsoleOutput, the API's half: checks and faults as Nova 34.0.0 answers them, the request it leaves
for the controller, and what it makes of the controller's answer (the tail, the control characters, the
errors, no answer in time).

The controller's half here is a thread that answers each request through compute/console.py as the
controller does, from the text Nova's fake virt driver prints; the answers compared are the ones Nova
34.0.0's servers API gave for the same requests on that text. tests/controller/test_console_output.py
reads real launcher pods.
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import console
from openkeel_compute.compute.instances import deletion, instance_actions
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers import oracle_state as oracle

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset

DEMO = {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.96"}
PATH = f"/v2.1/servers/{oracle.SERVER_A}/action"
# What Nova's fake virt driver prints as the console of every server.
FAKE_CONSOLE = b"FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"
# Recorded from Nova 34.0.0 (servers API, fake driver): request body -> (status, answer)
NOVA = [
    ({}, 200, {"output": "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"}),
    ({"length": None}, 200, {"output": "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"}),
    ({"length": 3}, 200, {"output": "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"}),
    ({"length": "3"}, 200, {"output": "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"}),
    ({"length": 2}, 200, {"output": "ANOTHER\nLAST LINE"}),
    ({"length": -1}, 200, {"output": "ANOTHER\nLAST LINE"}),
    ({"length": 0}, 200, {"output": ""}),
    ({"length": "99999999999999999999999"}, 200, {"output": "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"}),
    ({"length": 99999999999999999999999}, 200, {"output": "FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE"}),
    ({"length": -2}, 400, {"badRequest": {"code": 400, "message": "Invalid input for field/attribute length. "
                                          "Value: -2. -2 is less than the minimum of -1"}}),
    ({"length": "-2"}, 400, {"badRequest": {"code": 400, "message": "Invalid input for field/attribute length. "
                                            "Value: -2. -2 is less than the minimum of -1"}}),
    ({"length": "abc"}, 400, {"badRequest": {"code": 400, "message": "Invalid input for field/attribute length. "
                                             "Value: abc. 'abc' does not match '^-?[0-9]+$'"}}),
    ({"length": 1.5}, 400, {"badRequest": {"code": 400, "message": "Invalid input for field/attribute length. "
                                           "Value: 1.5. 1.5 is not of type 'integer', 'string', 'null'"}}),
    ({"foo": 1}, 400, {"badRequest": {"code": 400, "message": "Invalid input for field/attribute "
                                      "os-getConsoleOutput. Value: {'foo': 1}. Additional properties are not "
                                      "allowed ('foo' was unexpected)"}}),
    (None, 400, {"badRequest": {"code": 400, "message": "Invalid input for field/attribute os-getConsoleOutput. "
                                "Value: None. None is not of type 'object'"}}),
]


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    conf.set_override("console_output_timeout", 5.0, group="api")
    return engine


class Answering:
    """Answers every pending console request of SERVER_A as the controller does, from ``text``."""

    def __init__(self, engine, text: bytes = FAKE_CONSOLE, error: str | None = None) -> None:
        self.engine, self.text, self.error = engine, text, error
        self.answered: list[int | None] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            with db_api.reader(self.engine) as conn:
                request = console.pending(conn, oracle.SERVER_A)
            if request is None:
                continue
            output = None if self.error else console.as_text(console.tail(self.text, request.length))
            with db_api.transaction(self.engine) as conn:
                if console.answer(conn, request, output=output, error=self.error):
                    self.answered.append(request.length)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(2)


def _set(engine, **values):
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == oracle.SERVER_A).values(values))


def _outbox(engine):
    with db_api.reader(engine) as conn:
        return [r.operation for r in conn.execute(sa.select(models.OUTBOX.c.operation)
                                                  .where(models.OUTBOX.c.kind == "server"))]


@pytest.mark.parametrize(("body", "status", "answer"), NOVA, ids=[repr(b) for b, _s, _a in NOVA])
def test_answers_as_nova_for_the_same_console_text(client, engine, body, status, answer):
    with Answering(engine):
        got = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": body})
    assert (got.status_code, got.json) == (status, answer)


def test_the_request_wakes_the_controller_and_records_no_action(client, engine):
    with Answering(engine) as answering:
        assert client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {"length": 10}}).status_code == 200
    assert answering.answered == [10]
    assert _outbox(engine) == ["console-output"]
    with db_api.reader(engine) as conn:
        assert [a["action"] for a in instance_actions.actions_of(conn, oracle.SERVER_A)] == ["create"]


def test_control_characters_go_as_in_nova_and_other_bytes_are_replaced(client, engine):
    text = "[\x1b[0;32m  OK  \x1b[0m] Started ssh.\r\n\tcaf\u00e9\x07 login: \r\n".encode()
    with Answering(engine, text):
        got = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {}})
    assert got.json == {"output": "[[0;32m  OK  [0m] Started ssh.\n\tcaf\ufffd\ufffd login: \n"}


def test_ten_lines_of_a_log_ending_with_a_newline_are_nine_and_the_empty_end(client, engine):
    text = b"".join(b"line %d\r\n" % i for i in range(30))
    with Answering(engine, text):
        output = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {"length": 10}}).json["output"]
    assert output.split("\n") == [f"line {i}" for i in range(21, 30)] + [""]


def test_needs_a_host_and_ignores_the_lock(client, engine):
    _set(engine, locked=True, locked_by="admin")
    with Answering(engine):
        assert client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {}}).status_code == 200
        _set(engine, host=None)
        got = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {}})
    assert (got.status_code, got.json) == (409, {"conflictingRequest": {
        "code": 409, "message": f"Instance {oracle.SERVER_A} is not ready"}})


def test_not_found_forbidden_and_other_projects(client, engine):
    missing = "00000000-0000-0000-0000-000000000000"
    got = client.post(f"/v2.1/servers/{missing}/action", headers=DEMO, json_body={"os-getConsoleOutput": {}})
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": f"Instance {missing} could not be found."}})
    got = client.post(PATH, headers={"X-Auth-Token": "other:other"}, json_body={"os-getConsoleOutput": {}})
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"Instance {oracle.SERVER_A} could not be found.")
    got = client.post(PATH, headers={"X-Auth-Token": "demo:demo", "X-Roles": "reader"},
                      json_body={"os-getConsoleOutput": {}})
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:os-console-output to be performed.")
    assert _outbox(engine) == []


def test_no_answer_in_time_is_novas_rpc_timeout(client, engine, conf):
    conf.set_override("console_output_timeout", 1.0, group="api")
    got = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {"length": 5}})
    assert (got.status_code, got.json) == (500, {"computeFault": {"code": 500, "message": (
        "Unexpected API Error. Please contact the administrator\n"
        "<class 'oslo_messaging.exceptions.MessagingTimeout'>")}})


def test_a_guest_without_console_log_and_a_failed_read(client, engine):
    with Answering(engine, error=console.NOT_AVAILABLE):
        got = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {}})
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": "Guest does not have a console available."}})
    with Answering(engine, error="cluster: 503 Service Unavailable"):
        got = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {}})
    assert (got.status_code, got.json["computeFault"]["message"]) == (500, (
        "Unexpected API Error. Please contact the administrator\n<class 'oslo_messaging.rpc.client.RemoteError'>"))


def test_a_server_deleted_while_waiting_is_not_found(client, engine):
    def delete_soon():
        threading.Event().wait(0.3)
        with db_api.transaction(engine) as conn:
            deletion.soft_delete(conn, oracle.SERVER_A)

    threading.Thread(target=delete_soon, daemon=True).start()
    got = client.post(PATH, headers=DEMO, json_body={"os-getConsoleOutput": {}})
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"Instance {oracle.SERVER_A} could not be found.")
    with db_api.reader(engine) as conn:
        assert conn.execute(sa.select(models.CONSOLE_LOGS)).all() == []


def test_an_answer_for_a_longer_request_serves_a_shorter_one(engine):
    text = b"".join(b"line %d\n" % i for i in range(30))
    with db_api.transaction(engine) as conn:
        mine = console.request(conn, oracle.SERVER_A, 3)
        theirs = console.request(conn, oracle.SERVER_A, 20)  # a concurrent request replaced mine
    with db_api.transaction(engine) as conn:
        assert not console.answer(conn, mine, output="stale")  # the controller's read of mine lands nowhere
        assert console.answer(conn, theirs, output=console.as_text(console.tail(text, 20)))
    with db_api.reader(engine) as conn:
        got = console.answered(conn, mine)
    assert got is not None and console.covers(got.length, 3)
    assert console.cut(got, 3) == "line 28\nline 29\n"
    assert not console.covers(3, 20) and not console.covers(5, -1) and console.covers(None, -1)
