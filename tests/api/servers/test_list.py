"""GET /servers and /servers/detail against the answers recorded from Nova 34.0.0."""

from __future__ import annotations

import pytest

from openkeel_compute.db import api as db_api
from tests.api.servers import oracle_state as oracle
from tests.conftest import admin, user

# A heavy matrix: every case on SQLite; on PostgreSQL and MariaDB each test function's first case
# (tests/conftest.py, engines_subset).
pytestmark = pytest.mark.engines_subset


@pytest.fixture
def cloud(app, conf):
    oracle.boot_list_scenario(db_api.get_engine(conf))


def _headers(exchange):
    headers = {"X-Auth-Token": exchange["request_headers"]["X-Auth-Token"]}
    if "OpenStack-API-Version" in exchange["request_headers"]:
        headers["OpenStack-API-Version"] = exchange["request_headers"]["OpenStack-API-Version"]
    return headers


@pytest.mark.parametrize("step", [
    "list @2.1", "detail @2.47", "detail name filter (regex)", "list flavor filter", "status + limit=1 -> next link",
    "invalid status filter", "sort by display_name asc", "image + ip filters", "unknown filter @2.1 (ignored)",
    "all_tenants as non-admin -> 403 (policy)", "admin all_tenants + project_id",
])
def test_list_equals_nova(client, cloud, db_engine, step):
    exchange = oracle.recorded(step)
    got = client.get(exchange["path"], headers=_headers(exchange))
    assert got.status_code == exchange["status"], got.text
    expected = oracle.to_the_second(oracle.as_ours(exchange["body"], client.host), db_engine)
    listed = oracle.to_the_second(got.json, db_engine)
    assert listed == expected
    for ours, theirs in zip(listed.get("servers", []), expected.get("servers", []), strict=True):
        assert list(ours) == list(theirs)


def test_a_deleted_flavor_lists_nothing(client, cloud, conf):
    from openkeel_compute.catalog import flavors as catalog

    with db_api.transaction(db_api.get_engine(conf)) as conn:
        catalog.destroy(conn, "gone")
    exchange = oracle.recorded("list flavor=deleted flavor")
    got = client.get(exchange["path"], headers=_headers(exchange))
    assert (got.status_code, got.json) == (200, exchange["body"])


def test_deleted_servers_for_admins(client, cloud):
    got = client.get("/v2.1/servers/detail?deleted=true&all_tenants=1", headers=admin("2.96"))
    assert [s["id"] for s in got.json["servers"]] == [oracle.SERVER_LEGACY]
    assert got.json["servers"][0]["status"] == "DELETED"
    got = client.get("/v2.1/servers?status=DELETED", headers={"X-Auth-Token": "demo:demo"})
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Only administrators may list deleted instances")


def test_unknown_parameters_are_refused_from_2_75(client, cloud):
    assert client.get("/v2.1/servers?foo=bar", headers=user("demo", version="2.74")).status_code == 200
    got = client.get("/v2.1/servers?foo=bar", headers=user("demo", version="2.75"))
    assert got.status_code == 400
    assert got.json["badRequest"]["message"] == "'foo' does not match any of the regexes: '^_'"


def test_joined_table_and_private_filters_are_refused(client, cloud):
    for name in ("metadata", "_secret"):
        got = client.get(f"/v2.1/servers?{name}=x", headers=admin("2.1"))
        assert (got.status_code, got.json["badRequest"]["message"]) == (400, f"Invalid filter field: {name}.")


def test_paging_follows_the_next_link(client, cloud):
    first = client.get("/v2.1/servers?limit=1", headers={"X-Auth-Token": "demo:demo"})
    assert [s["name"] for s in first.json["servers"]] == ["srv-b"]
    href = first.json["servers_links"][0]["href"]
    second = client.get(href.split(client.host, 1)[1], headers={"X-Auth-Token": "demo:demo"})
    assert [s["name"] for s in second.json["servers"]] == ["srv-a"]
    assert "servers_links" in second.json  # a full page again: Nova links it too
    third = client.get(second.json["servers_links"][0]["href"].split(client.host, 1)[1],
                       headers={"X-Auth-Token": "demo:demo"})
    assert third.json == {"servers": []}
    got = client.get("/v2.1/servers?marker=nope", headers={"X-Auth-Token": "demo:demo"})
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, "marker [nope] not found")


