"""Short fixed-seed runs of the reliability suite on SQLite, PostgreSQL and MariaDB (the long runs:
tools/reliability.py). Each asserts what the long runs count: no 5xx, Nova's fault format, one
winner per race, no policy leak."""

from __future__ import annotations

import pytest

from tests.databases import ENGINES, free_port
from tests.reliability import fuzz, policy_matrix, races
from tests.reliability import world as w

# Requests per engine: a database server answers slower than SQLite's file.
FUZZ_REQUESTS = {"sqlite": 700, "postgresql": 350, "mariadb": 350}


def test_fuzzer_finds_no_server_error_and_only_nova_faults(world):
    report = fuzz.run(world.app, seed=20261201, count=FUZZ_REQUESTS[world.engine_name], restock=world.restock)
    print(report.line(world.engine_name))
    assert [(p.describe(), s, b) for p, s, b in report.errors] == []
    assert [(p.describe(), s, b) for p, s, b in report.bad_faults] == []
    # the run reached handlers, not only the routing layer's refusals
    assert report.statuses.get(200, 0) > 0 and report.statuses.get(400, 0) > 0


def test_fuzzer_over_every_server_route_and_action(world):
    """Each server operation (69: the collection, one server, every action, every sub-resource) four
    times, most bodies valid so that they reach the handlers' writes, on the World's servers and
    hostile ids, restocked often (deletes, locks and state changes undone)."""
    ops = fuzz.server_operations()
    report = fuzz.run(world.app, seed=20261205, count=len(ops) * 4, restock=world.restock, restock_every=40,
                      ops=ops, spoil=0.3)
    print(report.line(world.engine_name + ", servers"))
    assert [(p.describe(), s, b) for p, s, b in report.errors] == []
    assert [(p.describe(), s, b) for p, s, b in report.bad_faults] == []
    assert report.statuses.get(202, 0) > 0 and report.statuses.get(409, 0) > 0  # actions ran and collided


def test_fuzzer_over_http_to_two_workers_finds_no_server_error():
    """The supervisor mode of ``openkeel-compute serve`` ([wsgi] workers = 2), over real HTTP."""
    with w.world_on("postgresql") as world, w.served(world, free_port(), workers=2) as server:
        report = fuzz.run(world.app, seed=20261202, count=300, restock=world.restock, server=server)
    print(report.line("postgresql, 2 workers over HTTP"))
    assert [(p.describe(), s, b) for p, s, b in report.errors] == []
    assert [(p.describe(), s, b) for p, s, b in report.bad_faults] == []
    assert report.statuses.get(200, 0) > 0 and report.statuses.get(400, 0) > 0
    # the HTTP server's own refusals are only ever of requests that are not valid HTTP for it
    assert report.http_refusals < report.requests // 5


def test_every_route_is_fuzzed():
    probed = {(p.method, p.path) for p in fuzz.probes(fuzz.random.Random(1), len(fuzz.operations()) * 2)}
    templates = {(method, template) for template, method, _, _ in fuzz.operations()}
    assert len(templates) == len({(m, t) for t, m, _, _ in fuzz.operations()})
    assert len(probed) >= len(templates) // 2  # every operation twice, under prefixes and ids drawn at random


def test_parallel_copies_of_every_write_have_one_winner(world):
    outcomes = races.run(world, copies=6)
    for outcome in outcomes:
        print(world.engine_name, outcome.line())
    assert [o.line() for o in outcomes if not o.ok] == []


def test_no_persona_gets_what_its_roles_do_not_allow(sqlite_world):
    # Policy decisions are made in Python, the same on every engine: one engine suffices here.
    report = policy_matrix.run(sqlite_world, versions=("2.1", "latest"))
    print(report.line("sqlite"))
    assert report.leaks == []
    # the matrix granted something to the owner and the administrator, so it can tell a leak
    assert report.granted["admin"] > report.granted["owner-member"] > report.granted["other-member"] > 0


@pytest.mark.parametrize("persona", ["other-member", "owner-reader", "no-token"])
def test_the_matrix_sees_a_leak(sqlite_world, persona):
    """A leak detector that cannot fire proves nothing: a 2xx where a refusal is due is reported."""
    ok = policy_matrix.w.Answer(200, [("Content-Type", "application/json")], b"{}")
    path = f"/servers/{policy_matrix.w.SERVER}/action"
    assert policy_matrix._leak(persona, "/servers/{server_id}/action", "POST", "os-resetState", path, ok)


