"""Regression tests for the differences tools/flavor_api_differential.py found between OpenKeel and
Nova 34.0.0. Every expectation was observed on the oracle (../shared/nova-oracle/run-oracle.sh,
2026-11-29) with the same requests.

The in-process client puts its path in PATH_INFO as given; a real WSGI server puts the
percent-decoded path bytes there read as Latin-1 (PEP 3333), so non-ASCII paths are written here
in that form ("caf\\u00c3\\u00a9" is what a server makes of /flavors/caf%C3%A9).
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import admin, user


def _create(client, flavor_id: str, *, public: bool = True) -> None:
    body = {"flavor": {"name": flavor_id, "id": flavor_id, "ram": 1, "vcpus": 1, "disk": 0,
                       "os-flavor-access:is_public": public}}
    assert client.post("/v2.1/flavors", headers=admin(), json_body=body).status_code == 200


@pytest.fixture
def flavors(client):
    _create(client, "m-priv", public=False)
    _create(client, "m-pub")
    _create(client, "z-pub")
    return client


def _ids(result) -> list[str]:
    return [f["id"] for f in result.json["flavors"]]


# A private flavor is not a valid marker for a project it was not shared with (Nova looks the
# marker up with the caller's visibility): 400, where OpenKeel used to page on from it.
def test_a_marker_the_caller_cannot_see_is_not_found(flavors):
    got = flavors.get("/v2.1/flavors?marker=m-priv", headers=user("other", "other"))
    assert got.status_code == 400
    assert got.header("Content-Type") == "application/json; charset=UTF-8"
    assert got.json == {"badRequest": {"code": 400, "message": "marker [m-priv] not found"}}
    got = flavors.get("/v2.1/flavors/detail?marker=m-priv", headers=user("demo", "demo"))
    assert got.status_code == 400
    assert got.json == {"badRequest": {"code": 400, "message": "marker [m-priv] not found"}}


def test_a_marker_is_found_by_admins_and_by_granted_projects(flavors):
    assert _ids(flavors.get("/v2.1/flavors?marker=m-priv", headers=admin())) == ["m-pub", "z-pub"]
    grant = {"addTenantAccess": {"tenant": "demo"}}
    assert flavors.post("/v2.1/flavors/m-priv/action", headers=admin(), json_body=grant).status_code == 200
    got = flavors.get("/v2.1/flavors/detail?marker=m-priv", headers=user("demo", "demo"))
    assert got.status_code == 200
    assert _ids(got) == ["m-pub", "z-pub"]
    # projects it was not shared with still may not page from it
    assert flavors.get("/v2.1/flavors?marker=m-priv", headers=user("other", "other")).status_code == 400


# Nova never re-decodes the (Latin-1) path as UTF-8: a non-ASCII flavor id or extra-spec key
# appears in its 404 messages as the UTF-8 bytes read one by one. Such ids and keys cannot exist
# (their schemas are ASCII), so only these messages are concerned.
@pytest.mark.parametrize(("method", "path", "message"), [
    ("GET", "/v2.1/flavors/caf\u00c3\u00a9", "Flavor caf\u00c3\u00a9 could not be found."),
    ("DELETE", "/v2.1/flavors/caf\u00c3\u00a9", "Flavor caf\u00c3\u00a9 could not be found."),
    ("GET", "/v2.1/flavors/\u00c3\u00bcn\u00c3\u00af/os-extra_specs",
     "Flavor \u00c3\u00bcn\u00c3\u00af could not be found."),
    ("GET", "/v2.1/flavors/\u00c3\u00bcn\u00c3\u00af/os-flavor-access",
     "Flavor \u00c3\u00bcn\u00c3\u00af could not be found."),
    ("GET", "/v2.1/flavors/m-pub/os-extra_specs/\u00d0\u00ba\u00d0\u00bb",
     "Flavor m-pub has no extra specs with key \u00d0\u00ba\u00d0\u00bb."),
    ("DELETE", "/v2.1/flavors/m-pub/os-extra_specs/caf\u00c3\u00a9",
     "Flavor m-pub has no extra specs with key caf\u00c3\u00a9."),
])
def test_non_ascii_path_parameters_read_as_nova_reads_them(flavors, method, path, message):
    got = flavors.request(method, path, headers=admin("2.86"))
    assert got.status_code == 404
    assert got.json == {"itemNotFound": {"code": 404, "message": message}}


def test_non_ascii_id_in_an_action_and_an_update(flavors):
    got = flavors.post("/v2.1/flavors/caf\u00c3\u00a9/action", headers=admin("2.86"),
                       json_body={"addTenantAccess": {"tenant": "demo"}})
    assert got.status_code == 404
    assert got.json == {"itemNotFound": {"code": 404, "message": "Flavor caf\u00c3\u00a9 could not be found."}}
    got = flavors.put("/v2.1/flavors/caf\u00c3\u00a9", headers=admin("2.104"),
                      json_body={"flavor": {"description": "x"}})
    assert got.status_code == 404
    assert got.json == {"itemNotFound": {"code": 404, "message": "Flavor caf\u00c3\u00a9 could not be found."}}


# Nova lists a flavor's access in project-id order (its rows are read through the
# (flavor_id, project_id) unique index), not in the order they were granted: the action answers
# and the os-flavor-access list alike. Sequence and answers as observed on the oracle.
def test_flavor_access_lists_come_in_project_id_order(client):
    _create(client, "acc", public=False)

    def entries(*projects):
        return {"flavor_access": [{"flavor_id": "acc", "tenant_id": p} for p in projects]}

    def act(action, tenant):
        got = client.post("/v2.1/flavors/acc/action", headers=admin("2.61"), json_body={action: {"tenant": tenant}})
        assert got.status_code == 200
        return got.json

    assert act("addTenantAccess", "zeta") == entries("zeta")
    assert act("addTenantAccess", "alpha") == entries("alpha", "zeta")
    assert act("addTenantAccess", "Mid") == entries("Mid", "alpha", "zeta")
    assert act("addTenantAccess", "0num") == entries("0num", "Mid", "alpha", "zeta")
    assert act("addTenantAccess", "beta") == entries("0num", "Mid", "alpha", "beta", "zeta")
    assert act("removeTenantAccess", "alpha") == entries("0num", "Mid", "beta", "zeta")
    got = client.get("/v2.1/flavors/acc/os-flavor-access", headers=admin("2.61"))
    assert got.json == entries("0num", "Mid", "beta", "zeta")


# A repeated query parameter: the page is cut and sorted with its last value, but Nova builds the
# next link from all (name, value) pairs sorted, the last per name winning, so the link keeps the
# greatest value of each; the marker is replaced in place. Answers observed on the oracle.
@pytest.mark.parametrize(("query", "page", "link_query"), [
    ("/flavors?limit=2&limit=1", ["a1"], "limit=2&marker=a1"),
    ("/flavors/detail?sort_dir=desc&sort_dir=asc&limit=1&minRam=0&minRam=1", ["a1"],
     "limit=1&minRam=1&sort_dir=desc&marker=a1"),
    ("/flavors?limit=1&marker=a2&marker=a1", ["a2"], "limit=1&marker=a2"),
])
def test_next_link_of_repeated_parameters(client, query, page, link_query):
    for flavor_id in ("a1", "a2", "a3"):
        _create(client, flavor_id)
    got = client.get("/v2.1" + query, headers=admin())
    assert got.status_code == 200
    assert _ids(got) == page
    collection = query.split("?", 1)[0]
    assert got.json["flavors_links"] == [
        {"rel": "next", "href": f"http://{client.host}/v2.1{collection}?{link_query}"}]


# Paging from a marker with any sort key follows Nova's criteria (oslo.db's paginate_query): a
# NULL marker value adds no criterion (only the later keys count), NULL rows are never "beyond" a
# value, and boolean keys page as integers (they were a 500 here). p2 alone has an updated_at and
# a description; q4 is private. Sequence and answers observed on the oracle.
@pytest.mark.parametrize(("query", "page"), [
    ("sort_key=updated_at&marker=p3", []),
    ("sort_key=updated_at&marker=p1", ["p3", "p2"]),
    ("sort_key=updated_at&marker=p2", []),
    ("sort_key=updated_at&sort_dir=desc&marker=p2", []),
    ("sort_key=description&sort_dir=desc&marker=p2", []),
    ("sort_key=description&marker=p1", ["p3", "p2"]),
    ("sort_key=is_public&marker=p1&is_public=none", ["p2", "p3"]),
    ("sort_key=is_public&sort_dir=desc&marker=p2&is_public=none", ["p1", "q4"]),
    ("sort_key=disabled&marker=p2", ["p3"]),
    ("sort_key=vcpu_weight&marker=p2", ["p3"]),
])
def test_paging_from_a_marker_with_any_sort_key(client, query, page):
    for flavor_id in ("p1", "p2", "p3"):
        _create(client, flavor_id)
    _create(client, "q4", public=False)
    got = client.put("/v2.1/flavors/p2", headers=admin("2.55"), json_body={"flavor": {"description": "d"}})
    assert got.status_code == 200
    got = client.get(f"/v2.1/flavors?{query}", headers=admin("2.55"))
    assert got.status_code == 200
    assert _ids(got) == page


# The legacy /v2 endpoint (no microversions) serves os-extra_specs and os-flavor-access too, where
# we answered 404 "The resource could not be found.". Sequence and answers observed on the oracle.
def test_legacy_v2_serves_extra_specs_and_flavor_access(client):
    _create(client, "p1")
    _create(client, "q4", public=False)
    token = {"X-Auth-Token": "admin:admin"}

    def call(method, path, body=None):
        got = client.request(method, "/v2" + path, headers=token, json_body=body)
        assert got.header("OpenStack-API-Version") is None
        assert got.header("X-OpenStack-Nova-API-Version") is None
        return got.status_code, (got.json if got.content else None)

    assert call("GET", "/flavors/p1/os-extra_specs") == (200, {"extra_specs": {}})
    # no extra-spec validation before 2.86; numbers echoed as numbers, stored as strings
    assert call("POST", "/flavors/p1/os-extra_specs", {"extra_specs": {"hw:cpu_policy": "bogus", "n": 5}}) == (
        200, {"extra_specs": {"hw:cpu_policy": "bogus", "n": 5}})
    assert call("PUT", "/flavors/p1/os-extra_specs/k", {"k": "v", "x": 1}) == (
        400, {"badRequest": {"code": 400, "message": "{'k': 'v', 'x': 1} has too many properties"}})
    assert call("PUT", "/flavors/p1/os-extra_specs/k", {"k": "v"}) == (200, {"k": "v"})
    assert call("GET", "/flavors/p1/os-extra_specs/k") == (200, {"k": "v"})
    assert call("GET", "/flavors/p1/os-extra_specs?foo=1") == (
        200, {"extra_specs": {"hw:cpu_policy": "bogus", "k": "v", "n": "5"}})
    assert call("DELETE", "/flavors/p1/os-extra_specs/k") == (200, None)
    assert call("GET", "/flavors/q4/os-flavor-access") == (200, {"flavor_access": []})
    assert call("GET", "/flavors/p1/os-flavor-access") == (
        404, {"itemNotFound": {"code": 404, "message": "Access list not available for public flavors."}})


# Setting the description a flavor already has leaves updated_at alone (Nova's ORM issues no
# UPDATE), which shows in sort_key=updated_at. Sequence and orders observed on the oracle.
def test_setting_the_same_description_does_not_touch_updated_at(client):
    for flavor_id in ("u1", "u2", "u3"):
        _create(client, flavor_id)
    for flavor_id, description in (("u3", "x"), ("u2", None), ("u1", "y"), ("u3", "x")):
        time.sleep(0.002)  # distinct timestamps
        got = client.put(f"/v2.1/flavors/{flavor_id}", headers=admin("2.55"),
                         json_body={"flavor": {"description": description}})
        assert got.status_code == 200
        assert got.json["flavor"]["description"] == description
    assert _ids(client.get("/v2.1/flavors?sort_key=updated_at", headers=admin())) == ["u2", "u3", "u1"]
    assert _ids(client.get("/v2.1/flavors?sort_key=updated_at&sort_dir=desc", headers=admin())) == [
        "u1", "u3", "u2"]
