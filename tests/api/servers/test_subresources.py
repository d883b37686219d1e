"""A server's addresses, password, security groups and migrations, against the answers of the
Nova 34.0.0 servers oracle (recorded here as literals: messages, bodies and statuses).

Where the oracle's Neutron fixture cannot answer (it has no security group look-ups, so Nova
answers 500 there), the expected words are Nova's own for a cloud with Neutron."""

from __future__ import annotations

import pytest

from openkeel_compute.db import api as db_api
from tests.api.servers import oracle_state as oracle
from tests.conftest import admin, user

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset

S = oracle.SERVER_A
DEMO = user("demo", name="demo")
OTHER = user("other", name="other")
ADMIN = admin()


def _v(headers: dict, version: str) -> dict:
    return dict(headers, **{"OpenStack-API-Version": f"compute {version}"})


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


# --- /ips -------------------------------------------------------------------------------------

def test_addresses(client, engine):
    got = client.get(f"/v2.1/servers/{S}/ips", headers=DEMO)
    assert (got.status_code, got.json) == (200, {"addresses": {"private": [{"version": 4, "addr": "192.168.1.31"}]}})
    got = client.get(f"/v2.1/servers/{S}/ips/private", headers=DEMO)
    assert (got.status_code, got.json) == (200, {"private": [{"version": 4, "addr": "192.168.1.31"}]})


def test_addresses_of_an_unknown_network_or_server(client, engine):
    got = client.get(f"/v2.1/servers/{S}/ips/invalid", headers=DEMO)
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": "Instance is not a member of specified network"}})
    got = client.get("/v2.1/servers/999/ips", headers=DEMO)
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": "Instance 999 could not be found."}})
    # another project's server does not exist for this caller
    got = client.get(f"/v2.1/servers/{S}/ips", headers=OTHER)
    assert got.status_code == 404


def test_addresses_query_is_strict_from_2_102(client, engine):
    assert client.get(f"/v2.1/servers/{S}/ips?foo=1", headers=_v(DEMO, "2.101")).status_code == 200
    got = client.get(f"/v2.1/servers/{S}/ips?foo=1", headers=_v(DEMO, "2.102"))
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400, "message": "Additional properties are not allowed ('foo' was unexpected)"}})


# --- os-server-password -----------------------------------------------------------------------

def test_password_is_empty_then_kept_in_four_chunks_and_cleared(client, engine):
    from openkeel_compute.compute import networks
    from openkeel_compute.compute.instances import store

    got = client.get(f"/v2.1/servers/{S}/os-server-password", headers=DEMO)
    assert (got.status_code, got.json) == (200, {"password": ""})
    secret = "x" * 300 + "y" * 300 + "z" * 100  # more than two chunks of 255
    with db_api.transaction(engine) as conn:
        networks.set_password(conn, S, secret)
    with db_api.reader(engine) as conn:
        system = store.metadata_of(conn, S, system=True)
    assert [len(system[f"password_{i}"]) for i in range(4)] == [255, 255, 190, 0]
    assert client.get(f"/v2.1/servers/{S}/os-server-password", headers=DEMO).json == {"password": secret}
    got = client.delete(f"/v2.1/servers/{S}/os-server-password", headers=DEMO)
    assert (got.status_code, got.content) == (204, b"")
    assert client.get(f"/v2.1/servers/{S}/os-server-password", headers=DEMO).json == {"password": ""}


def test_password_policies(client, engine, tmp_path):
    got = client.get("/v2.1/servers/999/os-server-password", headers=DEMO)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, "Instance 999 could not be found.")
    assert client.delete(f"/v2.1/servers/{S}/os-server-password", headers=OTHER).status_code == 404
    assert client.delete(f"/v2.1/servers/{S}/os-server-password", headers=ADMIN).status_code == 204


# --- security groups --------------------------------------------------------------------------

