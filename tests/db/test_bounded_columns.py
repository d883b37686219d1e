"""The bound of every string column holds on SQLite as on PostgreSQL and MariaDB (tests/bounded_columns.py),
and the controller's working state, which can be longer, has a table whose values are unbounded."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from openkeel_compute.compute import working_state
from openkeel_compute.compute.instances import instance_sysmeta, store
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import sysmeta
from tests import bounded_columns
from tests.bounded_columns import ColumnBoundExceeded
from tests.databases import ENGINES, throwaway_database

LONG_NODE = "n" * 253  # a Kubernetes node name may take 253 characters


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    with throwaway_database(request.param, tmp_path) as url:
        engine = sa.create_engine(url)
        migration.sync(engine)
        yield engine
        engine.dispose()
        db_api.dispose_all()


def _server(conn) -> str:
    uuid = "5a0c7a4e-1f0e-4a39-9b51-3f0d6e0f0001"
    conn.execute(sa.insert(models.INSTANCES).values(uuid=uuid, project_id="p", user_id="u", vm_state="active",
                                                    deleted=0))
    return uuid


def test_an_over_long_value_is_refused_on_every_engine(engine):
    """What the guard enforces on SQLite is what PostgreSQL and MariaDB enforce themselves: the guard
    answers first on every engine, and without it the servers refuse the same write."""
    with pytest.raises(ColumnBoundExceeded), engine.begin() as conn:
        uuid = _server(conn)
        instance_sysmeta.set_system_metadata_item(conn, uuid, "k", "x" * 256)
    if engine.dialect.name != "sqlite":
        event.remove(Engine, "before_cursor_execute", bounded_columns._before_cursor_execute)
        try:
            with pytest.raises(sa.exc.DataError) as refused, engine.begin() as conn:
                uuid = _server(conn)
                instance_sysmeta.set_system_metadata_item(conn, uuid, "k", "x" * 256)
            assert not isinstance(refused.value, ColumnBoundExceeded)  # the server's own refusal
        finally:
            bounded_columns.install()
    with engine.begin() as conn:
        uuid = _server(conn)
        instance_sysmeta.set_system_metadata_item(conn, uuid, "k", "x" * 255)  # the bound itself is fine
    with pytest.raises(ColumnBoundExceeded), engine.begin() as conn:
        conn.execute(sa.update(models.INSTANCE_SYSTEM_METADATA).values(value="y" * 300))


def test_the_controllers_working_state_holds_long_values(engine):
    """Several node names of 253 characters, a resize's matchers: stored and read back whole."""
    tried = ",".join([LONG_NODE] * 3)
    before = '{"instancetype": {"matcher": {"name": "' + "m" * 400 + '"}}}'
    with engine.begin() as conn:
        uuid = _server(conn)
        working_state.put(conn, uuid, sysmeta.TRIED_NODES, tried)
        working_state.put(conn, uuid, sysmeta.RESIZE_FROM, before)
        working_state.put(conn, uuid, sysmeta.RESIZE_FROM, before + " ")
    with engine.connect() as conn:
        assert working_state.of(conn, uuid) == {sysmeta.TRIED_NODES: tried, sysmeta.RESIZE_FROM: before + " "}
    with engine.begin() as conn:
        working_state.put(conn, uuid, sysmeta.TRIED_NODES, None)
        assert working_state.get(conn, uuid, sysmeta.TRIED_NODES) is None
        with pytest.raises(ValueError):
            working_state.put(conn, uuid, sysmeta.TASK_EVENT, "1:2")  # bounded: kept in system metadata


def test_the_keys_kept_in_system_metadata_are_bounded():
    """The controller's keys left in system metadata hold values bounded by construction: every
    ``openkeel_`` key is either one of those (event ids, a VMI's uid) or the working state's."""
    bounded = {sysmeta.TASK_EVENT, sysmeta.RESIZE_STEP_EVENT, sysmeta.REPLACED_VMI,
               sysmeta.IMAGE_NAME,  # cut to 255 bytes (compute/image_meta.name_metadata)
               sysmeta.BOOT_FROM_VOLUME, sysmeta.HAS_VOLUMES, sysmeta.HAS_BLOCK_DEVICES,  # "True"
               sysmeta.VIF_WAIT, sysmeta.DETACH_WAIT,  # an ISO 8601 time
               sysmeta.INTERFACE_EVENT,  # "<outbox row id>:<event id>"
               sysmeta.RESCUE_IMAGE_REF,  # an image id (the rescue schema's uuid format) or ""
               sysmeta.RESCUE_IMAGE_NAME}  # cut to 255 bytes (api/handlers/server_rescue.py)
    keys = {v for k, v in vars(sysmeta).items() if k.isupper() and isinstance(v, str) and v.startswith("openkeel_")}
    assert keys == bounded | set(sysmeta.WORKING_STATE)
    assert not bounded & sysmeta.WORKING_STATE


@pytest.mark.parametrize("backend", ENGINES)
def test_migration_0009_moves_the_working_state_out_of_system_metadata(backend, tmp_path):
    """A resize or a build under way when the site upgrades carries on: its items move to the new table."""
    with throwaway_database(backend, tmp_path) as url:
        engine = sa.create_engine(url)
        try:
            migration.sync(engine, "0008")
            with engine.begin() as conn:
                uuid = _server(conn)
                conn.execute(sa.text("INSERT INTO instance_system_metadata (instance_uuid, \"key\", value, created_at, "
                                     "deleted) VALUES (:u, :k, :v, CURRENT_TIMESTAMP, 0)".replace(
                                         '"key"', "`key`" if engine.dialect.name == "mysql" else '"key"')),
                             [{"u": uuid, "k": sysmeta.RESIZE_NODES, "v": '{"dest": "b", "source": "a"}'},
                              {"u": uuid, "k": "image_os_distro", "v": "cirros"}])
            migration.sync(engine)
            with engine.connect() as conn:
                assert working_state.of(conn, uuid) == {sysmeta.RESIZE_NODES: '{"dest": "b", "source": "a"}'}
                assert store.metadata_of(conn, uuid, system=True) == {"image_os_distro": "cirros"}
        finally:
            engine.dispose()
            db_api.dispose_all()
