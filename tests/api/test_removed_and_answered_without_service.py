"""What OpenKeel answers for Nova's removed operations, /extensions, the bare-metal proxy, server
shares and os-volumes_boot, without a Nova to compare with (tests/api/test_contract_against_nova.py
and its siblings compare with Nova itself), including where Nova's own answer is a 500.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.api import census
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import deletion, store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.model import states
from tests.conftest import admin, user

GONE = {"computeFault": {"code": 410, "message": "This resource is no longer available. No forwarding address is given."}}
SERVER = "5d1b4c0e-8c4a-4f7e-9a39-1a2b3c4d5e6f"
REMOVED = [row for row in census.rows() if row.nova_removed and row.action != "os-getRDPConsole"]


def _path(template: str) -> str:
    for name in ("{server_id}", "{id}", "{domain_id}"):
        template = template.replace(name, "1")
    return template


@pytest.mark.parametrize("row", REMOVED, ids=[row.key for row in REMOVED])
def test_every_removed_operation_is_gone_at_every_microversion_whatever_the_query(client, row):
    body = {row.action: None} if row.action else ({"x": 1} if row.method in ("POST", "PUT") else None)
    for version in ("2.1", "2.42", "latest"):
        got = client.request(row.method, "/v2.1" + _path(row.path) + ("?x=1" if row.method == "GET" else ""),
                             headers=user(version=version), json_body=body)
        assert (got.status_code, got.json) == (410, GONE), (row.key, version)
        assert got.header("OpenStack-API-Version") == f"compute {'2.104' if version == 'latest' else version}"


def test_the_removed_rdp_console_is_novas_bare_400_up_to_2_5_and_404_after(client):
    action = {"os-getRDPConsole": {"type": "rdp-html5"}}
    got = client.post(f"/v2.1/servers/{SERVER}/action", headers=user(version="2.5"), json_body=action)
    assert got.json == {"badRequest": {"code": 400, "message": "The server could not comply with the request since "
                                                               "it is either malformed or otherwise incorrect."}}
    assert client.post(f"/v2.1/servers/{SERVER}/action", headers=user(version="2.6"), json_body=action).status_code == 404


def test_extensions_list_novas_99_and_v2_one_more(client):
    listed = client.get("/v2.1/extensions", headers=user()).json["extensions"]
    legacy = client.get("/v2/extensions", headers=user()).json["extensions"]
    assert len(listed) == 99 and len(legacy) == 100
    aliases = [ext["alias"] for ext in listed]
    assert aliases == sorted(aliases) and {"os-server-external-events", "os-assisted-volume-snapshots"} <= set(aliases)
    shown = client.get("/v2.1/extensions/os-server-external-events", headers=user("2.104")).json
    assert shown["extension"]["name"] == "ServerExternalEvents"
    assert client.get("/v2.1/extensions/OS-EXT-VIF-NET", headers=user()).status_code == 404
    assert client.get("/v2/extensions/OS-EXT-VIF-NET", headers=user()).status_code == 200


def test_listing_and_showing_bare_metal_nodes_is_not_supported_for_an_administrator(client):
    """Nova asks Ironic and fails with a 500 naming keystoneauth's exception; its contract says 501."""
    for path in ("/v2.1/os-baremetal-nodes", "/v2.1/os-baremetal-nodes/1"):
        got = client.get(path, headers=admin("2.35"))
        assert got.json == {"notImplemented": {"code": 501, "message": "The requested functionality is not supported."}}
        assert client.get(path + "?x=1", headers=admin()).status_code == 501  # Nova: 500 (a KeyError)
        assert client.get(path, headers=admin("2.36")).status_code == 404


@pytest.fixture
def server(conf):
    engine = db_api.get_engine(conf)
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="t")
        store.create(conn, actor=Actor("demo", "demo-project"), flavor=catalog.get(conn, "t"), extra_specs={},
                     display_name="srv", uuid=SERVER)
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == SERVER)
                     .values(vm_state=states.STOPPED, task_state=None, host="node-1", node="node-1",
                             launched_at=models.utcnow(), power_state=states.power_state.SHUTDOWN))
    return engine


def test_attaching_a_share_to_a_stopped_server_is_refused_as_nova_refuses_computes_without_shares(client, server):
    """Nova without Manila fails with a 500 here; no KubeVirt node offers virtiofs shares to attach."""
    got = client.post(f"/v2.1/servers/{SERVER}/shares", headers=user(version="2.97"),
                      json_body={"share": {"share_id": "3fa85f64-5717-4562-b3fc-2c963f66afa6"}})
    assert got.json == {"conflictingRequest": {"code": 409, "message": "Feature not supported because either "
                                                                       "compute or instance are not configured "
                                                                       "correctly."}}


def test_a_deleted_servers_shares_are_not_found(client, server):
    with db_api.transaction(server) as conn:
        deletion.soft_delete(conn, SERVER)
    got = client.get(f"/v2.1/servers/{SERVER}/shares", headers=user(version="2.97"))
    assert got.json == {"itemNotFound": {"code": 404, "message": f"Instance {SERVER} could not be found."}}


def test_volumes_boot_answers_what_servers_answers_up_to_2_102(client, server):
    for version in ("2.1", "2.102"):
        for suffix in ("", "/detail", f"/{SERVER}"):
            ours = client.get(f"/v2.1/os-volumes_boot{suffix}", headers=user(version=version))
            theirs = client.get(f"/v2.1/servers{suffix}", headers=user(version=version))
            assert (ours.status_code, ours.json) == (theirs.status_code, theirs.json)
    assert client.get("/v2.1/os-volumes_boot", headers=user(version="2.103")).status_code == 404


def test_volumes_boot_update_and_actions_work_where_nova_fails_with_a_500(client, server):
    renamed = client.put(f"/v2.1/os-volumes_boot/{SERVER}", headers=user(version="2.102"),
                         json_body={"server": {"name": "renamed"}})
    assert renamed.status_code == 200 and renamed.json["server"]["name"] == "renamed"
    started = client.post(f"/v2.1/os-volumes_boot/{SERVER}/action", headers=user(), json_body={"os-start": None})
    assert started.status_code == 202
    with db_api.reader(server) as conn:
        assert store.get(conn, SERVER)["task_state"] == "powering-on"
    no_such = client.post(f"/v2.1/os-volumes_boot/{SERVER}/action", headers=user(), json_body={"lock": None})
    assert no_such.json == {"badRequest": {"code": 400, "message": "There is no such action: lock"}}
