"""The database goes away and comes back: /healthcheck says so, and no request answers 500 afterwards.

PostgreSQL and MariaDB run as servers of this test's own (tests/databases.py ``own_database_server``),
never the machine's shared ones: they are restarted and killed under an API whose pool holds
connections to them. The idle-ping threshold is raised out of reach, so that what is proved is
the check every checkout makes (a connection that died in the pool is replaced, not used).
"""

from __future__ import annotations

import concurrent.futures

import pytest

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.databases import own_database_server
from tests.wsgi_client import Client

SERVER_ENGINES = ["postgresql", "mariadb"]


@pytest.fixture
def busy_pool(monkeypatch):
    """No idle ping: only a connection's own state tells the pool it died."""
    monkeypatch.setattr(db_api, "PING_AFTER_IDLE_SECONDS", 1e9)


@pytest.fixture(params=SERVER_ENGINES)
def served(request, tmp_path, busy_pool):
    """(client, server): the API on a database server of its own, with several pooled connections."""
    with own_database_server(request.param, tmp_path / "server") as server:
        policies.reset()
        conf = make_conf(tmp_path, database={"connection": server.url})
        migration.sync(db_api.get_engine(conf))
        client = Client(deploy(conf))
        created = client.post("/v2.1/flavors", headers=admin(), json_body={
            "flavor": {"name": "f", "ram": 64, "vcpus": 1, "disk": 1, "id": "f"}})
        assert created.status_code == 200, created.text
        _fill_the_pool(client)
        try:
            yield client, server
        finally:
            policies.reset()
            db_api.dispose_all()


def _fill_the_pool(client: Client, parallel: int = 6) -> None:
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        answers = list(pool.map(lambda _: client.get("/v2.1/flavors/detail", headers=admin()).status_code,
                                range(parallel * 4)))
    assert set(answers) == {200}


def _requests(client: Client) -> list[tuple[str, int]]:
    """Every kind of database use once: a raw read, a Core read, a write, a delete and the health check."""
    return [
        ("show", client.get("/v2.1/flavors/f", headers=admin()).status_code),
        ("list", client.get("/v2.1/flavors/detail", headers=admin()).status_code),
        ("keypairs", client.get("/v2.1/os-keypairs", headers=admin()).status_code),
        ("create", client.post("/v2.1/flavors", headers=admin(), json_body={
            "flavor": {"name": "g", "ram": 64, "vcpus": 1, "disk": 1, "id": "g"}}).status_code),
        ("delete", client.delete("/v2.1/flavors/g", headers=admin()).status_code),
        ("health", client.get("/healthcheck").status_code),
    ]


EXPECTED = [("show", 200), ("list", 200), ("keypairs", 200), ("create", 200), ("delete", 202), ("health", 200)]


@pytest.mark.parametrize("how", ["restart", "crash"])
def test_no_request_fails_after_the_database_comes_back(served, how):
    client, server = served
    if how == "restart":
        server.restart()
    else:
        server.kill()
        server.start()
    assert _requests(client) == EXPECTED
    # and under concurrency, every pooled connection having died
    server.restart()
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: client.get("/v2.1/flavors/detail", headers=admin()).status_code,
                                range(24)))
    assert set(answers) == {200}


def test_healthcheck_reports_the_database_down_then_up_without_a_process_restart(served):
    client, server = served
    server.stop()
    down = client.get("/healthcheck")
    assert (down.status_code, down.text) == (503, "DB NOT OK")
    detailed = client.get("/healthcheck", headers={"Accept": "application/json"})
    assert detailed.status_code == 503
    server.start()
    up = client.get("/healthcheck")
    assert (up.status_code, up.text) == (200, "OK")
    assert _requests(client) == EXPECTED


def test_sqlite_health_follows_its_file(tmp_path):
    """SQLite has no server to restart: health reports a database file that cannot be opened, then recovers."""
    path = tmp_path / "db.sqlite"
    policies.reset()
    conf = make_conf(tmp_path, database={"connection": f"sqlite:///{path}"})
    try:
        path.mkdir()  # a directory where the file should be: SQLite cannot open it
        client = Client(deploy(conf))
        assert (client.get("/healthcheck").status_code, client.get("/healthcheck").text) == (503, "DB NOT OK")
        path.rmdir()
        migration.sync(db_api.get_engine(conf))
        assert (client.get("/healthcheck").status_code, client.get("/healthcheck").text) == (200, "OK")
        assert client.get("/v2.1/flavors", headers=admin()).status_code == 200
    finally:
        policies.reset()
        db_api.dispose_all()
