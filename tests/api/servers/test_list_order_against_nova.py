"""GET /servers: filters × sort keys and directions × pages answer as the live Nova 34.0.0 does.

Servers are booted on the servers oracle (../shared/nova-oracle/run-servers-oracle.sh), some stopped
and paused, so that vm_state, task_state and power_state have ties; the same servers (uuids, names,
creation times, states, in the same order) are written into OpenKeel's database. Each query then
goes to both: status, the order of the servers, and the next page's marker must be equal. Nova's
checks come in its order: an unknown flavor or an address no server has answers an empty list
before the sort directions and the marker are looked at.
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.parse

import pytest
import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.model import states
from tests.api import oracles
from tests.api.servers import oracle_state

IMAGE = oracle_state.IMAGE
ADMIN = "admin:admin"
NAMES = ["o-a", "o-b", "o-c", "o-d", "o-e", "o-f"]
_VM_STATES = {"active": states.ACTIVE, "stopped": states.STOPPED, "paused": states.PAUSED}


def _wait(nova: str, uuid: str, status: str) -> dict:
    for _ in range(120):
        server = oracles.ask_nova(nova, "GET", f"/v2.1/servers/{uuid}", token=ADMIN, version="latest").json["server"]
        if server["status"] == status and server["OS-EXT-STS:task_state"] is None:
            return server
        time.sleep(0.25)
    raise AssertionError(f"{uuid} never reached {status}")


def _nova_cloud(nova: str) -> list[dict]:
    body = {"server": {"imageRef": IMAGE, "flavorRef": "1", "networks": "none"}}
    uuids = []
    for name in NAMES:
        body["server"]["name"] = name
        got = oracles.ask_nova(nova, "POST", "/v2.1/servers", token="demo:demo", version="2.37",
                               body=json.dumps(body).encode())
        assert got.status == 202, got.body
        uuids.append(got.json["server"]["id"])
        time.sleep(1.05)  # distinct creation seconds: the API shows times to the second
    for uuid in uuids:
        _wait(nova, uuid, "ACTIVE")
    for uuid, action in ((uuids[1], "os-stop"), (uuids[3], "os-stop"), (uuids[4], "pause")):
        got = oracles.ask_nova(nova, "POST", f"/v2.1/servers/{uuid}/action", token="demo:demo",
                               body=json.dumps({action: None}).encode())
        assert got.status == 202, got.body
    _wait(nova, uuids[1], "SHUTOFF")
    _wait(nova, uuids[3], "SHUTOFF")
    _wait(nova, uuids[4], "PAUSED")
    return [_wait(nova, uuid, _status) for uuid, _status in
            zip(uuids, ["ACTIVE", "SHUTOFF", "ACTIVE", "SHUTOFF", "PAUSED", "ACTIVE"], strict=True)]


def _our_cloud(engine, servers: list[dict]) -> None:
    for server in servers:
        oracle_state.boot(engine, uuid=server["id"], name=server["name"], created=server["created"],
                          updated=server["updated"], launched=server["OS-SRV-USG:launched_at"],
                          host=server["OS-EXT-SRV-ATTR:host"], flavor=("1", "m1.tiny", 512, True),
                          system_metadata=oracle_state.NO_INTERFACE)
        with db_api.transaction(engine) as conn:
            conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == server["id"]).values(
                vm_state=_VM_STATES[server["OS-EXT-STS:vm_state"]], power_state=server["OS-EXT-STS:power_state"]))


FILTERS = ["", "flavor=1", "flavor=nope", "status=ACTIVE", "name=o-", "ip=10.9.9.9", "vm_state=stopped"]
SORTS = ["", "sort_key=vm_state", "sort_key=task_state", "sort_key=power_state", "sort_key=display_name",
         "sort_key=vm_state&sort_dir=asc", "sort_key=task_state&sort_dir=desc", "sort_key=vm_state&sort_key=uuid",
         "sort_dir=sideways", "sort_key=vm_state&sort_dir=sideways", "sort_dir=asc&sort_dir=desc"]
PAGES = ["", "limit=2", "limit=4&marker={second}", "marker=00000000-0000-0000-0000-000000000000"]


def _summary(answer: oracles.Answer, ids: set[str]):
    body = answer.json
    if answer.status != 200:
        return answer.status, body
    servers = [s["id"] for s in body["servers"] if s["id"] in ids]
    nxt = [link["href"].split("marker=")[1].split("&")[0] for link in body.get("servers_links", [])]
    return 200, servers, nxt


@pytest.fixture(scope="module")
def nova_servers():
    with oracles.servers_oracle() as url:
        yield url, _nova_cloud(url)


def test_filters_sorts_and_pages_answer_as_nova(nova_servers, client, conf):
    nova, servers = nova_servers
    _our_cloud(db_api.get_engine(conf), servers)
    ids = {s["id"] for s in servers}
    second = servers[1]["id"]
    differences = []
    for where, sort, page in itertools.product(FILTERS, SORTS, PAGES):
        query = "&".join(part for part in (where, sort, page.format(second=second)) if part)
        path = "/v2.1/servers?" + query
        theirs = _summary(oracles.ask_nova(nova, "GET", path, token="demo:demo", version="latest"), ids)
        ours = _summary(oracles.ask_openkeel(client, "GET", path, token="demo:demo", version="latest"), ids)
        if theirs != ours:
            differences.append((query, theirs, ours))
    assert differences == [], "\n".join(map(str, differences[:20])) + f"\n{len(differences)} differences"


@pytest.mark.parametrize("query", ["flavor=nope&sort_dir=sideways", "flavor=nope&marker=" + "1" * 8,
                                   "flavor=nope&sort_dir=asc&sort_dir=desc"])
def test_an_unknown_flavor_lists_nothing_before_the_sort_and_marker_are_checked(client, query):
    # Nova looks the flavor up first and answers an empty list at once
    got = oracles.ask_openkeel(client, "GET", "/v2.1/servers?" + urllib.parse.quote(query, safe="=&"),
                               token="demo:demo", version="latest")
    assert (got.status, got.json) == (200, {"servers": []})
