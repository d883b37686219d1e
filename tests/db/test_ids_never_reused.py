"""Internal integer ids are never handed out twice (migration 0011).

A server keeps a frozen copy of its flavor naming the flavor's internal id, and the API shows the ids of
key pairs, migrations and (through the instance name) servers. PostgreSQL and MariaDB never reuse a
sequence's values; SQLite's INTEGER PRIMARY KEY without AUTOINCREMENT hands out max(id) + 1, so deleting
the row with the highest id gave its id to the next row."""

from __future__ import annotations

import json
import uuid as uuidlib

import pytest
import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.databases import ENGINES, throwaway_database

KEPT = ("flavors", "instances", "key_pairs", "migrations", "instance_actions", "instance_actions_events", "outbox")


def _values(table: str, n: int) -> dict:
    """The fewest columns a row of ``table`` needs."""
    return {
        "flavors": {"flavorid": f"f{n}", "name": f"m1.f{n}", "memory_mb": 512, "vcpus": 1, "root_gb": 1},
        "instances": {"uuid": str(uuidlib.uuid4())},
        "key_pairs": {"name": f"k{n}", "user_id": "demo"},
        "outbox": {"kind": "flavor", "object_id": f"f{n}", "operation": "upsert"},
    }.get(table, {})


def _insert(conn, table: str, n: int) -> int:
    return conn.execute(models.metadata.tables[table].insert().values(**_values(table, n))).inserted_primary_key[0]


def _delete(conn, table: str, row_id: int) -> None:
    found = models.metadata.tables[table]
    conn.execute(found.delete().where(found.c.id == row_id))


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    with throwaway_database(request.param, tmp_path) as url:
        engine = db_api.make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.mark.parametrize("table", KEPT)
def test_the_id_of_a_deleted_row_is_never_given_again(engine, table):
    migration.sync(engine)
    with engine.begin() as conn:
        _insert(conn, table, 1)
        highest = _insert(conn, table, 2)
        _delete(conn, table, highest)
    with engine.begin() as conn:
        assert _insert(conn, table, 3) > highest


def _sqlite(tmp_path):
    return db_api.make_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")


def test_0011_on_an_existing_sqlite_database_keeps_the_rows_and_moves_past_the_old_ids(tmp_path):
    engine = _sqlite(tmp_path)
    migration.sync(engine, "0010")
    server = str(uuidlib.uuid4())
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO flavors (id, flavorid, name, memory_mb, vcpus, root_gb, ephemeral_gb, swap, rxtx_factor,"
            " disabled, is_public, created_at) VALUES (3, 'small', 'm1.small', 512, 1, 1, 0, 0, 1.0, 0, 0,"
            " '2026-01-01 00:00:00')")
        conn.exec_driver_sql("INSERT INTO flavor_extra_specs (flavor_id, key, value, created_at)"
                             " VALUES (3, 'hw:cpu_policy', 'dedicated', '2026-01-01 00:00:00')")
        conn.exec_driver_sql("INSERT INTO flavor_projects (flavor_id, project_id, created_at)"
                             " VALUES (3, 'demo-project', '2026-01-01 00:00:00')")
        # a server still on flavor 7 (deleted), resized once from flavor 9 (deleted too), its frozen copy
        # naming flavor 12 as the old one
        frozen = json.dumps({"cur": {"nova_object.data": {"id": 7}}, "old": {"nova_object.data": {"id": 12}},
                             "new": None})
        conn.execute(sa.text("INSERT INTO instances (id, uuid, instance_type_id, locked, created_at, deleted, flavor)"
                             " VALUES (5, :uuid, 7, 0, '2026-01-01 00:00:00', 0, :flavor)"),
                     {"uuid": server, "flavor": frozen})
        conn.exec_driver_sql("INSERT INTO instance_metadata (instance_uuid, key, value, created_at, deleted)"
                             f" VALUES ('{server}', 'role', 'web', '2026-01-01 00:00:00', 0)")
        conn.exec_driver_sql("INSERT INTO migrations (id, instance_uuid, old_instance_type_id, new_instance_type_id,"
                             f" created_at, deleted) VALUES (4, '{server}', 9, 7, '2026-01-01 00:00:00', 0)")
        conn.exec_driver_sql("INSERT INTO instance_actions (id, instance_uuid, action, created_at, deleted)"
                             f" VALUES (6, '{server}', 'resize', '2026-01-01 00:00:00', 0)")
        conn.exec_driver_sql("INSERT INTO instance_actions_events (id, action_id, event, created_at, deleted)"
                             " VALUES (8, 6, 'compute_resize', '2026-01-01 00:00:00', 0)")
        conn.exec_driver_sql("INSERT INTO key_pairs (id, name, user_id, type, created_at)"
                             " VALUES (2, 'k', 'demo', 'ssh', '2026-01-01 00:00:00')")
    before = {t: _dump(engine, t) for t in (*KEPT, "flavor_extra_specs", "flavor_projects", "instance_metadata")}
    generation = _generation(engine)
    migration.sync(engine)
    after = {t: _dump(engine, t) for t in before}
    assert after == before
    with engine.begin() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1  # back on for the pool's connection
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
        flavor = _insert(conn, "flavors", 10)
        assert flavor > 12  # past the ids the servers' flavor copies and the migrations still name
        assert _insert(conn, "instances", 10) > 5
        assert _insert(conn, "key_pairs", 10) > 2
        assert _insert(conn, "migrations", 10) > 4
        assert _insert(conn, "instance_actions", 10) > 6
        assert _insert(conn, "instance_actions_events", 10) > 8
    assert _generation(engine) > generation  # the flavors' triggers are back
    # the foreign keys still hold: a flavor's delete takes its extra specs and projects
    with engine.begin() as conn:
        _delete(conn, "flavors", 3)
        assert conn.exec_driver_sql("SELECT count(*) FROM flavor_extra_specs").scalar() == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM flavor_projects").scalar() == 0
    migration.downgrade(engine, "0010")
    migration.sync(engine)
    assert migration.current(engine) == migration.head()
    engine.dispose()


def _dump(engine, table):
    with engine.connect() as conn:
        return conn.exec_driver_sql(f"SELECT * FROM {table} ORDER BY 1").all()


def _generation(engine):
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT value FROM generations WHERE name = 'flavors'").scalar()
