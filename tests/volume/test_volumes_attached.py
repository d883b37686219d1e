"""``os-extended-volumes:volumes_attached`` in server show and the detailed list: each of the server's
mappings with a volume, in the order written, with ``delete_on_termination`` from 2.3, as Nova 34.0.0's
view reads the server's block device mappings; an image boot without volumes shows []."""

from __future__ import annotations

from tests.conftest import admin
from tests.server_world import IMAGE
from tests.server_world import out_of_build as _settled

KEY = "os-extended-volumes:volumes_attached"


def test_show_and_detail_list_the_servers_volumes(volume_world, cinder):
    client, controller, _cluster = volume_world
    root, data = cinder.volume(bootable=True), cinder.volume()
    got = client.post("/v2.1/servers", headers=admin("2.96"), json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0,
             "delete_on_termination": True},
            {"source_type": "volume", "destination_type": "volume", "uuid": data["id"]}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    got = client.post("/v2.1/servers", headers=admin("2.96"), json_body={"server": {
        "name": "plain", "flavorRef": "small", "networks": "none", "imageRef": IMAGE}})
    assert got.status_code == 202, got.text
    plain = got.json["server"]["id"]
    assert _settled(client, controller, uuid)["status"] == "ACTIVE"
    assert _settled(client, controller, plain)["status"] == "ACTIVE"

    both = [{"id": root["id"], "delete_on_termination": True}, {"id": data["id"], "delete_on_termination": False}]
    assert client.get(f"/v2.1/servers/{uuid}", headers=admin("2.3")).json["server"][KEY] == both
    assert client.get(f"/v2.1/servers/{uuid}", headers=admin("2.1")).json["server"][KEY] == [
        {"id": root["id"]}, {"id": data["id"]}]
    listed = {s["id"]: s[KEY] for s in client.get("/v2.1/servers/detail", headers=admin("2.96")).json["servers"]}
    assert listed == {uuid: both, plain: []}
    assert client.get(f"/v2.1/servers/{plain}", headers=admin("2.96")).json["server"][KEY] == []
