"""The schema and the catalogue behave the same on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import concurrent.futures
import json
import time

import pytest
import sqlalchemy as sa

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database
from tests.wsgi_client import Client

ADMIN = {"X-Auth-Token": "admin:admin"}


@pytest.fixture(params=ENGINES)
def database_url(request, tmp_path):
    with throwaway_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def backend_client(database_url, tmp_path):
    policies.reset()
    conf = make_conf(tmp_path, database={"connection": database_url})
    migration.sync(db_api.get_engine(conf))
    client = Client(deploy(conf))
    client.database_url = database_url
    yield client
    policies.reset()
    db_api.dispose_all()


def test_migrations_upgrade_downgrade_and_upgrade_again(database_url):
    engine = db_api.make_engine(database_url)
    try:
        migration.sync(engine)
        assert migration.current(engine) == migration.head()
        tables = set(sa.inspect(engine).get_table_names())
        assert {"flavors", "flavor_extra_specs", "flavor_projects", "outbox"} <= tables
        assert {"instances", "instance_metadata", "instance_system_metadata", "tags", "instance_actions",
                "instance_actions_events", "instance_faults"} <= tables
        migration.downgrade(engine, "0001")
        assert "instances" not in set(sa.inspect(engine).get_table_names())
        assert "flavors" in set(sa.inspect(engine).get_table_names())
        migration.downgrade(engine, "base")
        assert migration.current(engine) is None
        assert "flavors" not in set(sa.inspect(engine).get_table_names())
        migration.sync(engine)
        assert migration.current(engine) == migration.head()
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(database_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = db_api.make_engine(database_url)
    try:
        migration.sync(engine)
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), models.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
    finally:
        engine.dispose()


def _backend_id(conn) -> int:
    if conn.dialect.name == "postgresql":
        return conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    return conn.exec_driver_sql("SELECT CONNECTION_ID()").scalar()


def _kill_backend(database_url: str, backend: int) -> None:
    killer = sa.create_engine(database_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with killer.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_terminate_backend({int(backend)})")
        else:
            conn.exec_driver_sql(f"KILL {int(backend)}")
    killer.dispose()


@pytest.mark.parametrize("check", ["idle-ping", "socket", "neither"])
def test_a_pooled_connection_killed_while_idle_is_replaced_before_use(database_url, check, monkeypatch):
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has no server connection to lose")
    # ping_after_idle=0 pings every connection that was idle at all; 3600 never pings here, so the
    # killed connection is found by its socket (the server closed it); with neither check the dead
    # connection is handed out, which shows the checks are what save the read.
    engine = db_api.make_engine(database_url, pool_size=1, max_overflow=0,
                                ping_after_idle=0 if check == "idle-ping" else 3600)
    if check != "socket":
        monkeypatch.setattr(db_api, "_socket_has_news", lambda _connection: False)
    try:
        with db_api.reader(engine) as conn:
            backend = _backend_id(conn)
        _kill_backend(database_url, backend)
        time.sleep(0.2)  # the server closes the killed backend's socket
        if check != "neither":
            with db_api.reader(engine) as conn:
                assert _backend_id(conn) != backend
        else:
            # The driver's error, wrapped by SQLAlchemy or not depending on where it surfaces.
            with pytest.raises(Exception, match="(?i)connection|terminat|lost|closed"), db_api.reader(engine) as conn:
                _backend_id(conn)
    finally:
        engine.dispose()


def test_a_raw_read_hands_the_connection_back_out_of_autocommit(database_url):
    # raw_reader sets AUTOCOMMIT on the driver connection; the pool must get it back transactional,
    # or the next writer's rollback would not undo anything.
    engine = db_api.make_engine(database_url, pool_size=1, max_overflow=0)
    try:
        migration.sync(engine)
        with db_api.raw_reader(engine) as raw:
            cursor = raw.connection.cursor()
            cursor.execute("SELECT 1")
            assert cursor.fetchall()[0][0] == 1
            cursor.close()
        with pytest.raises(RuntimeError), db_api.transaction(engine) as conn:
            conn.execute(models.OUTBOX.insert().values(kind="flavor", object_id="x", operation="upsert"))
            raise RuntimeError("roll back")
        with db_api.reader(engine) as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(models.OUTBOX)).scalar() == 0
    finally:
        engine.dispose()


def _create(client, name, flavor_id=None, version=None):
    headers = dict(ADMIN)
    if version:
        headers["OpenStack-API-Version"] = f"compute {version}"
    body = {"flavor": {"name": name, "ram": 512, "vcpus": 1, "disk": 1}}
    if flavor_id:
        body["flavor"]["id"] = flavor_id
    return client.post("/v2.1/flavors", headers=headers, json_body=body)


def test_flavor_lifecycle_on_every_engine(backend_client):
    c = backend_client
    v = {"OpenStack-API-Version": "compute 2.86"}
    assert _create(c, "small", "f-small").status_code == 200
    assert _create(c, "Small", "F-SMALL").status_code == 200, "ids and names compare exactly everywhere"
    created = c.post("/v2.1/flavors", headers=dict(ADMIN, **v), json_body={
        "flavor": {"name": "private", "ram": 1024, "vcpus": 2, "disk": 10, "id": "f-priv",
                   "os-flavor-access:is_public": False}})
    assert created.status_code == 200, created.text
    specs = c.post("/v2.1/flavors/f-priv/os-extra_specs", headers=dict(ADMIN, **v),
                   json_body={"extra_specs": {"hw:cpu_policy": "dedicated", "hw:numa_nodes": 1}})
    assert specs.status_code == 200, specs.text
    assert specs.json == {"extra_specs": {"hw:cpu_policy": "dedicated", "hw:numa_nodes": 1}}
    again = c.post("/v2.1/flavors/f-priv/os-extra_specs", headers=dict(ADMIN, **v),
                   json_body={"extra_specs": {"hw:cpu_policy": "shared"}})
    assert again.status_code == 200
    listed = c.get("/v2.1/flavors/f-priv/os-extra_specs", headers=ADMIN).json
    assert listed == {"extra_specs": {"hw:cpu_policy": "shared", "hw:numa_nodes": "1"}}
    add = c.post("/v2.1/flavors/f-priv/action", headers=ADMIN, json_body={"addTenantAccess": {"tenant": "p1"}})
    assert add.json == {"flavor_access": [{"flavor_id": "f-priv", "tenant_id": "p1"}]}
    dup = c.post("/v2.1/flavors/f-priv/action", headers=ADMIN, json_body={"addTenantAccess": {"tenant": "p1"}})
    assert dup.status_code == 409
    # The show and the access list read through the DB-API cursor: same values on every engine.
    shown = c.get("/v2.1/flavors/f-priv", headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.61"}))
    assert shown.json["flavor"] | {"links": None} == {
        "id": "f-priv", "name": "private", "ram": 1024, "disk": 10, "swap": "", "vcpus": 2,
        "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False, "os-flavor-access:is_public": False,
        "rxtx_factor": 1.0, "description": None, "links": None,
        "extra_specs": {"hw:cpu_policy": "shared", "hw:numa_nodes": "1"}}
    assert isinstance(shown.json["flavor"]["rxtx_factor"], float)
    # before 2.61 the show reads the flavor alone (no join on the extra specs)
    bare = c.get("/v2.1/flavors/f-priv", headers=ADMIN).json["flavor"]
    assert bare | {"links": None} == {k: v for k, v in shown.json["flavor"].items()
                                      if k not in ("extra_specs", "description")} | {"links": None}
    member = {"X-Auth-Token": "u:p1", "OpenStack-API-Version": "compute 2.61"}
    assert c.get("/v2.1/flavors/f-priv", headers=member).json["flavor"]["extra_specs"] == {
        "hw:cpu_policy": "shared", "hw:numa_nodes": "1"}
    assert c.get("/v2.1/flavors/f-small", headers=member).json["flavor"]["extra_specs"] == {}
    assert c.get("/v2.1/flavors/f-priv", headers={"X-Auth-Token": "u:p2"}).status_code == 404
    assert c.post("/v2.1/flavors/f-priv/action", headers=ADMIN,
                  json_body={"addTenantAccess": {"tenant": "p0"}}).status_code == 200
    access = c.get("/v2.1/flavors/f-priv/os-flavor-access", headers=ADMIN).json
    assert access == {"flavor_access": [{"flavor_id": "f-priv", "tenant_id": "p0"},
                                        {"flavor_id": "f-priv", "tenant_id": "p1"}]}
    public = c.get("/v2.1/flavors/f-small/os-flavor-access", headers=ADMIN)
    assert public.status_code == 404 and "Access list not available for public flavors." in public.text
    assert c.post("/v2.1/flavors/f-priv/action", headers=ADMIN,
                  json_body={"removeTenantAccess": {"tenant": "p0"}}).status_code == 200
    seen = c.get("/v2.1/flavors", headers={"X-Auth-Token": "u:p1"}).json
    assert [f["id"] for f in seen["flavors"]] == sorted(["f-small", "F-SMALL", "f-priv"])
    filtered = c.get("/v2.1/flavors?name=^sm", headers=dict(ADMIN, **{"OpenStack-API-Version": "compute 2.102"}))
    assert [f["name"] for f in filtered.json["flavors"]] == ["small"]
    page = c.get("/v2.1/flavors?limit=1&marker=F-SMALL", headers=ADMIN).json
    assert [f["id"] for f in page["flavors"]] == ["f-small"], "admins list public flavors by default"
    # granted after p1, sorts before it (code points): the delete's project list is ordered, not as inserted
    assert c.post("/v2.1/flavors/f-priv/action", headers=ADMIN,
                  json_body={"addTenantAccess": {"tenant": "P9"}}).status_code == 200
    assert c.delete("/v2.1/flavors/f-priv", headers=ADMIN).status_code == 202
    engine = sa.create_engine(c.database_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("select count(*) from flavor_projects")).scalar() == 0
            assert conn.execute(sa.text("select count(*) from flavor_extra_specs")).scalar() == 0
            ops = [tuple(r) for r in conn.execute(sa.text("select object_id, operation from outbox order by id"))]
            payload = conn.execute(sa.text("select payload from outbox where operation = 'delete'")).scalar()
    finally:
        engine.dispose()
    assert ops == [("f-small", "upsert"), ("F-SMALL", "upsert"), ("f-priv", "upsert"), ("f-priv", "upsert"),
                   ("f-priv", "upsert"), ("f-priv", "upsert"), ("f-priv", "upsert"), ("f-priv", "upsert"),
                   ("f-priv", "upsert"), ("f-priv", "delete")]
    # the controller learns from the delete which namespaces held the private flavor
    assert (json.loads(payload) if isinstance(payload, str) else payload) == {"is_public": False, "projects": ["P9", "p1"]}


def test_fifty_concurrent_creates_of_one_name_give_one_200(backend_client):
    c = backend_client

    def attempt(i):
        return _create(c, "contended", f"id-{i}").status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        statuses = list(pool.map(attempt, range(50)))
    assert statuses.count(200) == 1, statuses
    assert statuses.count(409) == 49, statuses
    listed = c.get("/v2.1/flavors", headers=ADMIN).json["flavors"]
    assert [f["name"] for f in listed] == ["contended"]


def test_concurrent_upserts_of_one_extra_spec_key_all_succeed(backend_client):
    c = backend_client
    assert _create(c, "racy", "racy").status_code == 200

    def attempt(i):
        return c.post("/v2.1/flavors/racy/os-extra_specs", headers=ADMIN,
                      json_body={"extra_specs": {"k": f"v{i}", f"k{i}": "x"}}).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        statuses = list(pool.map(attempt, range(30)))
    assert statuses == [200] * 30
    specs = c.get("/v2.1/flavors/racy/os-extra_specs", headers=ADMIN).json["extra_specs"]
    assert len(specs) == 31 and specs["k"].startswith("v")
    assert json.dumps(specs)


def test_a_servers_state_compare_and_swap_on_every_engine(database_url):
    """save_state's prebuilt UPDATE (values bound per call) on each engine: the expected task state
    decides, None among them matches no task, and the values (a timestamp among them) are stored."""
    import datetime as dt

    from openkeel_compute.catalog import flavors as catalog
    from openkeel_compute.compute.instances import cas, store
    from openkeel_compute.compute.instances.base import Actor
    from openkeel_compute.model import states

    engine = db_api.make_engine(database_url)
    try:
        migration.sync(engine)
        owner = Actor("user-1", "project-1", request_id="req-1")
        with db_api.transaction(engine) as conn:
            catalog.create(conn, name="m1", memory_mb=512, vcpus=1, root_gb=1, flavorid="m1")
            flavor = catalog.get(conn, "m1")
            made = [store.create(conn, actor=owner, flavor=flavor, extra_specs={}, display_name=f"web {i}",
                                 image_ref="6e0a6c4e-3a69-4c5f-9f57-1f6b0d7c8a10", system_metadata={})
                    for i in range(2)]
        a, b = (row["uuid"] for row in made)
        launched = dt.datetime(2026, 12, 1, 20, 0, 0)
        with db_api.transaction(engine) as conn:
            assert not cas.save_state(conn, a, expected_task_state=[states.task_states.DELETING],
                                      vm_state=states.ACTIVE)
            assert cas.save_state(conn, a, expected_task_state=[made[0]["task_state"]],
                                  vm_state=states.ACTIVE, task_state=None, launched_at=launched)
            assert not cas.save_state(conn, b, expected_task_state=[None], vm_state=states.ACTIVE)
            assert cas.save_state(conn, b, expected_task_state=[None, made[1]["task_state"]],
                                  vm_state=states.ERROR, task_state=None)
            assert cas.save_state(conn, a, expected_task_state=None, host="node-1", node="node-1")
            assert cas.save_state(conn, b, host="node-2", node="node-2")
        with db_api.reader(engine) as conn:
            first, second = store.get(conn, a), store.get(conn, b)
        assert (first["vm_state"], first["task_state"], first["host"]) == (states.ACTIVE, None, "node-1")
        assert first["launched_at"].replace(tzinfo=None) == launched
        assert (second["vm_state"], second["task_state"], second["node"]) == (states.ERROR, None, "node-2")
    finally:
        engine.dispose()
