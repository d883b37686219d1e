"""GET /servers/{id} against the answers recorded from Nova 34.0.0, version by version."""

from __future__ import annotations

import pytest

from openkeel_compute.db import api as db_api
from tests.api.servers import oracle_state as oracle
from tests.conftest import admin, user

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset

DEMO = {"X-Auth-Token": "demo:demo"}


@pytest.fixture
def engine(app, conf):
    return db_api.get_engine(conf)


def _version_headers(exchange):
    headers = {"X-Auth-Token": exchange["request_headers"]["X-Auth-Token"]}
    if "OpenStack-API-Version" in exchange["request_headers"]:
        headers["OpenStack-API-Version"] = exchange["request_headers"]["OpenStack-API-Version"]
    return headers


@pytest.mark.parametrize("step", ["show @2.1", "show @2.9", "show @2.46", "show @2.47", "show @2.73", "show @2.96",
                                  "show @2.98", "show @2.100", "show @latest", "admin sees extended attrs"])
def test_show_equals_nova_at_each_version(client, engine, db_engine, step):
    oracle.boot_server_a(engine)
    exchange = oracle.recorded(step)
    got = client.get(exchange["path"], headers=_version_headers(exchange))
    assert got.status_code == exchange["status"], got.text
    expected = oracle.to_the_second(oracle.as_ours(exchange["body"], client.host), db_engine)
    shown = oracle.to_the_second(got.json, db_engine)
    # the server is in the "default" security group, shown where Nova shows it
    assert expected["server"]["security_groups"] == [{"name": "default"}]
    assert {k: v for k, v in shown["server"].items() if shown["server"][k] != expected["server"].get(k)} == {}
    assert shown == expected
    # the same keys in the same order, as Nova writes them
    assert list(shown["server"]) == list(expected["server"])


def test_show_without_addresses_at_2_1(client, engine, db_engine):
    exchange = oracle.recorded("wait ACTIVE @2.1 (no addresses)")
    # booted with "networks": "none": no interface, so no security groups either
    oracle.boot(engine, uuid=oracle.SERVER_LEGACY, name="srv-legacy", created="2026-12-01T09:55:10Z",
                updated="2026-12-01T09:55:11Z", launched="2026-12-01T09:55:11.185680",
                system_metadata=oracle.NO_INTERFACE)
    got = client.get(exchange["path"], headers=_version_headers(exchange))
    body = oracle.as_ours(exchange["body"], client.host)
    # Nova lists the "default" security group of the server's ports; a server without ports has none.
    assert "security_groups" not in body["server"]
    assert oracle.to_the_second(got.json, db_engine) == oracle.to_the_second(body, db_engine)


def test_other_projects_server_is_not_found(client, engine):
    oracle.boot_server_a(engine)
    exchange = oracle.recorded("other project -> 404")
    got = client.get(exchange["path"], headers=_version_headers(exchange))
    assert (got.status_code, got.json) == (404, exchange["body"])


def test_deleted_and_unknown_servers_are_not_found(client, engine):
    got = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers=admin("2.96"))
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"Instance {oracle.SERVER_A} could not be found.")


def test_reader_may_show_and_sees_no_extended_attributes(client, engine):
    oracle.boot_server_a(engine)
    got = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers=user("demo", version="2.16"))
    assert got.status_code == 200
    assert "host_status" not in got.json["server"]
    assert not [k for k in got.json["server"] if k.startswith("OS-EXT-SRV-ATTR")]
    got = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers=admin("2.16"))
    assert got.json["server"]["host_status"] == "UP"


def test_host_status_follows_the_servers_node_as_the_controller_published_it(client, engine):
    # Nova derives host_status from the host's compute service: "" once the service is gone (the node was
    # deleted), UNKNOWN while it is down (the node stopped reporting Ready), UP otherwise
    import sqlalchemy as sa

    from openkeel_compute.db import models

    oracle.boot_server_a(engine)
    host = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers=admin("2.16")).json["server"][
        "OS-EXT-SRV-ATTR:host"]

    def seen():
        one = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers=admin("2.16")).json["server"]
        listed = client.get("/v2.1/servers/detail?all_tenants=1", headers=admin("2.16")).json["servers"]
        by_user = client.get(f"/v2.1/servers/{oracle.SERVER_A}", headers=user("demo", version="2.16")).json
        return one["host_status"], [s["host_status"] for s in listed if s["id"] == oracle.SERVER_A], \
            by_user["server"].get("host_status")

    with db_api.transaction(engine) as conn:  # the cluster has another node: this server's is gone
        conn.execute(sa.insert(models.NODE_ZONES).values(node="other-node", zone=None, available=True))
    assert seen() == ("", [""], None)
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.NODE_ZONES).values(node=host, zone=None, available=False))
    assert seen()[:2] == ("UNKNOWN", ["UNKNOWN"])
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.NODE_ZONES).where(models.NODE_ZONES.c.node == host).values(available=True))
    assert seen() == ("UP", ["UP"], None)
    with db_api.transaction(engine) as conn:  # cordoned: a disabled compute service, whether Ready or not
        conn.execute(sa.update(models.NODE_ZONES).where(models.NODE_ZONES.c.node == host).values(cordoned=True))
    assert seen() == ("MAINTENANCE", ["MAINTENANCE"], None)
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.NODE_ZONES).where(models.NODE_ZONES.c.node == host).values(available=False))
    assert seen() == ("MAINTENANCE", ["MAINTENANCE"], None)
