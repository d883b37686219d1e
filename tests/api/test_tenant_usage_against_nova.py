"""os-simple-tenant-usage answers as the live Nova 34.0.0 servers API does, for the same servers.

Servers are booted on a fresh Nova servers oracle (two projects; one stopped, one deleted), then the
same servers (uuids, names, projects, flavors, states, launch and termination times as Nova reports
them) are written into OpenKeel's database. Both are asked the same questions over a period that
ended before the questions, so hours and totals are the same numbers on both sides; only a running
server's uptime (seconds until now) and the links' host are normalised.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.model import states
from tests.api import oracles

IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
ADMIN = "admin:admin"
A, B = "ua:aaaa0001", "ub:bbbb0002"  # hex: Nova routes a project id in the URL only then
FLAVORS = {"1": ("m1.tiny", 512, 1, 1), "2": ("m1.small", 2048, 1, 20)}
SERVERS = [(A, "u1", "1"), (A, "u2", "2"), (B, "u3", "1"), (B, "u4", "2")]
FORMAT = "%Y-%m-%dT%H:%M:%S.%f"


def _nova(base, method, path, token, version="2.40", body=None):
    data = json.dumps(body).encode() if body is not None else None
    return oracles.ask_nova(base, method, "/v2.1" + path, token=token, version=version, body=data)


def _wait(base, server_id, token, status):
    for _ in range(200):
        answer = _nova(base, "GET", f"/servers/{server_id}", token)
        if (status is None and answer.status == 404) or (
                answer.status == 200 and answer.json["server"]["status"] == status):
            return
        time.sleep(0.1)
    raise AssertionError(f"server {server_id} never reached {status}")


@pytest.fixture(scope="module")
def period():
    """Both clouds' servers and the period (start, end) the questions are about."""
    with oracles.servers_oracle() as base:
        ids = {}
        for token, name, flavor in SERVERS:
            answer = _nova(base, "POST", "/servers", token, body={"server": {
                "name": name, "imageRef": IMAGE, "flavorRef": flavor, "networks": "none"}})
            assert answer.status == 202, answer.body
            ids[name] = answer.json["server"]["id"]
        for token, name, _ in SERVERS:
            _wait(base, ids[name], token, "ACTIVE")
        assert _nova(base, "POST", f"/servers/{ids['u2']}/action", A, body={"os-stop": None}).status == 202
        _wait(base, ids["u2"], A, "SHUTOFF")
        assert _nova(base, "DELETE", f"/servers/{ids['u4']}", B).status == 204
        _wait(base, ids["u4"], B, None)
        time.sleep(1.1)
        end = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        start = end - dt.timedelta(days=1)
        time.sleep(1.1)
        yield base, start.strftime(FORMAT), end.strftime(FORMAT)


def _copy_into_openkeel(conf, base, start, end):
    """The oracle's servers, as its usage report shows them, written into OpenKeel's database."""
    report = _nova(base, "GET", f"/os-simple-tenant-usage?detailed=1&start={start}&end={end}", ADMIN, "2.1")
    assert report.status == 200, report.body
    lines = [line for usage in report.json["tenant_usages"] for line in usage["server_usages"]]
    assert sorted(line["name"] for line in lines) == ["u1", "u2", "u3", "u4"]
    engine = db_api.get_engine(conf)
    with db_api.transaction(engine) as conn:
        for flavorid, (name, ram, vcpus, disk) in FLAVORS.items():
            catalog.create(conn, name=name, memory_mb=ram, vcpus=vcpus, root_gb=disk, flavorid=flavorid)
        for line in lines:
            flavorid = next(k for k, v in FLAVORS.items() if v[0] == line["flavor"])
            user = {"aaaa0001": "ua", "bbbb0002": "ub"}[line["tenant_id"]]
            store.create(conn, actor=Actor(user, line["tenant_id"]), flavor=catalog.get(conn, flavorid),
                         extra_specs={}, display_name=line["name"], uuid=line["instance_id"], image_ref=IMAGE)
            values = {"launched_at": dt.datetime.fromisoformat(line["started_at"]), "task_state": None,
                      "vm_state": line["state"], "power_state": states.power_state.RUNNING}
            if line["state"] == "terminated":
                values.update(vm_state=states.DELETED, deleted=models.INSTANCES.c.id,
                              terminated_at=dt.datetime.fromisoformat(line["ended_at"]),
                              deleted_at=dt.datetime.fromisoformat(line["ended_at"]))
            conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == line["instance_id"])
                         .values(**values))