def _action(client, body, headers=DEMO, server=S):
    return client.post(f"/v2.1/servers/{server}/action", headers=headers, json_body=body)


def test_the_default_group_is_listed_removed_and_added_again(client, engine):
    """Tempest's test_remove_server_all_security_groups: after removing the only group, the
    server body has no security_groups key (Nova's answer for a server whose ports have no group)."""
    show = client.get(f"/v2.1/servers/{S}", headers=DEMO).json["server"]
    assert show["security_groups"] == [{"name": "default"}]
    listed = client.get(f"/v2.1/servers/{S}/os-security-groups", headers=DEMO)
    from openkeel_compute.compute import networks

    assert (listed.status_code, listed.json) == (200, {"security_groups": [{
        "id": networks.group_id("demo", "default"), "description": "Default security group", "name": "default",
        "tenant_id": "demo", "rules": []}]})
    got = _action(client, {"removeSecurityGroup": {"name": "default"}})
    assert (got.status_code, got.content) == (202, b"")
    for version in ("2.1", "2.98", "2.104"):  # read with the system metadata from 2.98
        headers = _v(DEMO, version)
        assert "security_groups" not in client.get(f"/v2.1/servers/{S}", headers=headers).json["server"]
        assert "security_groups" not in client.get("/v2.1/servers/detail", headers=headers).json["servers"][0]
    assert client.get(f"/v2.1/servers/{S}/os-security-groups", headers=DEMO).json == {"security_groups": []}
    # removing it again: Nova's words for a group the server's ports do not have
    got = _action(client, {"removeSecurityGroup": {"name": "default"}})
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": f"Security group default not associated with the instance {S}"}})
    assert _action(client, {"addSecurityGroup": {"name": "default"}}).status_code == 202
    assert _action(client, {"addSecurityGroup": {"name": "default"}}).status_code == 202  # already there: no change
    for version in ("2.1", "2.98", "2.104"):
        headers = _v(DEMO, version)
        assert client.get(f"/v2.1/servers/{S}", headers=headers).json["server"]["security_groups"] == [
            {"name": "default"}]
        assert client.get("/v2.1/servers/detail", headers=headers).json["servers"][0]["security_groups"] == [
            {"name": "default"}]
    detail = client.get("/v2.1/servers/detail", headers=DEMO).json["servers"][0]
    assert list(detail)[-1] == "security_groups"  # lists add the groups last, as Nova does


def test_security_group_refusals(client, engine):
    got = _action(client, {"addSecurityGroup": {"name": "nope"}})
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": "Security group nope is not found for project demo"}})
    got = _action(client, {"addSecurityGroup": {"name": " "}})
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400, "message": "Security group name cannot be empty"}})
    got = _action(client, {"addSecurityGroup": {"name": ""}})
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400, "message": "Invalid input for field/attribute name. Value: . '' should be non-empty"}})
    got = _action(client, {"addSecurityGroup": {}})
    assert (got.status_code, got.json) == (400, {"badRequest": {
        "code": 400,
        "message": "Invalid input for field/attribute addSecurityGroup. Value: {}. 'name' is a required property"}})
    got = _action(client, {"addSecurityGroup": {"name": "default"}, "x": 1})
    assert (got.status_code, got.json) == (400, {"badRequest": {"code": 400, "message": "Malformed request body"}})
    got = _action(client, {"addSecurityGroup": {"name": "default"}}, headers=OTHER)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Instance {S} could not be found.")
    got = _action(client, {"addSecurityGroup": {"name": "default"}}, server="999")
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, "Instance 999 could not be found.")


def test_a_server_without_an_interface_has_no_groups(client, app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot(engine, uuid=oracle.SERVER_LEGACY, name="srv-legacy", created="2026-12-01T09:55:10Z",
                updated="2026-12-01T09:55:11Z", launched="2026-12-01T09:55:11.185680",
                system_metadata=oracle.NO_INTERFACE)
    server = oracle.SERVER_LEGACY
    assert "security_groups" not in client.get(f"/v2.1/servers/{server}", headers=DEMO).json["server"]
    got = _action(client, {"addSecurityGroup": {"name": "default"}}, server=server)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"instance_id {server} could not be found as device id on any ports")


