"""/servers/{id}/metadata (+ /{key}): answers recorded from the live Nova 34.0.0 servers API,
replayed in the same order on a server built through compute/."""

from __future__ import annotations

import pytest

from openkeel_compute.compute.instances import cas, locks
from openkeel_compute.db import api as db_api
from tests.api.servers import oracle_state as oracle

S = oracle.SERVER_A
BASE = f"/v2.1/servers/{S}/metadata"
DEMO = {"X-Auth-Token": "demo:demo"}


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    return engine


def test_the_recorded_sequence(client, engine):
    steps = [
        ("POST", "", {"metadata": {"a": "1", "b": "2"}}, 200, {"metadata": {"a": "1", "b": "2"}}),
        ("PUT", "", {"metadata": {"c": "3"}}, 200, {"metadata": {"c": "3"}}),
        ("GET", "", None, 200, {"metadata": {"c": "3"}}),
        ("GET", "/a", None, 404, {"itemNotFound": {"code": 404, "message": "Metadata item was not found"}}),
        ("PUT", "/a", {"meta": {"b": "1"}}, 400,
         {"badRequest": {"code": 400, "message": "Request body and URI mismatch"}}),
        ("PUT", "/a", {"meta": {"a": "9"}}, 200, {"meta": {"a": "9"}}),
        ("DELETE", "/zz", None, 404, {"itemNotFound": {"code": 404, "message": "Metadata item was not found"}}),
        ("POST", "", {"metadata": {"bad/key": "1"}}, 400, {"badRequest": {"code": 400, "message": (
            "Invalid input for field/attribute metadata. Value: {'bad/key': '1'}. 'bad/key' does not match any "
            "of the regexes: '^[a-zA-Z0-9-_:. ]{1,255}$'")}}),
        ("PUT", "", {"metadata": {f"k{i}": "v" for i in range(129)}}, 403,
         {"forbidden": {"code": 403, "message": "Maximum number of metadata items exceeds 128"}}),
        ("PUT", "/a", {"meta": {"a": "1", "b": "2"}}, 400, {"badRequest": {"code": 400, "message": (
            "Invalid input for field/attribute meta. Value: {'a': '1', 'b': '2'}. {'a': '1', 'b': '2'} has too "
            "many properties")}}),
        ("GET", "", None, 200, {"metadata": {"c": "3", "a": "9"}}),
    ]
    for method, path, body, status, answer in steps:
        got = client.request(method, BASE + path, headers=DEMO, json_body=body)
        assert (got.status_code, got.json) == (status, answer), (method, path)
    assert list(client.get(BASE, headers=DEMO).json["metadata"]) == ["c", "a"]
    got = client.get(BASE, headers={"X-Auth-Token": "other:other"})
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Instance {S} could not be found.")


def test_a_changed_value_keeps_its_place_and_delete_removes(client, engine):
    client.put(BASE, headers=DEMO, json_body={"metadata": {"x": "1", "y": "2"}})
    assert client.put(f"{BASE}/x", headers=DEMO, json_body={"meta": {"x": "3"}}).status_code == 200
    assert list(client.get(BASE, headers=DEMO).json["metadata"].items()) == [("x", "3"), ("y", "2")]
    got = client.delete(f"{BASE}/x", headers=DEMO)
    assert (got.status_code, got.content) == (204, b"")
    assert client.get(f"{BASE}/y", headers=DEMO).json == {"meta": {"y": "2"}}
    assert client.get(BASE, headers=DEMO).json == {"metadata": {"y": "2"}}
    # the server body shows the same
    assert client.get(f"/v2.1/servers/{S}", headers=DEMO).json["server"]["metadata"] == {"y": "2"}


def test_changes_need_an_unlocked_server_in_a_settled_state(client, engine):
    with db_api.transaction(engine) as conn:
        locks.lock(conn, S, oracle.ADMIN)
    got = client.post(BASE, headers=DEMO, json_body={"metadata": {"a": "1"}})
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (409, f"Instance {S} is locked")
    with db_api.transaction(engine) as conn:
        locks.unlock(conn, S, oracle.ADMIN)
        cas.save_state(conn, S, vm_state="error")
    got = client.put(BASE, headers=DEMO, json_body={"metadata": {"a": "1"}})
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (
        409, f"Cannot 'update metadata' instance {S} while it is in vm_state error")
