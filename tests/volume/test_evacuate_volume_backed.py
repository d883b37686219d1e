"""A volume-backed server evacuated (three nodes, the fake Cinder, SQLite, PostgreSQL and MariaDB): rebuilt on
another node with its root still its Cinder volume (the same claim and PersistentVolume, no image import),
the volume still in use by it, no attachment made or deleted (its connection does not depend on the node)."""

from __future__ import annotations

import pytest

from tests.controller.evacuate_world import evacuate_world
from tests.databases import ENGINES
from tests.server_world import DEMO


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service, cinder):
    with evacuate_world(request.param, tmp_path, placement_service, cinder_url=cinder.url) as w:
        yield w


def test_a_volume_backed_root_comes_along(world, cinder):
    root = cinder.volume(bootable=True, size=2)
    got = world.client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0}]}})
    assert got.status_code == 202, got.text
    server = world.wait(got.json["server"]["id"], "ACTIVE")
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    attachments = [r for r in cinder.requests if "/attachments" in r["path"]]

    world.node_down(source)
    assert world.evacuate(uuid).status_code == 200
    done = world.wait(uuid, "ACTIVE")
    assert done["OS-EXT-SRV-ATTR:host"] != source
    ((_key, vm),) = [(k, v) for k, v in world.cluster.objects("VirtualMachine").items() if k[1].endswith(uuid)]
    assert "dataVolumeTemplates" not in vm["spec"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in vm["spec"]["template"]["spec"]["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims == {"root": f"vol-{root['id']}"}
    assert not [k for k in world.cluster.objects("DataVolume") if uuid in k[1]]
    assert cinder.volumes[root["id"]]["status"] == "in-use"
    assert [r for r in cinder.requests if "/attachments" in r["path"]] == attachments
    vmis = [v for k, v in world.cluster.objects("VirtualMachineInstance").items() if uuid in k[1]]
    assert [(v["status"]["phase"], v["status"]["nodeName"]) for v in vmis] == [("Running", done["OS-EXT-SRV-ATTR:host"])]