def test_sorting_by_host_is_for_admins(client, cloud):
    got = client.get("/v2.1/servers?sort_key=host", headers={"X-Auth-Token": "demo:demo"})
    assert (got.status_code, got.json["forbidden"]["message"]) == (403, "Only administrators can sort servers by host")
    assert client.get("/v2.1/servers?sort_key=host", headers=admin()).status_code == 200


def test_tags_filters(client, cloud, conf):
    import sqlalchemy as sa

    from openkeel_compute.db import models
    with db_api.transaction(db_api.get_engine(conf)) as conn:
        conn.execute(sa.insert(models.TAGS), [{"resource_id": oracle.SERVER_A, "tag": "x"},
                                              {"resource_id": oracle.SERVER_A, "tag": "y"},
                                              {"resource_id": oracle.SERVER_B, "tag": "y"}])
    demo = {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.26"}

    def names(query):
        got = client.get(f"/v2.1/servers?{query}", headers=demo)
        assert got.status_code == 200, got.text
        return sorted(s["name"] for s in got.json["servers"])

    assert names("tags=x,y") == ["srv-a"]
    assert names("tags-any=x,y") == ["srv-a", "srv-b"]
    assert names("not-tags=x,y") == ["srv-b"]
    assert names("not-tags-any=x") == ["srv-b"]


_DEMO = {"X-Auth-Token": "demo:demo"}
_BOOL_REFUSAL = ("Unrecognized value '{}', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', "
                 "'on', 't', 'true', 'y', 'yes'")


# Answers of the live Nova 34.0.0 servers API (token, version, query) → (status, message or ids).
@pytest.mark.parametrize(("token", "version", "query", "status", "message"), [
    ("demo:demo", "2.1", "metadata=x", 200, None),  # not a filter project users have: dropped
    ("demo:demo", "2.1", "_x=1", 200, None),
    ("admin:admin", "2.75", "metadata=x", 400, "Invalid filter field: metadata."),
    ("admin:admin", "2.1", "_x=1", 400, "Invalid filter field: _x."),
    ("demo:demo", "2.1", "marker=nope", 400, "marker [nope] not found"),
    ("demo:demo", "2.1", "sort_dir=up", 400,
     "Invalid input received: Unknown sort direction, must be 'desc' or 'asc'"),
    # an address no server has: the empty list comes before the directions are looked at
    ("demo:demo", "2.96", "ip6=%3A%3A9&sort_dir=bogus", 200, None),
    ("demo:demo", "2.1", "ip=%5E8%5C.&sort_dir=up", 200, None),
    ("demo:demo", "2.75", "sort_key=display_name&sort_dir=asc&sort_dir=desc", 400,
     "Invalid input received: Sort direction size exceeds sort key size"),
    ("demo:demo", "2.1", "all_tenants=bogus", 400, _BOOL_REFUSAL.format("bogus")),
    ("admin:admin", "2.75", "all_tenants=bogus", 400, _BOOL_REFUSAL.format("bogus")),
    ("demo:demo", "2.75", "locked=maybe", 400, _BOOL_REFUSAL.format("maybe")),
    ("demo:demo", "2.1", "locked=maybe", 200, None),
    ("demo:demo", "2.1", "changes-since=nope", 400,
     "Invalid input for query parameters changes-since. Value: nope. 'nope' is not a 'date-time'"),
    ("demo:demo", "2.75", "changes-since=2026-01-02T00:00:00Z&changes-before=2026-01-01T00:00:00Z", 400,
     "The value of changes-since must be less than or equal to changes-before."),
    ("demo:demo", "2.1", "limit=-1", 400,
     "Invalid input for query parameters limit. Value: -1. '-1' does not match '^[0-9]*$'"),
])
def test_refusals_as_nova_words_them(client, cloud, token, version, query, status, message):
    got = client.get(f"/v2.1/servers?{query}", headers={"X-Auth-Token": token,
                                                         "OpenStack-API-Version": f"compute {version}"})
    assert got.status_code == status, got.text
    if message is not None:
        assert next(iter(got.json.values()))["message"] == message


def test_show_refuses_unknown_parameters_from_2_102(client, cloud):
    path = f"/v2.1/servers/{oracle.SERVER_A}?foo=1"
    assert client.get(path, headers=user("demo", version="2.101")).status_code == 200
    got = client.get(path, headers=user("demo", version="2.102"))
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, "Additional properties are not allowed ('foo' was unexpected)")
