"""Volumes a boot makes (source image, snapshot or blank, destination volume): the controller creates
them in Cinder as Nova's compute does, waits for them ([DEFAULT] block_device_allocate_retries /
_interval), reserves and attaches them as a user's volume, records them in the block device mapping,
and deletes those marked delete_on_termination with the server. A volume that ends in error or never
becomes available fails the build with Nova's message and leaves nothing in Cinder. On the three
engines, against the fake Cinder and the built-in cluster."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin
from tests.server_world import IMAGE, SETTLE_SECONDS
from tests.server_world import out_of_build as _settled

ADMIN = admin("2.96")


def _gone(client, controller, uuid, timeout=SETTLE_SECONDS):
    assert client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 204
    deadline = time.monotonic() + timeout
    while client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code != 404 and time.monotonic() < deadline:
        controller.run_once()
        time.sleep(0.02)


def _boot(client, bdms, version="2.96"):
    got = client.post("/v2.1/servers", headers=admin(version), json_body={"server": {
        "name": "made", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": bdms}})
    assert got.status_code == 202, got.text
    return got.json["server"]["id"]


def _rows(controller, uuid):
    table = models.BLOCK_DEVICE_MAPPING
    with db_api.reader(controller.engine) as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(table).where(
            table.c.instance_uuid == uuid, table.c.deleted == 0).order_by(table.c.id))]


def _created(cinder):
    return [r["body"]["volume"] for r in cinder.requests if r["method"] == "POST" and r["path"].endswith("/volumes")]


def test_image_snapshot_and_blank_volumes_made_attached_and_given_back(controller_world, cinder):
    client, controller, cluster, _conf = controller_world
    source = cinder.volume(size=2)
    source["volume_type"] = "okc-fake"
    snapshot = cinder.snapshot(source)
    uuid = _boot(client, [
        {"source_type": "image", "destination_type": "volume", "uuid": IMAGE, "volume_size": 2, "boot_index": 0,
         "delete_on_termination": True},
        {"source_type": "snapshot", "destination_type": "volume", "uuid": snapshot["id"]},
        {"source_type": "blank", "destination_type": "volume", "volume_size": 1, "delete_on_termination": True,
         "volume_type": "okc-nfs"}])
    server = _settled(client, controller, uuid)
    assert server["status"] == "ACTIVE", server
    asked = _created(cinder)
    assert [(v["size"], v["name"], v.get("imageRef"), v.get("snapshot_id"), v.get("volume_type")) for v in asked] == [
        (2, "", IMAGE, None, None), (2, "", None, snapshot["id"], "okc-fake"),
        (1, f"{uuid}-blank-vol", None, None, "okc-nfs")]  # 2.67's volume_type
    assert all("availability_zone" not in v for v in asked)  # cross_az_attach: no zone asked
    rows = _rows(controller, uuid)
    made = [r["volume_id"] for r in rows]
    assert all(made) and len(set(made)) == 3
    assert {cinder.volumes[v]["status"] for v in made} == {"in-use"}
    assert rows[1]["volume_size"] == 2  # the snapshot's size, Cinder's answer
    by_volume = {a["volume_id"]: a for a in cinder.attachments.values()}
    assert [r["attachment_id"] for r in rows] == [by_volume[v]["id"] for v in made]
    vm = next(v for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(uuid))
    claims = {v["persistentVolumeClaim"]["claimName"] for v in vm["spec"]["template"]["spec"]["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims == {f"vol-{v}" for v in made}
    listed = client.get(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=admin("2.89")).json
    assert [a["volumeId"] for a in listed["volumeAttachments"]] == made
    _gone(client, controller, uuid)
    assert cinder.attachments == {}
    assert made[0] not in cinder.volumes and made[2] not in cinder.volumes
    assert cinder.volumes[made[1]]["status"] == "available"  # not delete_on_termination: the user's now


@pytest.mark.volume_options(DEFAULT={"block_device_allocate_retries": "5",
                                     "block_device_allocate_retries_interval": "0"})
def test_the_build_waits_while_cinder_makes_the_volume(controller_world, cinder):
    client, controller, _cluster, _conf = controller_world
    cinder.created_status, cinder.creating_reads = "creating", 3
    uuid = _boot(client, [{"source_type": "blank", "destination_type": "volume", "volume_size": 1,
                           "boot_index": 0}])
    assert _settled(client, controller, uuid)["status"] == "ACTIVE"
    (volume_id,) = [r["volume_id"] for r in _rows(controller, uuid)]
    reads = [r for r in cinder.requests if r["method"] == "GET" and r["path"].endswith(f"/volumes/{volume_id}")]
    assert len(reads) >= 4
    assert cinder.volumes[volume_id]["status"] == "in-use"
    assert len(_created(cinder)) == 1  # made once, however many times the step ran


@pytest.mark.volume_options(DEFAULT={"block_device_allocate_retries": "1",
                                     "block_device_allocate_retries_interval": "0"})
@pytest.mark.parametrize("ends_as", ["error", "creating"])
def test_a_volume_that_is_not_made_fails_the_build_and_leaves_nothing(controller_world, cinder, ends_as):
    client, controller, cluster, _conf = controller_world
    existing = cinder.volume()
    cinder.created_status, cinder.creating_reads, cinder.settles_to = "creating", 0, ends_as
    if ends_as == "creating":
        cinder.creating_reads = 100
    uuid = _boot(client, [
        {"source_type": "blank", "destination_type": "volume", "volume_size": 1, "boot_index": 0},
        {"source_type": "volume", "destination_type": "volume", "uuid": existing["id"]}])
    server = _settled(client, controller, uuid)
    assert server["status"] == "ERROR"
    assert len([r for r in cinder.requests if r["method"] == "POST" and r["path"].endswith("/volumes")]) == 1
    (made_id,) = [v for v in cinder.volumes if v != existing["id"]] or [
        r["path"].rsplit("/", 1)[1] for r in cinder.requests if r["method"] == "DELETE" and "/volumes/" in r["path"]]
    attempts = 1 if ends_as == "error" else 2
    message = server["fault"]["message"]
    assert message.startswith(f"Build of instance {uuid} aborted: Volume {made_id} did not finish being created "
                              "even after we waited ")
    assert message.endswith(f" seconds or {attempts} attempts. And its status is {ends_as}.")
    assert cinder.attachments == {} and cinder.volumes[existing["id"]]["status"] == "available"
    assert not [k for k in cluster.objects("VirtualMachine") if k[1].endswith(uuid)]
    rows = _rows(controller, uuid)
    if ends_as == "error":  # deleted at once, though not marked delete_on_termination
        assert list(cinder.volumes) == [existing["id"]]
        assert [r["volume_id"] for r in rows] == [None, existing["id"]]
    else:  # Cinder deletes no volume still creating: the server's delete does, once Cinder is done
        assert [(r["volume_id"], r["delete_on_termination"]) for r in rows] == [
            (made_id, True), (existing["id"], False)]
        cinder.volumes[made_id]["status"] = "error"
    _gone(client, controller, uuid)
    assert cinder.attachments == {} and list(cinder.volumes) == [existing["id"]]


def test_a_snapshot_gone_before_the_build_fails_it_with_cinders_words(controller_world, cinder):
    client, controller, _cluster, _conf = controller_world
    snapshot = cinder.snapshot(cinder.volume(bootable=True))
    uuid = _boot(client, [{"source_type": "snapshot", "destination_type": "volume", "uuid": snapshot["id"],
                           "boot_index": 0, "delete_on_termination": True}])
    del cinder.snapshots[snapshot["id"]]
    server = _settled(client, controller, uuid)
    assert server["fault"]["message"] == (f"Build of instance {uuid} aborted: Snapshot {snapshot['id']} could not "
                                          "be found.")
    assert len(cinder.volumes) == 1 and cinder.attachments == {}


def test_cinder_down_when_the_volume_is_made_fails_the_build_as_nova(controller_world, cinder):
    client, controller, cluster, _conf = controller_world
    uuid = _boot(client, [{"source_type": "blank", "destination_type": "volume", "volume_size": 1,
                           "boot_index": 0, "delete_on_termination": True}])
    cinder.fail_with = 503
    server = _settled(client, controller, uuid)
    assert server["status"] == "ERROR"
    assert server["fault"]["message"].startswith(f"Build of instance {uuid} aborted: Connection to cinder host "
                                                 "failed: ")
    assert not [k for k in cluster.objects("VirtualMachine") if k[1].endswith(uuid)]
    cinder.fail_with = None
    _gone(client, controller, uuid)
    assert cinder.volumes == {} and cinder.attachments == {}
