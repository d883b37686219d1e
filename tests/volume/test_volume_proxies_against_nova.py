"""os-volumes, os-snapshots and os-assisted-volume-snapshots answered alike by OpenKeel and the live
Nova 34.0.0 servers API: body and query checks, the 404 after 2.35, policy, the assisted snapshots'
refusals. (The oracle's Cinder fixture fakes too little of a volume for its successful answers to be
Nova's: those are tested against the fake Cinder in test_volume_proxies.py.) No server state is
written: SQLite only."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from openkeel_compute.db import api as db_api
from tests.api import oracles
from tests.databases import throwaway_database
from tests.volume.test_boot_volumes import _world

V = "11111111-2222-3333-4444-555555555555"
DELETE_INFO = "/os-assisted-volume-snapshots/s1?" + urllib.parse.urlencode({"delete_info": json.dumps({"volume_id": V})})
CREATE_INFO = {"snapshot_id": "s", "type": "qcow2", "new_file": "f"}

USER, ADMIN = "user:project", "admin:admin"
CASES = [
    # os-volumes create: Nova's schema
    (USER, "2.1", "POST", "/os-volumes", {"volume": {}}),
    (USER, "2.1", "POST", "/os-volumes", {"vol": {}}),
    (USER, "2.1", "POST", "/os-volumes", {"volume": {"size": "0"}}),
    (USER, "2.1", "POST", "/os-volumes", {"volume": {"size": "abc"}}),
    (USER, "2.1", "POST", "/os-volumes", {"volume": {"size": 1.5}}),
    (USER, "2.1", "POST", "/os-volumes", {"volume": {"size": 1, "foo": 1}}),
    (USER, "2.1", "POST", "/os-volumes", {"volume": {"size": 1, "metadata": "x"}}),
    (USER, "2.1", "POST", "/os-volumes", {"volume": {"size": 1, "display_name": 5}}),
    (USER, "2.35", "POST", "/os-volumes", {"volume": {"size": 1, "volume_type": None}}),
    # os-snapshots create
    (USER, "2.1", "POST", "/os-snapshots", {"snapshot": {}}),
    (USER, "2.1", "POST", "/os-snapshots", {"snapshot": {"volume_id": V, "force": "maybe"}}),
    (USER, "2.1", "POST", "/os-snapshots", {"snapshot": {"volume_id": V, "name": "x"}}),
    # list queries
    (USER, "2.1", "GET", "/os-volumes?limit=-1", None),
    (USER, "2.1", "GET", "/os-volumes/detail?offset=x", None),
    (USER, "2.1", "GET", "/os-snapshots?limit=a", None),
    (USER, "2.1", "GET", "/os-snapshots/detail?offset=-2", None),
    # the cap
    (USER, "2.36", "GET", "/os-volumes", None),
    (USER, "2.36", "GET", "/os-volumes/detail", None),
    (USER, "2.36", "GET", f"/os-volumes/{V}", None),
    (USER, "2.36", "POST", "/os-volumes", {"volume": {"size": 1}}),
    (USER, "2.36", "DELETE", f"/os-volumes/{V}", None),
    (USER, "2.36", "GET", "/os-snapshots", None),
    (USER, "2.36", "GET", "/os-snapshots/detail", None),
    (USER, "2.36", "GET", f"/os-snapshots/{V}", None),
    (USER, "2.36", "POST", "/os-snapshots", {"snapshot": {"volume_id": V}}),
    (USER, "2.100", "DELETE", f"/os-snapshots/{V}", None),
    # assisted volume snapshots
    (USER, "2.1", "POST", "/os-assisted-volume-snapshots", {"snapshot": {"volume_id": V, "create_info": CREATE_INFO}}),
    (USER, "2.1", "DELETE", DELETE_INFO, None),
    (ADMIN, "2.1", "POST", "/os-assisted-volume-snapshots", {"snapshot": {"volume_id": V,
                                                                         "create_info": CREATE_INFO}}),
    (ADMIN, "2.1", "POST", "/os-assisted-volume-snapshots", {"snapshot": {"volume_id": V}}),
    (ADMIN, "2.1", "POST", "/os-assisted-volume-snapshots", {"snapshot": {"volume_id": "", "create_info": {}}}),
    (ADMIN, "2.1", "POST", "/os-assisted-volume-snapshots", {"snapshot": {"volume_id": V, "create_info": {
        **CREATE_INFO, "type": "raw"}}}),
    (ADMIN, "2.1", "POST", "/os-assisted-volume-snapshots", {"snapshot": {"volume_id": V, "create_info": {
        **CREATE_INFO, "id": "i", "x": 1}}}),
    (ADMIN, "2.1", "DELETE", "/os-assisted-volume-snapshots/s1", None),
    (ADMIN, "2.1", "DELETE", "/os-assisted-volume-snapshots/s1?delete_info=x", None),
    (ADMIN, "2.1", "DELETE", "/os-assisted-volume-snapshots/s1?delete_info=%7B%7D", None),
    (ADMIN, "2.1", "DELETE", DELETE_INFO, None),
    (ADMIN, "2.74", "DELETE", DELETE_INFO + "&foo=1", None),
    (ADMIN, "2.75", "DELETE", DELETE_INFO + "&foo=1", None),
]


@pytest.fixture(scope="module")
def nova():
    with oracles.servers_oracle() as base:
        yield base


@pytest.fixture
def openkeel(tmp_path, cinder, nova):
    from openkeel_compute import policies

    with throwaway_database("sqlite", tmp_path) as url:
        _conf, client, _engine = _world(tmp_path, url, cinder)
        yield client
    db_api.dispose_all()
    policies.reset()


@pytest.mark.parametrize(("token", "version", "method", "path", "body"), CASES)
def test_answered_as_nova_answers(nova, openkeel, token, version, method, path, body):
    raw = json.dumps(body).encode() if body is not None else None
    theirs = oracles.ask_nova(nova, method, "/v2.1" + path, token=token, version=version, body=raw)
    ours = oracles.ask_openkeel(openkeel, method, "/v2.1" + path, token=token, version=version, body=raw)
    assert theirs.status >= 400, theirs.body
    assert (ours.status, ours.json) == (theirs.status, theirs.json)
