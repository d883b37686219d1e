"""Server shares (Nova without Manila) and os-volumes_boot answer as the live Nova 34.0.0 servers API.

A server is booted on a fresh servers oracle and the same server (uuid, project, state) is written
into OpenKeel's database; share requests go to both and must answer alike, except attaching a share
to a stopped server: Nova fails with a 500 there (no Manila configured), OpenKeel answers Nova's 409
for computes that offer no shares (docs/api.md; pinned in tests/api/test_server_shares.py).
os-volumes_boot is Nova's servers controller under another path: the answers that do not depend on a
server's whole body are compared with Nova's; the rest with OpenKeel's own /servers.
"""

from __future__ import annotations

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
OWNER, OTHER, ADMIN = "su:5ab0", "so:0ther", "admin:admin"
SHARE = "3fa85f64-5717-4562-b3fc-2c963f66afa6"
UNKNOWN = "6a1d5f38-2b0e-4c56-9d8e-2f1f0b9c4e77"


def _nova(base, method, path, token, version=None, body=None):
    data = json.dumps(body).encode() if body is not None else None
    return oracles.ask_nova(base, method, "/v2.1" + path, token=token, version=version, body=data)


@pytest.fixture(scope="module")
def booted():
    """A fresh oracle and the id of the ACTIVE server booted there by OWNER."""
    with oracles.servers_oracle() as base:
        answer = _nova(base, "POST", "/servers", OWNER, "2.97", {"server": {
            "name": "shared", "imageRef": IMAGE, "flavorRef": "1", "networks": "none"}})
        assert answer.status == 202, answer.body
        server_id = answer.json["server"]["id"]
        for _ in range(200):
            if _nova(base, "GET", f"/servers/{server_id}", OWNER).json["server"]["status"] == "ACTIVE":
                break
            time.sleep(0.1)
        yield base, server_id


def _same_server_in_openkeel(conf, server_id: str, vm_state: str = states.ACTIVE) -> None:
    engine = db_api.get_engine(conf)
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="m1.tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="1")
        store.create(conn, actor=Actor("su", "5ab0"), flavor=catalog.get(conn, "1"), extra_specs={},
                     display_name="shared", uuid=server_id, image_ref=IMAGE)
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == server_id)
                     .values(vm_state=vm_state, task_state=None))


def _compare(base, client, cases) -> list:
    differences = []
    for method, path, token, version, body in cases:
        data = json.dumps(body).encode() if body is not None else None
        theirs = oracles.ask_nova(base, method, "/v2.1" + path, token=token, version=version, body=data)
        ours = oracles.ask_openkeel(client, method, "/v2.1" + path, token=token, version=version, body=data)
        if theirs.comparable() != ours.comparable():
            differences.append((method, path, token, version, theirs.comparable(), ours.comparable()))
    return differences


def _share_cases(server_id: str, *, stopped: bool) -> list:
    shares = f"/servers/{server_id}/shares"
    cases = [("GET", shares, OWNER, "2.97", None), ("GET", shares, OWNER, "2.96", None),
             ("GET", shares, OTHER, "2.97", None), ("GET", shares, ADMIN, "latest", None),
             ("GET", shares + "?x=1", OWNER, "2.97", None), ("GET", f"/servers/{UNKNOWN}/shares", OWNER, "2.97", None),
             ("GET", f"{shares}/{SHARE}", OWNER, "2.97", None), ("GET", f"{shares}/{SHARE}", OTHER, "2.97", None),
             ("POST", shares, OWNER, "2.97", {"share": {"share_id": "x"}}),
             ("POST", shares, OWNER, "2.97", {"share": {"share_id": SHARE, "tag": "no spaces"}}),
             ("POST", shares, OWNER, "2.97", {"share": {}}), ("POST", shares, OTHER, "2.97", {"share": {"share_id": SHARE}}),
             ("DELETE", f"{shares}/{SHARE}", OWNER, "2.97", None), ("DELETE", f"{shares}/{SHARE}", OTHER, "2.97", None),
             ("DELETE", f"/servers/{UNKNOWN}/shares/{SHARE}", OWNER, "2.97", None)]
    if not stopped:  # stopped: Nova's 500 (no Manila) where OpenKeel answers 409
        cases.append(("POST", shares, OWNER, "2.97", {"share": {"share_id": SHARE, "tag": "data"}}))
    return cases


def test_shares_answer_as_nova_without_manila(booted, app, client, conf):
    base, server_id = booted
    _same_server_in_openkeel(conf, server_id)
    assert _compare(base, client, _share_cases(server_id, stopped=False)) == []


def test_shares_of_a_stopped_server_answer_as_nova_without_manila(booted, app, client, conf):
    base, server_id = booted
    assert _nova(base, "POST", f"/servers/{server_id}/action", OWNER, body={"os-stop": None}).status == 202
    for _ in range(200):
        if _nova(base, "GET", f"/servers/{server_id}", OWNER).json["server"]["status"] == "SHUTOFF":
            break
        time.sleep(0.1)
    _same_server_in_openkeel(conf, server_id, states.STOPPED)
    try:
        assert _compare(base, client, _share_cases(server_id, stopped=True)) == []
    finally:
        _nova(base, "POST", f"/servers/{server_id}/action", OWNER, body={"os-start": None})


def test_volumes_boot_answers_as_nova_where_the_server_body_is_not_involved(booted, app, client, conf):
    base, server_id = booted
    _same_server_in_openkeel(conf, server_id)
    boot = "/os-volumes_boot"
    cases = [("GET", boot, OWNER, "2.103", None), ("GET", f"{boot}/{server_id}", OWNER, "2.103", None),
             ("GET", f"{boot}/{UNKNOWN}", OWNER, "2.102", None), ("DELETE", f"{boot}/{UNKNOWN}", OWNER, None, None),
             ("PUT", f"{boot}/{server_id}", OWNER, None, {"bogus": 1}),
             ("PUT", f"{boot}/{server_id}", OWNER, "2.102", {"server": {"name": ""}}),
             ("POST", f"{boot}/{server_id}/action", OWNER, None, {"pause": None}),
             ("POST", f"{boot}/{server_id}/action", OWNER, None, {"reboot": {"type": "SOFT", "x": 1}}),
             ("POST", f"{boot}/{server_id}/action", OWNER, "2.16", {"trigger_crash_dump": None}),
             ("POST", f"{boot}/{server_id}/action", OWNER, "2.103", {"os-stop": None}),
             ("POST", boot, OWNER, None, {"server": {"name": "x"}}),
             ("GET", f"{boot}?bogus=1", OWNER, "2.75", None)]
    assert _compare(base, client, cases) == []
