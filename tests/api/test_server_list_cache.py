"""Server lists kept as rendered pages: never stale, and byte for byte what the code renders uncached.

Every transaction that writes a table the server lists read raises the servers generation right
before its COMMIT (db/generations.py), whoever writes: API handlers and the controller alike.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import sys
import threading
import types
import urllib.request

import pytest
import sqlalchemy as sa

from openkeel_compute.api.page_cache import PageCache
from openkeel_compute.api.views import servers as server_view
from openkeel_compute.compute.instances import (
    cas,
    deletion,
    instance_faults,
    instance_metadata,
    instance_sysmeta,
    locks,
    updates,
)
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import generations, migration, models
from openkeel_compute.model import states
from tests.api.helpers import call_api as list_call
from tests.api.servers import oracle_state as oracle
from tests.conftest import admin, user
from tests.databases import throwaway_database
from tests.serve.helpers import free_port, running
from tests.server_world import IMAGE, image_service

DEMO = "demo"


def _demo(version: str | None = None) -> dict:
    return user(DEMO, name="demo", version=version)


@pytest.fixture
def cloud(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_list_scenario(engine)
    with db_api.transaction(engine) as conn:
        instance_metadata.set_metadata(conn, oracle.SERVER_A, {"role": "web", "tier": "1"})
        conn.execute(sa.insert(models.TAGS), [{"resource_id": oracle.SERVER_A, "tag": "x"},
                                              {"resource_id": oracle.SERVER_B, "tag": "y"}])
        cas.save_state(conn, oracle.SERVER_B, vm_state=states.ERROR)
        instance_faults.add_fault(conn, oracle.SERVER_B, code=500, message="boom", details="trace")
        locks.lock(conn, oracle.SERVER_Z, Actor("admin", "admin", is_admin=True), reason="audit")
    return engine


READS = [
    ("/v2.1/servers", _demo()),
    ("/v2.1/servers/detail", _demo()),
    ("/v2.1/servers/detail", _demo("2.16")),
    ("/v2.1/servers/detail", _demo("2.47")),
    ("/v2.1/servers/detail", _demo("2.73")),
    ("/v2.1/servers/detail", _demo("2.98")),
    ("/v2.1/servers/detail", _demo("2.100")),
    ("/v2.1/0abc/servers/detail?all_tenants=1&limit=2", {"X-Auth-Token": "admin:0abc",
                                                         "OpenStack-API-Version": "compute 2.96"}),
    ("/v2.1/servers?limit=1", _demo()),
    (f"/v2.1/servers?limit=1&marker={oracle.SERVER_B}", _demo()),
    ("/v2.1/servers/detail?name=srv-", _demo("2.26")),
    ("/v2.1/servers/detail?tags=x", _demo("2.26")),
    ("/v2.1/servers/detail?flavor=priv-small", _demo("2.1")),
    ("/v2.1/servers/detail?status=ERROR", _demo("2.1")),
    ("/v2.1/servers/detail?sort_key=display_name&sort_dir=asc", _demo("2.75")),
    ("/v2.1/servers/detail?ip=192.168", _demo("2.1")),
    ("/v2.1/servers", admin()),
    ("/v2.1/servers/detail?all_tenants=1", admin("2.1")),
    ("/v2.1/servers/detail?all_tenants=1", admin("2.16")),
    ("/v2.1/servers/detail?all_tenants=1", admin("2.96")),
    ("/v2.1/servers/detail?all_tenants=1&project_id=demo", admin("2.73")),
    ("/v2.1/servers/detail?deleted=true&all_tenants=1", admin("2.96")),
    ("/v2.1/servers?all_tenants=1&sort_key=host", admin("2.1")),
    ("/v2.1/servers/detail?locked=true&all_tenants=1", admin("2.73")),
    ("/v2.1/servers/detail?changes-since=2026-12-01T09:55:09Z&all_tenants=1", admin("2.66")),
]


def _headers(result):
    return [(k.lower(), v) for k, v in result.header_list if not k.lower().endswith("request-id")]


def _counting_hits(monkeypatch) -> list:
    hits: list = []
    original = PageCache.get

    def get(self, key, generation):
        page = original(self, key, generation)
        if page is not None and key[0].startswith("servers"):
            hits.append(key)
        return page

    monkeypatch.setattr(PageCache, "get", get)
    return hits


def test_a_kept_server_page_is_what_the_code_renders_without_keeping_it(client, cloud, monkeypatch):
    hits = _counting_hits(monkeypatch)
    first = {(p, json.dumps(h)): client.get(p, headers=h) for p, h in READS}
    assert hits == []
    again = {(p, json.dumps(h)): client.get(p, headers=h) for p, h in READS}
    assert len(hits) == len(READS), "every page of the second round was a kept one"
    # the same requests once more with nothing kept: a cache that never keeps a page
    monkeypatch.setattr(PageCache, "get", lambda self, key, generation: None)
    uncached = {(p, json.dumps(h)): client.get(p, headers=h) for p, h in READS}
    for key, got in uncached.items():
        assert got.status_code == 200, (key, got.text)
        assert got.json["servers"], key
        assert first[key].content == again[key].content == got.content, key
        assert _headers(first[key]) == _headers(again[key]) == _headers(got)
    # the callers see different pages of the same URL
    assert uncached[READS[1][0], json.dumps(READS[1][1])].json != uncached[
        "/v2.1/servers/detail?all_tenants=1", json.dumps(admin("2.1"))].json


def test_a_caller_never_gets_a_page_kept_for_another(client, cloud):
    for _ in range(2):
        assert [s["name"] for s in client.get("/v2.1/servers", headers=_demo()).json["servers"]] == ["srv-b", "srv-a"]
        assert [s["name"] for s in client.get("/v2.1/servers", headers=user("other")).json["servers"]] == []
        assert [s["name"] for s in client.get("/v2.1/servers", headers=admin()).json["servers"]] == ["srv-z"]
        detail = client.get("/v2.1/servers/detail?all_tenants=1", headers=admin("2.16")).json["servers"]
        assert {s["name"]: s["fault"].get("details") for s in detail if "fault" in s} == {"srv-b": "trace"}
        demo = client.get("/v2.1/servers/detail", headers=_demo("2.16")).json["servers"]
        assert {s["name"]: s["fault"].get("details") for s in demo if "fault" in s} == {"srv-b": None}
        assert "OS-EXT-SRV-ATTR:host" not in demo[0]
    got = client.get("/v2.1/servers?all_tenants=1", headers=_demo())
    assert got.status_code == 403


def _names(client, headers=None, path="/v2.1/servers/detail"):
    got = client.get(path, headers=headers or _demo("2.26"))
    assert got.status_code == 200, got.text
    return {s["name"]: (s.get("metadata"), s.get("tags"), s.get("status")) for s in got.json["servers"]}


def test_writes_through_the_api_and_the_controller_show_at_once(client, cloud, monkeypatch):
    hits = _counting_hits(monkeypatch)
    engine = cloud
    before = _names(client)
    assert before == _names(client) and hits, "kept"
    assert before["srv-a"] == ({"role": "web", "tier": "1"}, ["x"], "ACTIVE")
    # API writes: rename, metadata, tags, lock
    assert client.put(f"/v2.1/servers/{oracle.SERVER_A}", headers=_demo(),
                      json_body={"server": {"name": "srv-a2"}}).status_code == 200
    assert set(_names(client)) == {"srv-a2", "srv-b"}
    assert client.post(f"/v2.1/servers/{oracle.SERVER_A}/metadata", headers=_demo(),
                       json_body={"metadata": {"tier": "2"}}).status_code == 200
    assert _names(client)["srv-a2"][0] == {"role": "web", "tier": "2"}
    assert client.put(f"/v2.1/servers/{oracle.SERVER_A}/tags/z", headers=_demo("2.26")).status_code == 201
    assert _names(client)["srv-a2"][1] == ["x", "z"]
    assert client.post(f"/v2.1/servers/{oracle.SERVER_A}/action", headers=_demo("2.73"),
                       json_body={"lock": {"locked_reason": "mine"}}).status_code == 202
    locked = client.get("/v2.1/servers/detail?locked=true", headers=_demo("2.73")).json["servers"]
    assert [(s["name"], s["locked_reason"]) for s in locked] == [("srv-a2", "mine")]
    # the controller's writes: a state it observed, the addresses, system metadata (2.98 image properties)
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, oracle.SERVER_B, vm_state=states.STOPPED, power_state=4)
    assert _names(client)["srv-b"][2] == "SHUTOFF"
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == oracle.SERVER_B)
                     .values(network_info=json.dumps({"pod": [{"version": 4, "addr": "10.244.0.9"}]})))
    brief = client.get("/v2.1/servers/detail", headers=_demo()).json["servers"]
    assert {s["name"]: s["addresses"] for s in brief}["srv-b"] == {"pod": [{"version": 4, "addr": "10.244.0.9"}]}
    with db_api.transaction(engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, oracle.SERVER_A, "image_os_distro", "cirros")
    detail = client.get("/v2.1/servers/detail", headers=_demo("2.98")).json["servers"]
    assert {s["name"]: s["image"]["properties"] for s in detail}["srv-a2"] == {
        "architecture": "x86_64", "os_distro": "cirros"}
    # a fault recorded, then the delete
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, oracle.SERVER_B, vm_state=states.ERROR)
        instance_faults.add_fault(conn, oracle.SERVER_B, code=400, message="later")
    detail = client.get("/v2.1/servers/detail", headers=_demo()).json["servers"]
    assert {s["name"]: s.get("fault", {}).get("message") for s in detail}["srv-b"] == "later"
    assert client.delete(f"/v2.1/servers/{oracle.SERVER_B}", headers=_demo()).status_code == 204
    with db_api.transaction(engine) as conn:  # the controller finishes the delete
        deletion.soft_delete(conn, oracle.SERVER_B)
    assert set(_names(client)) == {"srv-a2"}
    assert set(_names(client, path="/v2.1/servers")) == {"srv-a2"}


def test_the_state_of_a_servers_node_shows_at_once(client, cloud, monkeypatch):
    from openkeel_compute.controller import nodes

    hits = _counting_hits(monkeypatch)
    path = "/v2.1/servers/detail?all_tenants=1"
    with db_api.reader(cloud) as conn:
        host = conn.execute(sa.select(models.INSTANCES.c.host).where(
            models.INSTANCES.c.uuid == oracle.SERVER_A)).scalar_one()

    def status() -> str:
        shown = client.get(path, headers=admin("2.16")).json["servers"]
        return {s["id"]: s["host_status"] for s in shown}[oracle.SERVER_A]

    nodes.publish(cloud, {host: (None, True, False), "other": (None, True, False)})
    assert status() == status() == "UP" and hits, "kept"
    nodes.publish(cloud, {host: (None, False, False), "other": (None, True, False)})  # stopped reporting Ready
    assert status() == "UNKNOWN"
    nodes.publish(cloud, {"other": (None, True, False)})  # deleted from the cluster
    assert status() == ""


def test_a_flavor_change_shows_in_a_list_filtered_by_flavor(client, cloud):
    path = "/v2.1/servers?flavor=priv-small"
    assert {s["name"] for s in client.get(path, headers=_demo()).json["servers"]} == {"srv-a"}
    assert client.delete("/v2.1/flavors/priv-small", headers=admin()).status_code == 202
    assert client.get(path, headers=_demo()).json["servers"] == []


def test_a_failed_write_leaves_the_generation_and_a_committed_one_raises_it_once(cloud):
    engine = cloud
    with db_api.reader(engine) as conn:
        (start,) = generations.current(conn, ("servers",))
    with pytest.raises(RuntimeError), db_api.transaction(engine) as conn:
        updates.update_fields(conn, oracle.SERVER_A, {"display_name": "never"})
        raise RuntimeError("rolled back")
    with db_api.transaction(engine) as conn:  # many rows, one transaction: raised once
        for uuid in (oracle.SERVER_A, oracle.SERVER_B, oracle.SERVER_Z):
            updates.update_fields(conn, uuid, {"display_name": "again"})
            instance_metadata.set_metadata(conn, uuid, {"k": "v"})
    with db_api.transaction(engine) as conn:  # writes of other tables: no change
        conn.execute(sa.update(models.FLAVORS).values(description="d"))
    with db_api.reader(engine) as conn:
        assert generations.current(conn, ("servers",)) == (start + 1,)


def test_a_page_showing_the_current_time_is_never_kept(client, cloud, monkeypatch):
    """A server never updated shows the time of the request as ``updated``, as in Nova."""
    with db_api.transaction(cloud) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == oracle.SERVER_A)
                     .values(updated_at=None))
    clock = [dt.datetime(2027, 1, 1, 10, 0, 0, tzinfo=dt.UTC)]

    clock_module = types.SimpleNamespace(datetime=types.SimpleNamespace(now=lambda tz=None: clock[0]), UTC=dt.UTC)
    monkeypatch.setattr(server_view, "dt", clock_module)

    def updated():
        got = client.get("/v2.1/servers/detail", headers=_demo()).json["servers"]
        return {s["name"]: s["updated"] for s in got}["srv-a"]

    assert updated() == "2027-01-01T10:00:00Z"
    clock[0] = dt.datetime(2027, 1, 1, 10, 0, 5, tzinfo=dt.UTC)
    assert updated() == "2027-01-01T10:00:05Z"


# -- two replicas of the API, one with two workers, on one database -----------------------------------

# a range of 50 ports per pytest-xdist worker
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_replicas_and_workers_never_answer_a_server_page_older_than_the_last_answered_write(tmp_path, backend):
    with throwaway_database(backend, tmp_path) as url, image_service(tmp_path) as images_url:
        engine = db_api.make_engine(url)
        migration.sync(engine)
        conf = tmp_path / "api.conf"
        conf.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\n[api]\nauth_strategy = noauth2\n"
                        f"[database]\nconnection = {url}\n[glance]\napi_servers = {images_url}\n")
        cli = [sys.executable, "-m", "openkeel_compute.cmd.main", "serve", "--config-file", str(conf)]
        ports = [free_port(), free_port()]
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(running(cli + ["--port", str(ports[0]), "--workers", "2"], ports[0]))
                stack.enter_context(running(cli + ["--port", str(ports[1]), "--workers", "1"], ports[1]))
                _call(ports[0], "POST", "/v2.1/flavors", {"flavor": {"name": "m1", "ram": 64, "vcpus": 1,
                                                                     "disk": 1, "id": "m1"}}, version="2.1")
                _interleave(ports, engine)
        finally:
            engine.dispose()


# The list freshness test's request, at the microversion of the server tags.
_call = functools.partial(list_call, version="2.26")


def _controller_starts(engine, uuid: str) -> None:
    """What the controller writes once the server runs."""
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, uuid, vm_state=states.ACTIVE, task_state=None, host="node-1", node="node-1",
                       power_state=states.power_state.RUNNING, launched_at=models.utcnow())


def _controller_deletes(engine, uuid: str) -> None:
    with db_api.transaction(engine) as conn:
        deletion.soft_delete(conn, uuid)


def _interleave(ports, engine, steps: int = 10, readers: int = 3):
    """Step k goes through the replicas in turn: it creates server k, the controller (this process) starts
    it, its metadata is set and it is renamed; server k-3 is deleted (API, then controller). Readers ask
    both replicas for the detail and the brief list all the while and check them against the last step
    answered before their request began."""
    answered, deleting = [0], [0]
    ids: dict[int, str] = {}
    failures: list[str] = []
    stop = threading.Event()

    def check(page, done, port, deleting=None, detail=True):
        shown = {s["name"]: s for s in page["servers"]}
        for k in range(1, done + 1):
            name = f"fresh-{k:03d}-renamed"
            if k <= done - 3:
                if name in shown and not (deleting is not None and k <= deleting - 3):
                    failures.append(f"port {port}: {name} deleted at step {k + 3} <= {done} still listed")
                continue
            if deleting is not None and k <= deleting - 3:
                continue  # deleted while this read ran: either way
            server = shown.get(name)
            if server is None:
                failures.append(f"port {port}: after step {done}, {name} is not listed: {sorted(shown)}")
            elif detail and (server["metadata"], server["status"]) != ({"step": str(k)}, "ACTIVE"):
                failures.append(f"port {port}: after step {done}, {name} shows {server['metadata']} "
                                f"{server['status']}")

    def reader(i):
        n = 0
        while not stop.is_set():
            port = ports[(i + n) % len(ports)]
            detail = n % 3 != 2
            n += 1
            done = answered[0]
            try:
                page = _call(port, "GET", "/v2.1/servers/detail" if detail else "/v2.1/servers")
                check(page, done, port, deleting[0], detail)
            except Exception as exc:  # noqa: BLE001 - reported by the test below
                failures.append(f"port {port}: {exc!r}")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    for t in threads:
        t.start()
    try:
        for k in range(1, steps + 1):
            a, b = ports[k % len(ports)], ports[(k + 1) % len(ports)]
            created = _call(a, "POST", "/v2.1/servers", {"server": {
                "name": f"fresh-{k:03d}", "imageRef": IMAGE, "flavorRef": "m1", "networks": "none"}}, version="2.37")
            ids[k] = created["server"]["id"]
            _controller_starts(engine, ids[k])
            _call(b, "PUT", f"/v2.1/servers/{ids[k]}/metadata", {"metadata": {"step": str(k)}})
            _call(a, "PUT", f"/v2.1/servers/{ids[k]}", {"server": {"name": f"fresh-{k:03d}-renamed"}})
            if k > 3:
                deleting[0] = k
                urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{b}/v2.1/servers/{ids[k - 3]}", method="DELETE",
                    headers={"X-Auth-Token": "admin:admin"}), timeout=60).close()
                _controller_deletes(engine, ids[k - 3])
            answered[0] = k
            for p in ports:  # every replica, right after the write: no waiting for anything
                check(_call(p, "GET", "/v2.1/servers/detail"), k, f"{p} (writer)")
                check(_call(p, "GET", "/v2.1/servers"), k, f"{p} (writer)", detail=False)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:5]
    assert answered[0] == steps
