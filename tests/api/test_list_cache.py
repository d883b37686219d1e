"""Flavor lists kept as rendered pages: never stale, and byte for byte what the code renders uncached.

The freshness test runs two replicas of the API (one with two workers) on one database and
interleaves writes through either with reads through both: a read that starts after a write was
answered must show it. The database's own triggers raise the generation, so a change made by
SQL outside the API shows at once as well.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading

import pytest
import sqlalchemy as sa

from openkeel_compute.api.page_cache import PageCache
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.api.helpers import call_api
from tests.conftest import admin, user
from tests.databases import throwaway_database
from tests.serve.helpers import free_port, running

DETAIL = "/v2.1/flavors/detail?limit=1000"


def _create(client, flavor_id, public=True):
    body = {"flavor": {"name": f"n-{flavor_id}", "ram": 64, "vcpus": 1, "disk": 1, "id": flavor_id,
                       "os-flavor-access:is_public": public}}
    assert client.post("/v2.1/flavors", headers=admin(), json_body=body).status_code == 200


READS = [
    ("/v2.1/flavors", admin("2.1")),
    (DETAIL, admin("2.61")),
    ("/v2.1/flavors/detail", admin("2.55")),
    ("/v2.1/flavors/detail?is_public=none&sort_key=memory_mb&sort_dir=desc", admin("2.75")),
    ("/v2.1/flavors?limit=2", admin("2.1")),
    ("/v2.1/flavors?limit=2&marker=b", admin("2.1")),
    ("/v2.1/flavors/detail", user("pa", version="2.61")),
    ("/v2.1/flavors/detail", user("pb", version="2.61")),
    ("/v2.1/flavors?minRam=100", user("pa")),
]


def _headers(result):
    return [(k.lower(), v) for k, v in result.header_list if not k.lower().endswith("request-id")]


def test_a_kept_page_is_what_the_code_renders_without_keeping_it(client, conf, monkeypatch):
    for flavor_id, public in (("a", True), ("b", False), ("c", True), ("d", True)):
        _create(client, flavor_id, public)
    client.post("/v2.1/flavors/b/action", headers=admin(), json_body={"addTenantAccess": {"tenant": "pa"}})
    client.post("/v2.1/flavors/c/os-extra_specs", headers=admin("2.86"),
                json_body={"extra_specs": {"hw:cpu_policy": "dedicated"}})
    with db_api.transaction(db_api.get_engine(conf)) as conn:
        conn.execute(sa.update(models.FLAVORS).where(models.FLAVORS.c.flavorid == "d").values(memory_mb=512))
    first = {(p, json.dumps(h)): client.get(p, headers=h) for p, h in READS}
    again = {(p, json.dumps(h)): client.get(p, headers=h) for p, h in READS}
    # the same requests once more with nothing kept: a cache that never keeps a page
    monkeypatch.setattr(PageCache, "get", lambda self, key, generation: None)
    uncached = {(p, json.dumps(h)): client.get(p, headers=h) for p, h in READS}
    for key, got in uncached.items():
        assert got.status_code == 200, got.text
        assert first[key].content == again[key].content == got.content, key
        assert _headers(first[key]) == _headers(again[key]) == _headers(got)
    assert [f["id"] for f in uncached[(READS[7][0], json.dumps(READS[7][1]))].json["flavors"]] == ["a", "c", "d"]


def test_writes_through_the_api_and_sql_outside_it_show_at_once(client, conf):
    _create(client, "a")
    def ids(headers=None):
        got = client.get(DETAIL, headers=headers or admin("2.61"))
        return [(f["id"], f.get("extra_specs")) for f in got.json["flavors"]]

    assert ids() == [("a", {})]
    assert ids() == [("a", {})]  # kept
    _create(client, "b")
    assert ids() == [("a", {}), ("b", {})]
    client.post("/v2.1/flavors/b/os-extra_specs", headers=admin("2.86"),
                json_body={"extra_specs": {"hw:cpu_policy": "dedicated"}})
    assert ids() == [("a", {}), ("b", {"hw:cpu_policy": "dedicated"})]
    client.delete("/v2.1/flavors/b/os-extra_specs/hw:cpu_policy", headers=admin("2.86"))
    assert ids() == [("a", {}), ("b", {})]
    engine = db_api.get_engine(conf)
    with db_api.transaction(engine) as conn:  # an operator disables a flavor (Nova has no API for it)
        conn.execute(sa.update(models.FLAVORS).where(models.FLAVORS.c.flavorid == "a").values(disabled=True))
    assert ids(user("p", version="2.61")) == [("b", {})]
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.FLAVORS).values(disabled=False))
    assert ids(user("p", version="2.61")) == [("a", {}), ("b", {})]
    client.delete("/v2.1/flavors/a", headers=admin())
    assert ids() == [("b", {})]


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_replicas_and_workers_never_answer_a_page_older_than_the_last_answered_write(tmp_path, engine):
    with throwaway_database(engine, tmp_path) as url:
        db = db_api.make_engine(url)
        migration.sync(db)
        db.dispose()
        conf = tmp_path / "api.conf"
        conf.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\n[api]\nauth_strategy = noauth2\n"
                        f"[database]\nconnection = {url}\n")
        cli = [sys.executable, "-m", "openkeel_compute.cmd.main", "serve", "--config-file", str(conf)]
        ports = [free_port(), free_port()]
        with contextlib.ExitStack() as stack:
            stack.enter_context(running(cli + ["--port", str(ports[0]), "--workers", "2"], ports[0]))
            stack.enter_context(running(cli + ["--port", str(ports[1]), "--workers", "1"], ports[1]))
            _interleave(ports)


def _interleave(ports, steps: int = 12, readers: int = 3):
    """A writer goes through the replicas in turn: step k creates flavor k with a spec, and deletes
    flavor k-3. Readers ask both replicas for the detail list all the while and check it against
    the last step answered before their request began."""
    answered, deleting = [0], [0]
    failures: list[str] = []
    stop = threading.Event()

    def check(page, done, port, deleting=None):
        """``done``: the last step answered before the read began; ``deleting``: the last step whose
        delete had begun when the answer came (a read may overlap a later step's delete)."""
        shown = {f["id"]: f["extra_specs"] for f in page["flavors"]}
        for k in range(1, done + 1):
            fid = f"fresh-{k:03d}"
            if k <= done - 3:
                if fid in shown:
                    failures.append(f"port {port}: {fid} deleted at step {k + 3} <= {done} still listed")
            elif deleting is not None and k <= deleting - 3:
                # deleted while this read ran: gone, or (a read of several statements) listed with
                # its extra specs already gone, as without any kept page
                if shown.get(fid, {}) not in ({}, {"hw:cpu_policy": "dedicated", "step": str(k)}):
                    failures.append(f"port {port}: {fid} being deleted shows {shown.get(fid)!r}")
            elif shown.get(fid) != {"hw:cpu_policy": "dedicated", "step": str(k)}:
                failures.append(f"port {port}: after step {done}, {fid} shows {shown.get(fid)!r}")

    def reader(i):
        n = 0
        while not stop.is_set():
            port = ports[(i + n) % len(ports)]
            n += 1
            done = answered[0]
            try:
                page = call_api(port, "GET", DETAIL)
                check(page, done, port, deleting[0])
            except Exception as exc:  # noqa: BLE001 - reported by the test below
                failures.append(f"port {port}: {exc!r}")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    for t in threads:
        t.start()
    try:
        for k in range(1, steps + 1):
            port = ports[k % len(ports)]
            fid = f"fresh-{k:03d}"
            call_api(port, "POST", "/v2.1/flavors", {"flavor": {"name": fid, "ram": 64, "vcpus": 1, "disk": 1,
                                                             "id": fid}}, version="2.1")
            call_api(ports[(k + 1) % len(ports)], "POST", f"/v2.1/flavors/{fid}/os-extra_specs",
                  {"extra_specs": {"hw:cpu_policy": "dedicated", "step": str(k)}}, version="2.86")
            if k > 3:
                deleting[0] = k
                call_api(port, "DELETE", f"/v2.1/flavors/fresh-{k - 3:03d}", version="2.1")
            answered[0] = k
            for p in ports:  # every replica, right after the write: no waiting for anything
                check(call_api(p, "GET", DETAIL), k, f"{p} (writer)")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:5]
    assert answered[0] == steps
