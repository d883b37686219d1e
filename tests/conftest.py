"""Fixtures shared by the API and database tests: a configured app on a throwaway database."""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.conf import build_conf
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests import _shared

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
POSTGRES_URL = os.environ.get("OPENKEEL_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
MARIADB_URL = os.environ.get("OPENKEEL_TEST_MARIADB", "mysql+pymysql://root@127.0.0.1:3306/mysql")


def make_conf(tmp_path, **overrides):
    """A ConfigOpts for tests: state under tmp_path, noauth2 unless told otherwise."""
    lines = ["[DEFAULT]", f"state_path = {tmp_path}", "[api]",
             f"auth_strategy = {overrides.pop('auth_strategy', 'noauth2')}"]
    for section, values in overrides.items():
        lines.append(f"[{section}]")
        lines.extend(f"{k} = {v}" for k, v in values.items())
    path = tmp_path / f"test-{uuid.uuid4().hex[:8]}.conf"
    path.write_text("\n".join(lines) + "\n")
    return build_conf(["--config-file", str(path)])


@pytest.fixture
def conf(tmp_path):
    policies.reset()
    conf = make_conf(tmp_path)
    yield conf
    policies.reset()


@pytest.fixture
def app(conf):
    migration.sync(db_api.get_engine(conf))
    application = deploy(conf)
    yield application
    db_api.dispose_all()


@pytest.fixture
def client(app):
    from tests.wsgi_client import Client

    return Client(app)


def admin(version: str | None = None, **extra) -> dict:
    headers = {"X-Auth-Token": "admin:admin"}
    if version:
        headers["OpenStack-API-Version"] = f"compute {version}"
    headers.update(extra)
    return headers


def user(project: str = "demo-project", name: str = "demo", version: str | None = None, **extra) -> dict:
    headers = {"X-Auth-Token": f"{name}:{project}"}
    if version:
        headers["OpenStack-API-Version"] = f"compute {version}"
    headers.update(extra)
    return headers


def pytest_configure(config):
    # every test's database refuses an over-long value as PostgreSQL and MariaDB do (SQLite stores it)
    from tests import bounded_columns

    bounded_columns.install()
    config.addinivalue_line("markers", "engines(*names): the database engines a db_engine test runs on")
    config.addinivalue_line("markers", "engines_subset: every case on SQLite, each function's first on the others")
    config.addinivalue_line("markers", f"{_shared.MARKER}(path): a case whose values come from ../shared/<path>")


def pytest_generate_tests(metafunc):
    # A test that asks for ``db_engine`` runs once per engine (tests/databases.py), or on those its
    # ``engines`` mark names.
    if "db_engine" in metafunc.fixturenames:
        from tests.databases import ENGINES

        marker = metafunc.definition.get_closest_marker("engines")
        metafunc.parametrize("db_engine", list(marker.args) if marker else ENGINES, indirect=True)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's loadgroup reads the groups
def pytest_collection_modifyitems(config, items):
    _one_worker_per_module_fixture(items)
    # A module marked ``engines_subset`` (a heavy matrix) runs every case on SQLite and, on PostgreSQL
    # and MariaDB, the first case of each test function: every function on every engine, the full matrix
    # once.
    seen, keep, drop = set(), [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        engine = callspec.params.get("db_engine") if callspec is not None else None
        if engine in (None, "sqlite") or item.get_closest_marker("engines_subset") is None:
            keep.append(item)
            continue
        key = (item.nodeid.split("[", 1)[0], engine)
        (drop if key in seen else keep).append(item)
        seen.add(key)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _one_worker_per_module_fixture(items) -> None:
    """The tests of a module that share a module-scoped fixture (a served stack, a Nova oracle, a real Glance)
    run on one worker (``--dist loadgroup``, scripts/test): split over two workers, each would build the
    fixture again, and tests that go on from one another's state would see two worlds."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(defs and defs[-1].scope == "module" for defs in fixtures.values()):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.fixture
def db_engine(request):
    """The database engine a test runs on: sqlite, postgresql or mariadb."""
    return request.param


@contextlib.contextmanager
def conf_on(engine: str, tmp_path, **overrides):
    """make_conf's configuration on a migrated database of ``engine`` (tests/databases.migrated_database)."""
    from tests.databases import migrated_database

    policies.reset()
    with migrated_database(engine, tmp_path) as url:
        database = dict(overrides.pop("database", {}), connection=url)
        yield make_conf(tmp_path, database=database, **overrides)
    policies.reset()


def pytest_runtest_setup(item):
    _shared.check_marker(item)


@pytest.fixture(scope="session")
def placement_service(tmp_path_factory):
    """One embedded Placement (openstack-placement, SQLite, noauth2) for the whole run; its URL.
    Tests share it, so each uses providers and consumers of its own (fresh UUIDs)."""
    from openkeel_compute.placement import embedded

    running = embedded.start(tmp_path_factory.mktemp("placement"))
    yield running.url
    running.stop()


def placement_overrides(url: str) -> dict:
    """make_conf's ``placement=`` section for the embedded Placement at ``url``."""
    return {"auth_type": "admin_token", "endpoint": url, "token": "admin:admin", "endpoint_override": url}


def placement_section(url: str) -> str:
    """The ``[placement]`` section of a config file for the embedded Placement at ``url``."""
    return "[placement]\n" + "".join(f"{k} = {v}\n" for k, v in placement_overrides(url).items())
