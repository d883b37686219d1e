"""The servers generation: added by migration 0006, raised once by each committed write of the server
tables, and never a deadlock between the controller's batch writes and API actions."""

from __future__ import annotations

import random
import threading
import time

import pytest
import sqlalchemy as sa

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.compute.instances import cas
from openkeel_compute.db import api as db_api
from openkeel_compute.db import generations, migration, models
from tests.conftest import make_conf, user
from tests.databases import ENGINES, throwaway_database
from tests.db.helpers import running_servers
from tests.wsgi_client import Client


def _servers_generation(engine) -> int | None:
    with db_api.reader(engine) as conn:
        found = generations.current(conn, ("servers",))
    return found[0] if found else None


@pytest.mark.parametrize("backend", ENGINES)
def test_migration_0006_adds_and_removes_the_servers_counter(backend, tmp_path):
    with throwaway_database(backend, tmp_path) as url:
        engine = db_api.make_engine(url)
        try:
            migration.sync(engine, "0005")
            assert _servers_generation(engine) is None
            migration.sync(engine, "0006")
            assert _servers_generation(engine) == 0
            migration.downgrade(engine, "0005")
            assert _servers_generation(engine) is None
            with engine.connect() as conn:
                assert conn.execute(sa.select(models.GENERATIONS.c.name)).scalars().all() == ["flavors"]
            migration.sync(engine)
            assert _servers_generation(engine) == 0
        finally:
            engine.dispose()


@pytest.mark.parametrize("statement", [
    "INSERT INTO instances (uuid) VALUES ('x')",
    "insert into instance_metadata (key) values ('k')",
    'UPDATE "instances" SET display_name = 1',
    "UPDATE `instances` SET display_name = 1",
    "  DELETE FROM tags WHERE resource_id = 'x'",
    "INSERT IGNORE INTO instance_system_metadata (key) VALUES ('k')",
    "UPDATE instance_faults SET deleted = id",
])
def test_writes_of_the_server_tables_are_seen_whatever_their_spelling(statement):
    assert generations.written_generation(statement) == "servers"


@pytest.mark.parametrize("statement", [
    "SELECT * FROM instances", "UPDATE generations SET value = value + 1 WHERE name = 'servers'",
    "INSERT INTO instance_actions (action) VALUES ('x')", "DELETE FROM outbox", "UPDATE flavors SET disabled = 1",
    "INSERT INTO instances_archive (id) VALUES (1)",
])
def test_other_statements_raise_nothing(statement):
    assert generations.written_generation(statement) is None


SERVERS = 100


def _controller_batch_against_api_actions(backend, tmp_path, *, raise_mid_transaction: bool = False):
    """A controller-style transaction writes every server row, again and again, while API actions change
    single servers for a few seconds. (errors, committed transactions, counter before, counter after).

    ``raise_mid_transaction``: the counter is also raised right after each write of a server table, as a
    database trigger would."""
    policies.reset()
    with throwaway_database(backend, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        if raise_mid_transaction:
            @sa.event.listens_for(engine, "after_cursor_execute")
            def _like_a_trigger(conn, _cursor, statement, *_):
                if generations.written_generation(statement):
                    conn.exec_driver_sql(generations.raise_statement("servers"))
        uuids = running_servers(engine, SERVERS)
        client = Client(deploy(conf))
        start = _servers_generation(engine)
        committed = [0]
        count_lock = threading.Lock()
        errors: list[str] = []
        stop = threading.Event()

        def done():
            with count_lock:
                committed[0] += 1

        def controller():
            rounds = 0
            while not stop.is_set() or rounds < 3:
                try:
                    with db_api.transaction(engine) as conn:
                        for n, uuid in enumerate(uuids):
                            cas.save_state(conn, uuid, progress=(rounds + n) % 100, power_state=1)
                    done()
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    errors.append(f"controller: {exc!r}")
                rounds += 1

        def api(seed):
            rng = random.Random(seed)
            headers = user("p", name="u", version="2.26")
            while not stop.is_set():
                uuid = rng.choice(uuids)
                kind = rng.randrange(3)
                if kind == 0:
                    got = client.put(f"/v2.1/servers/{uuid}", headers=headers,
                                     json_body={"server": {"name": f"n{rng.randrange(1000)}"}})
                elif kind == 1:
                    got = client.post(f"/v2.1/servers/{uuid}/metadata", headers=headers,
                                      json_body={"metadata": {"k": str(rng.randrange(1000))}})
                else:
                    # a new tag each time (a tag already there is no write)
                    got = client.put(f"/v2.1/servers/{uuid}/tags/t{seed}-{rng.randrange(10 ** 9)}",
                                     headers=headers)
                if got.status_code in (200, 201):
                    done()
                else:
                    errors.append(f"api: {got.status_code} {got.text[:300]}")

        threads = [threading.Thread(target=controller)] + [threading.Thread(target=api, args=(i,))
                                                           for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(6)
        stop.set()
        for t in threads:
            t.join(120)
        end = _servers_generation(engine)
        db_api.dispose_all()
        policies.reset()
        return errors, committed[0], start, end


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_controller_batch_and_api_actions_on_the_same_servers_never_deadlock(backend, tmp_path):
    """The counter's row lock is taken right before COMMIT: no deadlock, no lock wait timeout, no error;
    and the counter moved exactly once per committed transaction."""
    errors, committed, start, end = _controller_batch_against_api_actions(backend, tmp_path)
    assert not errors, errors[:5]
    assert end == start + committed
    assert committed > 20


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_the_same_load_deadlocks_when_the_counter_is_raised_mid_transaction(backend, tmp_path, caplog):
    """What the test above guards against: the counter raised as a trigger would, from the middle of a
    transaction, makes the same load fail with deadlocks (the API's 500s log them)."""
    errors, *_ = _controller_batch_against_api_actions(backend, tmp_path, raise_mid_transaction=True)
    assert errors
    assert "deadlock" in (caplog.text + "".join(errors)).lower()
