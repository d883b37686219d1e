"""/servers/{id}/tags (+ /{tag}): answers recorded from the live Nova 34.0.0 servers API
(statuses, headers and messages), replayed on a server built through compute/."""

from __future__ import annotations

import pytest

from openkeel_compute.compute.instances import cas, deletion
from openkeel_compute.db import api as db_api
from tests.api.servers import oracle_state as oracle

S = oracle.SERVER_A
BASE = f"/v2.1/servers/{S}/tags"
DEMO = {"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.26"}


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


def test_one_tag_at_a_time(client, engine):
    assert client.get(BASE, headers=DEMO).json == {"tags": []}
    got = client.put(f"{BASE}/a", headers=DEMO)
    assert (got.status_code, got.content, got.header("Location"), got.header("Content-Type")) == (
        201, b"", f"http://{client.host}/v2.1/servers/{S}/tags/a", "text/html; charset=UTF-8")
    got = client.put(f"{BASE}/a", headers=DEMO)
    assert (got.status_code, got.header("Location"), got.header("Content-Type")) == (
        204, None, "text/html; charset=UTF-8")
    got = client.get(f"{BASE}/a", headers=DEMO)
    assert (got.status_code, got.content, got.header("Content-Type")) == (204, b"", "application/json")
    got = client.get(f"{BASE}/zz", headers=DEMO)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Server {S} has no tag 'zz'")
    got = client.delete(f"{BASE}/zz", headers=DEMO)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Instance {S} has no tag 'zz'")
    got = client.put(f"{BASE}/a,b", headers=DEMO)  # PATH_INFO as a server decodes it
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, ("Tag 'a,b' is invalid. It must be a non empty string without characters '/' and ','. Validation "
             "error message: 'a,b' does not match '^[^,/]*$'"))
    got = client.put(f"{BASE}/x", headers=DEMO, json_body={})
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, "{} is not of type 'null'")
    assert client.delete(f"{BASE}/a", headers=DEMO).status_code == 204
    assert client.get(BASE, headers=DEMO).json == {"tags": []}


def test_all_tags_at_once(client, engine):
    got = client.put(BASE, headers=DEMO, json_body={"tags": ["b", "a", "b"]})
    assert (got.status_code, got.json) == (200, {"tags": ["a", "b"]})
    assert client.get(BASE, headers=DEMO).json == {"tags": ["a", "b"]}
    got = client.delete(BASE, headers=DEMO)
    assert (got.status_code, got.content) == (204, b"")
    assert client.get(BASE, headers=DEMO).json == {"tags": []}


def test_who_and_when(client, engine):
    got = client.get(BASE, headers={"X-Auth-Token": "other:other", "OpenStack-API-Version": "compute 2.26"})
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:os-server-tags:index to be performed.")
    got = client.get(f"/v2.1/servers/{oracle.IMAGE}/tags", headers=DEMO)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"Instance {oracle.IMAGE} has no mapping to a cell.")
    got = client.get(BASE, headers={"X-Auth-Token": "demo:demo", "OpenStack-API-Version": "compute 2.25"})
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, "The resource could not be found.")
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, S, vm_state="error")
    got = client.put(f"{BASE}/a", headers=DEMO)
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (
        409, f"Cannot 'update tag' instance {S} while it is in vm_state error")
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, S)
    got = client.get(BASE, headers=DEMO)
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Instance {S} could not be found.")


def test_at_most_fifty(client, engine):
    assert client.put(BASE, headers=DEMO, json_body={"tags": [f"t{i}" for i in range(50)]}).status_code == 200
    got = client.put(f"{BASE}/one-more", headers=DEMO)
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, "The number of tags exceeded the per-server limit 50")



@pytest.mark.parametrize("tag", ["é", "ü日"])
def test_a_non_ascii_tags_location_carries_the_tags_bytes(app, engine, tag):
    # Nova 34.0.0 (live servers oracle, read with a raw socket) answered PUT .../tags/%C3%A9 with
    # "Location: http://HOST/v2.1/servers/ID/tags/\xc3\xa9": the tag's UTF-8 bytes as they came, once.
    from openkeel_compute.wsgi import for_granian
    from tests.wsgi_client import Client

    def location_bytes(client, name, encoding):
        got = client.put(f"{BASE}/{name}".encode().decode("latin-1"), headers=DEMO)  # PATH_INFO as served
        assert got.status_code == 201, got.text
        return got.header("Location").encode(encoding)

    # a PEP 3333 server (gunicorn; Nova's) writes each character of a header value as one byte
    assert location_bytes(Client(app), tag, "latin-1") == f"http://127.0.0.1:18774{BASE}/{tag}".encode()
    # granian writes a header value's UTF-8: `serve` gives it the app through for_granian
    assert location_bytes(Client(for_granian(app)), tag + "2", "utf-8") == \
        f"http://127.0.0.1:18774{BASE}/{tag}2".encode()
