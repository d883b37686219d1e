"""GET /servers/{id}/os-volume_attachments[/{volume_id}] as Nova 34.0.0 answers them at each
microversion, from the server's block devices (Cinder is not asked)."""

from __future__ import annotations

import pytest

from openkeel_compute.db import api as db_api
from tests.api.servers.helpers import IMAGE, local_image_service
from tests.conftest import user
from tests.volume.test_boot_volumes import _boot, _flavors, _world, database_url  # noqa: F401 (fixture)

UNKNOWN = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def booted(tmp_path, cinder, database_url):  # noqa: F811 (the fixture imported)
    from openkeel_compute import policies

    conf, client, engine = _world(tmp_path, database_url, cinder)
    with local_image_service(conf, tmp_path):
        _flavors(engine)
        root, data = cinder.volume(bootable=True), cinder.volume()
        resp = _boot(client, version="2.79", block_device_mapping_v2=[
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0,
             "tag": "root"},
            {"source_type": "volume", "destination_type": "volume", "uuid": data["id"], "device_name": "vdb",
             "delete_on_termination": True}])
        assert resp.status_code == 202, resp.json
        yield client, resp.json["server"]["id"], root["id"], data["id"], cinder
    db_api.dispose_all()
    policies.reset()


def _get(client, path, version):
    return client.get(path, headers=user("demo", name="demo", version=version))


def test_list_and_show_per_microversion(booted):
    client, server, root, data, cinder = booted
    path = f"/v2.1/servers/{server}/os-volume_attachments"
    got = _get(client, path, "2.1")
    assert got.status_code == 200
    assert got.json == {"volumeAttachments": [{"id": root, "volumeId": root, "serverId": server},
                                              {"id": data, "volumeId": data, "serverId": server,
                                               "device": "/dev/vdb"}]}
    assert _get(client, path, "2.70").json["volumeAttachments"][0] == {
        "id": root, "volumeId": root, "serverId": server, "tag": "root"}
    assert _get(client, path, "2.79").json["volumeAttachments"][1] == {
        "id": data, "volumeId": data, "serverId": server, "device": "/dev/vdb", "tag": None,
        "delete_on_termination": True}
    shown = _get(client, f"{path}/{root}", "2.89").json["volumeAttachment"]
    by_volume = {a["volume_id"]: a for a in cinder.attachments.values()}
    assert set(shown) == {"volumeId", "serverId", "tag", "delete_on_termination", "attachment_id", "bdm_uuid"}
    assert shown["attachment_id"] == by_volume[root]["id"] and len(shown["bdm_uuid"]) == 36
    assert not [r for r in cinder.requests if r["path"].endswith("os-volume_attachments")]


def test_pages_and_query(booted):
    client, server, _root, data, _cinder = booted
    path = f"/v2.1/servers/{server}/os-volume_attachments"
    got = _get(client, f"{path}?limit=1&offset=1", "2.1")
    assert [a["volumeId"] for a in got.json["volumeAttachments"]] == [data]
    assert _get(client, f"{path}?foo=1", "2.74").status_code == 200
    assert _get(client, f"{path}?foo=1", "2.75").status_code == 400
    assert _get(client, f"{path}?limit=-1", "2.1").status_code == 400


def test_not_found(booted):
    client, server, _root, _data, _cinder = booted
    got = _get(client, f"/v2.1/servers/{server}/os-volume_attachments/{UNKNOWN}", "2.1")
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (
        404, f"Instance {server} is not attached to volume {UNKNOWN}")
    got = _get(client, f"/v2.1/servers/{UNKNOWN}/os-volume_attachments", "2.1")
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Instance {UNKNOWN} could not be found.")


def test_an_image_server_has_none(booted):
    client = booted[0]
    resp = _boot(client, imageRef=IMAGE)
    got = _get(client, f"/v2.1/servers/{resp.json['server']['id']}/os-volume_attachments", "2.89")
    assert got.json == {"volumeAttachments": []}
