"""os-assisted-volume-snapshots on servers the controller built: Nova 34.0.0's checks of the volume's
server (its block device, multiattach, a host, no task, launched; an ACTIVE server for a merge) and its
answers once they pass. KubeVirt cannot take or merge a guest's qcow2 snapshot, so nothing is done on the
cluster, as with a Nova driver that cannot. (The body, query and policy refusals are compared with the
live Nova in test_volume_proxies_against_nova.py.) On the three engines."""

from __future__ import annotations

import json
import time
import urllib.parse

from tests.conftest import admin, user
from tests.server_world import SETTLE_SECONDS

ADMIN = admin("2.96")
CREATE_INFO = {"snapshot_id": "snap-1", "type": "qcow2", "new_file": "volume-x.snap-1"}


def _settled(client, controller, uuid, status="ACTIVE", timeout=SETTLE_SECONDS):
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
        if server["status"] == status or time.monotonic() > deadline:
            return server
        time.sleep(0.02)


def _boot(client, volume_id, version="2.96"):
    got = client.post("/v2.1/servers", headers=admin(version), json_body={"server": {
        "name": "avs", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": volume_id, "boot_index": 0}]}})
    assert got.status_code == 202, got.text
    return got.json["server"]["id"]


def _create(client, volume_id, token=ADMIN, **info):
    return client.post("/v2.1/os-assisted-volume-snapshots", headers=token, json_body={
        "snapshot": {"volume_id": volume_id, "create_info": {**CREATE_INFO, **info}}})


def _delete(client, volume_id, **info):
    query = urllib.parse.urlencode({"delete_info": json.dumps({"volume_id": volume_id, **info})})
    return client.delete(f"/v2.1/os-assisted-volume-snapshots/snap-1?{query}", headers=ADMIN)


def test_answered_as_nova_once_the_checks_pass(controller_world, cinder):
    client, controller, cluster, _conf = controller_world
    volume = cinder.volume(bootable=True)
    uuid = _boot(client, volume["id"])
    not_ready = _create(client, volume["id"])  # not built yet: no host
    assert (not_ready.status_code, not_ready.json["badRequest"]["message"]) == (400, f"Instance {uuid} is not ready")
    assert _settled(client, controller, uuid)["status"] == "ACTIVE"
    before = {kind: dict(cluster.objects(kind)) for kind in ("VirtualMachine", "PersistentVolumeClaim")}
    made = _create(client, volume["id"], id="a1b2")
    assert (made.status_code, made.json) == (200, {"snapshot": {"id": "a1b2", "volumeId": volume["id"]}})
    assert _create(client, volume["id"]).json == {"snapshot": {"id": None, "volumeId": volume["id"]}}
    deleted = _delete(client, volume["id"], merge_target_file="volume-x")
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert {kind: dict(cluster.objects(kind)) for kind in before} == before  # nothing done on the cluster
    assert _create(client, volume["id"], token=user("p", name="u")).status_code == 403
    unknown = _create(client, "no-such-volume")
    assert (unknown.status_code, unknown.json["badRequest"]["message"]) == (
        400, "No volume Block Device Mapping with id no-such-volume.")


def test_a_merge_needs_an_active_server(controller_world, cinder):
    client, controller, _cluster, _conf = controller_world
    volume = cinder.volume(bootable=True)
    uuid = _boot(client, volume["id"])
    _settled(client, controller, uuid)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"os-stop": None}).status_code == 202
    assert _settled(client, controller, uuid, "SHUTOFF")["status"] == "SHUTOFF"
    refused = _delete(client, volume["id"], merge_target_file="volume-x")
    assert (refused.status_code, refused.json["badRequest"]["message"]) == (
        400, (f"Instance {uuid} in vm_state stopped. Cannot volume_snapshot_delete while the instance is in this "
              "state."))
    assert _delete(client, volume["id"]).status_code == 204  # no merge: any vm_state


def test_a_multiattach_volume_is_refused(controller_world, cinder):
    client, controller, _cluster, _conf = controller_world
    volume = cinder.volume(bootable=True, multiattach=True)
    for _ in range(2):
        _settled(client, controller, _boot(client, volume["id"], version="2.60"))
    refused = _create(client, volume["id"])
    assert (refused.status_code, refused.json["badRequest"]["message"]) == (
        400, f"Block Device Mapping {volume['id']} is a multi-attach volume and is not valid for this operation.")
