"""The controller answers console requests from the launcher pod's guest-console-log container, on every
database (the answer's compare-and-swap is on a timestamp the engine stores)."""

from __future__ import annotations

import uuid as uuidlib

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import console
from openkeel_compute.compute.instances import store, updates
from openkeel_compute.db import api as db_api
from openkeel_compute.emulator import Fault
from openkeel_compute.model import states
from tests.controller.helpers import (
    IMAGE,
    OWNER,
    action,
    active,
    boot,
    every_engine_conf,  # noqa: F401 - the fixture conf, on every database
    until,
)


def _ask(engine, uuid: str, length: int | None) -> console.Request:
    """What the API writes: the request and the outbox row that wakes the controller."""
    with db_api.transaction(engine) as conn:
        request = console.request(conn, uuid, length)
        updates.outbox(conn, uuid, "console-output", OWNER)
    return request


def _answer(loop, engine, request: console.Request) -> console.Answer | None:
    loop.servers.process_outbox()
    with db_api.reader(engine) as conn:
        return console.answered(conn, request)


def test_a_running_server_answers_its_boot_log(loop, db):
    uuid = boot(db)
    until(loop, db, uuid, active)
    whole = _answer(loop, db, _ask(db, uuid, None))
    assert whole is not None and whole.error is None
    lines = whole.output.split("\n")
    assert len(lines) > 40 and "Linux version" in lines[0]
    assert lines[-2] == "web-1 login: \r" and lines[-1] == ""  # the hostname Nova gave "web 1"
    ten = _answer(loop, db, _ask(db, uuid, 10))
    assert ten.length == 10 and ten.output.split("\n") == lines[-10:]
    assert _answer(loop, db, _ask(db, uuid, -1)).output.split("\n") == lines[1:]
    assert _answer(loop, db, _ask(db, uuid, 0)).output == ""


def test_a_stopped_server_has_no_log_and_a_new_start_a_new_one(loop, db, apiserver):
    uuid = boot(db)
    until(loop, db, uuid, active)
    action(db, uuid, "stop", "stop")
    until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED)
    answer = _answer(loop, db, _ask(db, uuid, None))
    assert (answer.output, answer.error) == ("", None)
    action(db, uuid, "start", "start")
    until(loop, db, uuid, active)
    assert _answer(loop, db, _ask(db, uuid, None)).output.count("Linux version") == 1


def test_a_flavor_without_serial_console_has_no_console(loop, db):
    flavorid = f"f-{uuidlib.uuid4().hex[:8]}"
    with db_api.transaction(db) as conn:
        catalog.create(conn, name=flavorid, memory_mb=512, vcpus=1, root_gb=1, flavorid=flavorid)
        flavor = catalog.get(conn, flavorid)
        catalog.set_extra_specs(conn, flavor, {"hw:serial_port_count": "0"})
        flavor = catalog.get(conn, flavorid)
        row = store.create(conn, actor=OWNER, flavor=flavor, extra_specs={"hw:serial_port_count": "0"},
                           display_name="quiet", image_ref=IMAGE,
                           system_metadata={"image_min_disk": "1", "image_disk_format": "qcow2"})
        updates.outbox(conn, row["uuid"], "create", OWNER)
    until(loop, db, row["uuid"], active)
    answer = _answer(loop, db, _ask(db, row["uuid"], 10))
    assert (answer.output, answer.error) == (None, console.NOT_AVAILABLE)


def test_a_cluster_failure_is_an_answer_not_a_wait(loop, db, apiserver):
    uuid = boot(db)
    until(loop, db, uuid, active)
    apiserver.inject(Fault(503, method="GET", plural="pods", times=100))
    answer = _answer(loop, db, _ask(db, uuid, 10))
    assert answer.output is None and answer.error.startswith("cluster: ")
    apiserver.clear_faults()


def test_a_console_request_does_not_wait_behind_a_failing_row(loop, db, apiserver):
    uuid = boot(db)
    until(loop, db, uuid, active)
    apiserver.inject(Fault(500, method="PUT", plural="virtualmachines", times=100))
    action(db, uuid, "stop", "stop")  # refused by the cluster: stays pending
    answer = _answer(loop, db, _ask(db, uuid, 3))
    assert answer is not None and answer.output.endswith("login: \r\n")
    apiserver.clear_faults()