# --- migrations -------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "query", "status", "answer"), [
    ("2.1", "", 200, {"migrations": []}),
    ("2.58", "?foo=1", 200, {"migrations": []}),
    ("2.58", "?marker=abc", 200, {"migrations": []}),
    ("2.59", "?foo=1", 400, "Additional properties are not allowed ('foo' was unexpected)"),
    ("2.59", "?marker=abc", 400, "Marker abc could not be found."),
    ("2.59", "?limit=-1", 400, "Invalid input for query parameters limit. Value: -1. '-1' does not match '^[0-9]*$'"),
    ("2.59", "?limit=1&limit=2", 400,
     "Invalid input for query parameters limit. Value: ['1', '2']. ['1', '2'] is too long"),
    ("2.59", "?changes-since=bad", 400,
     "Invalid input for query parameters changes-since. Value: bad. 'bad' is not a 'date-time'"),
    ("2.65", "?changes-since=2026-01-02T00:00:00Z&changes-before=2026-01-01T00:00:00Z", 400,
     "Additional properties are not allowed ('changes-before' was unexpected)"),
    ("2.66", "?changes-since=2026-01-02T00:00:00Z&changes-before=2026-01-01T00:00:00Z", 400,
     "The value of changes-since must be less than or equal to changes-before."),
    ("2.79", "?user_id=x", 400, "Additional properties are not allowed ('user_id' was unexpected)"),
    ("2.80", "?user_id=x&project_id=y", 200, {"migrations": []}),
])
def test_os_migrations_as_nova(client, app, version, query, status, answer):
    got = client.get(f"/v2.1/os-migrations{query}", headers=_v(ADMIN, version))
    expected = answer if status == 200 else {"badRequest": {"code": 400, "message": answer}}
    assert (got.status_code, got.json) == (status, expected)


def test_os_migrations_policies(client, app):
    for query in ("", "?project_id=demo"):
        got = client.get(f"/v2.1/os-migrations{query}", headers=_v(DEMO, "2.80"))
        assert (got.status_code, got.json) == (403, {"forbidden": {
            "code": 403, "message": "Policy doesn't allow os_compute_api:os-migrations:index to be performed."}})


def test_server_migrations_as_nova(client, engine):
    got = client.get(f"/v2.1/servers/{S}/migrations", headers=_v(ADMIN, "2.22"))
    assert (got.status_code, got.json) == (404, {"itemNotFound": {
        "code": 404, "message": "The resource could not be found."}})
    got = client.get(f"/v2.1/servers/{S}/migrations", headers=_v(ADMIN, "2.23"))
    assert (got.status_code, got.json) == (200, {"migrations": []})
    got = client.get(f"/v2.1/servers/{S}/migrations", headers=_v(DEMO, "2.23"))
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:servers:migrations:index to be performed.")
    got = client.get(f"/v2.1/servers/{S}/migrations?x=1", headers=_v(ADMIN, "2.102"))
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, "Additional properties are not allowed ('x' was unexpected)")
    for migration in ("1", "abc"):
        got = client.get(f"/v2.1/servers/{S}/migrations/{migration}", headers=_v(ADMIN, "2.23"))
        assert (got.status_code, got.json["itemNotFound"]["message"]) == (
            404, f"In-progress live migration {migration} is not found for server {S}.")
    got = client.get(f"/v2.1/servers/{S}/migrations/1", headers=_v(DEMO, "2.23"))
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:servers:migrations:show to be performed.")
    got = client.get("/v2.1/servers/999/migrations", headers=_v(ADMIN, "2.23"))
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, "Instance 999 could not be found.")
