"""createImage of a volume-backed server (Nova's compute API snapshot_volume_backed, synchronous in the API):
each volume snapshotted in Cinder (forced), an image without data whose block_device_mapping names the
snapshots, no task state, the createImage action with its api_snapshot_instance event; Cinder's snapshot
quota (403), the quiesce an image requires (400), the state (409), createBackup's 400. Checked against the
live Nova 34.0.0 servers oracle where its Cinder fixture answers (createBackup's 400, the 409 before it, the
action and event names). On the three engines, the fake Cinder and the built-in cluster."""

from __future__ import annotations

import time

import sqlalchemy as sa

from openkeel_compute.compute.instances import instance_sysmeta
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin
from tests.server_world import SETTLE_SECONDS

ADMIN = admin("2.96")


def _until(client, controller, uuid, status, timeout=SETTLE_SECONDS):
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
        if (server["status"] == status and server["OS-EXT-STS:task_state"] is None) or time.monotonic() > deadline:
            return server
        time.sleep(0.02)


def _boot_from_volume(client, controller, cinder):
    root = cinder.volume(bootable=True, size=1, description="the root")
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0}]}})
    assert got.status_code == 202, got.text
    server = _until(client, controller, got.json["server"]["id"], "ACTIVE")
    assert server["status"] == "ACTIVE", server
    return server["id"], root


def _image(client, image_id):
    got = client.get(f"/v2.1/images/{image_id}", headers=admin("2.1"))
    assert got.status_code == 200, got.text
    return got.json["image"]


def _events(client, uuid):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=admin("2.84")).json["instanceActions"]
    last = actions[0]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{last['request_id']}", headers=admin("2.84")).json
    return last["action"], [(e["event"], e["result"]) for e in got["instanceAction"]["events"]]


def _action(client, uuid, body, version="2.45"):
    return client.post(f"/v2.1/servers/{uuid}/action", headers=admin(version), json_body=body)


def test_create_image_snapshots_each_volume_and_makes_an_image_of_mappings(controller_world, cinder):
    client, controller, _cluster, _conf = controller_world
    uuid, root = _boot_from_volume(client, controller, cinder)
    before = len(cinder.requests)
    got = _action(client, uuid, {"createImage": {"name": "snap", "metadata": {"k": "v"}}})
    assert got.status_code == 202, got.text
    image_id = got.json["image_id"]
    (asked,) = [r["body"]["snapshot"] for r in cinder.requests[before:] if r["method"] == "POST"
                and r["path"].endswith("/snapshots")]
    assert asked == {"volume_id": root["id"], "force": True, "name": "snapshot for snap", "description": "the root"}
    (snapshot,) = cinder.snapshots.values()
    image = _image(client, image_id)
    assert (image["status"], image["minDisk"], image["metadata"]["k"]) == ("ACTIVE", 1, "v")
    assert "image_type" not in image["metadata"] and "instance_uuid" not in image["metadata"]
    assert image["metadata"]["bdm_v2"] == "True" and image["metadata"]["root_device_name"] == "/dev/vda"
    assert image["metadata"]["block_device_mapping"] == [{  # the proxy shows it parsed, as Nova's
        "source_type": "snapshot", "destination_type": "volume", "snapshot_id": snapshot["id"], "boot_index": 0,
        "device_name": "/dev/vda", "delete_on_termination": False, "disk_bus": None, "device_type": None,
        "volume_size": 1, "guest_format": None, "volume_id": None, "image_id": None, "no_device": None, "tag": None,
        "volume_type": None, "encrypted": None, "encryption_secret_uuid": None, "encryption_format": None,
        "encryption_options": None}]
    server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)  # no task: the API did it
    assert _events(client, uuid) == ("createImage", [("api_snapshot_instance", "Success")])
    # before 2.45: the Location of the image, no body
    got = _action(client, uuid, {"createImage": {"name": "old"}}, "2.44")
    assert got.status_code == 202 and "/images/" in got.header("Location") and not got.text


def test_create_image_refusals(controller_world, cinder):
    client, controller, _cluster, conf = controller_world
    uuid, _root = _boot_from_volume(client, controller, cinder)
    got = _action(client, uuid, {"createBackup": {"name": "b", "backup_type": "daily", "rotation": 1}})
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, "Backup is not supported for volume-backed instances.")
    cinder.max_snapshots = 0  # Cinder's quota checked before any snapshot is taken
    got = _action(client, uuid, {"createImage": {"name": "snap"}})
    assert (got.status_code, got.json["forbidden"]["message"]) == (403, "Quota exceeded for resources: snapshots")
    cinder.max_snapshots = -1
    engine = db_api.get_engine(conf)
    with db_api.transaction(engine) as conn:  # an image that requires a quiesce the API cannot do
        instance_sysmeta.set_system_metadata_item(conn, uuid, "image_os_require_quiesce", "True")
    got = _action(client, uuid, {"createImage": {"name": "snap"}})
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, "QEMU guest agent is not enabled")
    with db_api.transaction(engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, uuid, "image_hw_qemu_guest_agent", "True")
    got = _action(client, uuid, {"createImage": {"name": "snap"}})
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, f"Quiescing is not supported in instance {uuid}")
    assert cinder.snapshots == {}
    with db_api.transaction(engine) as conn:  # stopped: no quiesce asked for
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(vm_state="stopped"))
    assert _action(client, uuid, {"createImage": {"name": "snap"}}).status_code == 202
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(vm_state="error"))
    got = _action(client, uuid, {"createImage": {"name": "snap"}})
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (
        409, f"Cannot 'createImage' instance {uuid} while it is in vm_state error")
    got = _action(client, uuid, {"createBackup": {"name": "b", "backup_type": "daily", "rotation": 1}})
    assert got.status_code == 409  # the state before the volume-backed refusal, as Nova's


def test_a_server_booted_from_the_snapshot_image_gets_volumes_made_from_the_snapshots(controller_world, cinder):
    client, controller, cluster, _conf = controller_world
    uuid, root = _boot_from_volume(client, controller, cinder)
    image_id = _action(client, uuid, {"createImage": {"name": "snap"}}).json["image_id"]
    (snapshot,) = cinder.snapshots.values()
    snapshot["status"] = "available"
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "again", "imageRef": image_id, "flavorRef": "small", "networks": "none"}})
    assert got.status_code == 202, got.text
    server = _until(client, controller, got.json["server"]["id"], "ACTIVE")
    assert server["status"] == "ACTIVE", server
    (made,) = [v for v in cinder.volumes.values() if v["snapshot_id"] == snapshot["id"]]
    assert made["id"] != root["id"] and made["status"] == "in-use"
    listed = client.get(f"/v2.1/servers/{server['id']}/os-volume_attachments", headers=ADMIN).json
    assert [a["volumeId"] for a in listed["volumeAttachments"]] == [made["id"]]
    vm = next(v for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(server["id"]))
    assert "dataVolumeTemplates" not in vm["spec"]  # its root is the volume: no image imported
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in vm["spec"]["template"]["spec"]["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims == {"root": f"vol-{made['id']}"}