def _normalised(answer: oracles.Answer, host: str):
    def walk(value):
        if isinstance(value, dict):
            out = {k: walk(v) for k, v in value.items()}
            if out.get("uptime") is not None and out.get("ended_at") is None:
                out["uptime"] = "<until now>"
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str):
            return value.replace(host, "<host>")
        return value

    status, _, body = answer.comparable()
    return status, walk(body)


def test_usage_of_the_same_servers_answers_as_nova(period, app, client, conf):
    base, start, end = period
    _copy_into_openkeel(conf, base, start, end)
    window = f"start={start}&end={end}"
    cases = [
        (f"/os-simple-tenant-usage?{window}", ADMIN, "2.1"),
        (f"/os-simple-tenant-usage?detailed=1&{window}", ADMIN, "2.1"),
        (f"/os-simple-tenant-usage?detailed=1&{window}&limit=1", ADMIN, "2.39"),  # no paging before 2.40
        (f"/os-simple-tenant-usage?detailed=1&{window}", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage?detailed=1&{window}&limit=2", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage?{window}&limit=3", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage?{window}&limit=0", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage?{window}&limit=9999", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage?{window}&marker=6a1d5f38-2b0e-4c56-9d8e-2f1f0b9c4e77", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage?{window}&limit=-1", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage?{window}&foo=1", ADMIN, "2.74"),
        (f"/os-simple-tenant-usage?{window}&foo=1", ADMIN, "2.75"),
        (f"/os-simple-tenant-usage?{window}", A, "2.1"),
        (f"/os-simple-tenant-usage/aaaa0001?{window}", A, "2.1"),
        (f"/os-simple-tenant-usage/bbbb0002?{window}", B, "2.40"),
        (f"/os-simple-tenant-usage/bbbb0002?{window}&limit=1", B, "2.40"),
        (f"/os-simple-tenant-usage/aaaa0001?{window}", B, "2.1"),
        (f"/os-simple-tenant-usage/aaaa0001?{window}", ADMIN, "2.1"),
        (f"/os-simple-tenant-usage/nobody?{window}", ADMIN, "2.40"),
        (f"/os-simple-tenant-usage/aaaa0001?start={end}&end={start}", A, "2.1"),
        (f"/os-simple-tenant-usage/aaaa0001?start={end}&end={end}", A, "2.1"),
        ("/os-simple-tenant-usage/aaaa0001?start=2026-12-01&end=2026-12-02", A, "2.1"),
        (f"/os-simple-tenant-usage/aaaa0001?start={start}&start=garbage&end={end}", A, "2.1"),
        (f"/os-simple-tenant-usage/aaaa0001?{window}&detailed=0", A, "2.75"),
        (f"/os-simple-tenant-usage/aaaa0001?start={start[:19]}&end={end[:10]}%20{end[11:]}", A, "2.1"),
    ]
    differences = []
    for path, token, version in cases:
        theirs = _normalised(_nova(base, "GET", path, token, version), base.split("//")[1])
        ours = _normalised(oracles.ask_openkeel(client, "GET", "/v2.1" + path, token=token, version=version),
                           client.host)
        if theirs != ours:
            differences.append((path, token, version, theirs, ours))
    assert differences == []


def test_pages_walked_by_their_next_links_answer_as_nova(period, app, client, conf):
    base, start, end = period
    _copy_into_openkeel(conf, base, start, end)
    for collection, token in (("/os-simple-tenant-usage", ADMIN), ("/os-simple-tenant-usage/aaaa0001", A)):
        path = f"{collection}?detailed=1&start={start}&end={end}&limit=1"
        pages = 0
        while path:
            theirs = _nova(base, "GET", path, token, "2.40")
            ours = oracles.ask_openkeel(client, "GET", "/v2.1" + path, token=token, version="2.40")
            assert _normalised(theirs, base.split("//")[1]) == _normalised(ours, client.host), path
            links = theirs.json.get("tenant_usages_links") or theirs.json.get("tenant_usage_links")
            path = links[0]["href"].split("/v2.1", 1)[1] if links else None
            pages += 1
        assert pages >= 3