@pytest.mark.parametrize("engine", ["postgresql", "mariadb"])
def test_a_database_restart_under_server_writes_loses_nothing(engine):
    """Boots, metadata writes and stops while the database (a server of the test's own) stops and
    starts again: every acknowledged boot is there afterwards, and no request sent after the restart
    fails (tools/reliability.py --areas restarts runs it longer, with flavor writes too)."""
    from tests.reliability import restarts

    report = restarts.run(engine, free_port(), writers=2, before=1.5, outage=1.5, after=3.0, writes="servers")
    print(report.line(engine + ", servers"))
    assert report.acknowledged > 0 and report.lost == 0
    assert report.errors_after_recovery == 0 and report.recovery_seconds is not None


@pytest.mark.parametrize("engine", ENGINES)
def test_a_killed_api_leaves_every_acknowledged_boot_whole_and_nothing_half_written(engine):
    """SIGKILL to ``openkeel-compute serve`` (the supervisor and its two workers at once) under boots
    over HTTP, on each engine: every boot it acknowledged (202) is there, and every server in the
    database has what one boot writes in its one transaction (the "create" action and the
    controller's outbox row, from which the controller makes its Placement claim: a server is there
    with its claim to come, or not at all), and no row of any table names a server that is not there."""
    import json
    import os
    import signal
    import threading
    import time

    import sqlalchemy as sa

    from openkeel_compute.db import api as db_api
    from openkeel_compute.db.models import INSTANCE_ACTIONS, INSTANCES, OUTBOX

    acknowledged: list[str] = []
    lock, stop = threading.Lock(), threading.Event()
    with w.world_on(engine) as world:
        w.unlimited_quota(world)
        with w.served(world, free_port(), workers=2) as server:
            def boots(writer: int) -> None:
                n = 0
                while not stop.is_set():
                    body = {"server": {"name": f"kill-{writer}-{n}", "imageRef": w.IMAGE, "flavorRef": w.FLAVOR,
                                       "networks": "none"}}
                    n += 1
                    try:
                        got = fuzz.http_call(server, "POST", "/v2.1/servers", body=json.dumps(body).encode(),
                                             headers={"X-Auth-Token": w.OWNER, "Content-Type": "application/json",
                                                      "OpenStack-API-Version": "compute 2.37"}, timeout=10)
                    except OSError:
                        return  # the server is gone
                    if got.status == 202:
                        with lock:
                            acknowledged.append(json.loads(got.body)["server"]["id"])

            threads = [threading.Thread(target=boots, args=(i,), daemon=True) for i in range(3)]
            for thread in threads:
                thread.start()
            time.sleep(2.0)
            os.killpg(world.serve_process.pid, signal.SIGKILL)
            stop.set()
            for thread in threads:
                thread.join(30)
        with db_api.reader(world.engine) as conn:
            stored = {r[0] for r in conn.execute(sa.select(INSTANCES.c.uuid).where(
                INSTANCES.c.display_name.like("kill-%")))}
            created = {r[0] for r in conn.execute(sa.select(INSTANCE_ACTIONS.c.instance_uuid).where(
                INSTANCE_ACTIONS.c.action == "create"))}
            asked = {r[0] for r in conn.execute(sa.select(OUTBOX.c.object_id).where(
                OUTBOX.c.kind == "server", OUTBOX.c.operation == "create"))}
            known = {r[0] for r in conn.execute(sa.select(INSTANCES.c.uuid))}
            meta = sa.MetaData()
            meta.reflect(conn)
            strays = {}
            for table in meta.sorted_tables:
                if "instance_uuid" in table.c:
                    left = {r[0] for r in conn.execute(sa.select(table.c.instance_uuid))} - known - {None}
                    if left:
                        strays[table.name] = sorted(left)
            left = {r[0] for r in conn.execute(sa.select(OUTBOX.c.object_id).where(OUTBOX.c.kind == "server"))}
            if left - known:
                strays["outbox"] = sorted(left - known)
    print(f"killed api ({engine}): acknowledged={len(acknowledged)} stored={len(stored)}")
    assert acknowledged and set(acknowledged) <= stored
    assert stored <= created and stored <= asked
    assert strays == {}
