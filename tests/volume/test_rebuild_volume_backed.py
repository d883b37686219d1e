"""Rebuild of a volume-backed server (the fake Cinder, on SQLite, PostgreSQL and MariaDB), as Nova 34.0.0
does it (answers compared with the servers oracle, docs/volumes.md):

- before 2.93 another image than the root volume's is refused (400), as are image certificates; the same
  image recreates the guest on the same volume, Cinder not asked to write it;
- from 2.93 Cinder re-images the root volume (a new reserved attachment, os-reimage) and the rebuild waits
  for its volume-reimaged event: completed, the VM is recreated on the volume's claim (the attachment
  exported again and completed: in-use); failed or never: ERROR with Nova's fault, the event "Error".
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import admin
from tests.server_world import IMAGE, IMAGE_ALT, SETTLE_SECONDS

ADMIN = admin("2.96")


def _settle(client, controller, uuid, timeout=SETTLE_SECONDS):
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
        if (server["status"] not in ("BUILD", "REBUILD") and server["OS-EXT-STS:task_state"] is None) \
                or time.monotonic() > deadline:
            return server
        time.sleep(0.05)


def _boot(client, controller, cinder, image=IMAGE):
    root = cinder.volume(bootable=True, size=2, image_metadata={"image_id": image})
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0}]}})
    assert got.status_code == 202, got.text
    server = _settle(client, controller, got.json["server"]["id"])
    assert server["status"] == "ACTIVE", server
    return server["id"], root


def _rebuild(client, uuid, image, version="2.93", **extra):
    return client.post(f"/v2.1/servers/{uuid}/action", headers=admin(version),
                       json_body={"rebuild": {"imageRef": image, **extra}})


def _tell_nova(client):
    def post(event):
        got = client.post("/v2.1/os-server-external-events", headers=admin("2.93"), json_body={"events": [event]})
        assert got.status_code == 200, got.text
    return post


def _events(client, uuid):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=ADMIN).json["instanceActions"]
    rebuild = next(a for a in actions if a["action"] == "rebuild")
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{rebuild['request_id']}", headers=ADMIN)
    return {e["event"]: (e["result"], e.get("details")) for e in got.json["instanceAction"]["events"]}


def _claims(cluster, uuid):
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(uuid)]
    return {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in vm["spec"]["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v}, vm


def test_refusals_before_2_93_as_novas(controller_world, cinder):
    client, controller, _cluster, _conf = controller_world
    uuid, root = _boot(client, controller, cinder)
    for version in ("2.1", "2.92"):
        got = _rebuild(client, uuid, IMAGE_ALT, version)
        assert (got.status_code, got.json) == (400, {"badRequest": {"code": 400, "message": (
            f"Image {IMAGE_ALT} is unacceptable: Unable to rebuild with a different image for a volume-backed "
            "server.")}})
    got = _rebuild(client, uuid, IMAGE, "2.92", trusted_image_certificates=["abc"])
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, "Image certificate validation is not supported for volume-backed servers.")
    cinder.volumes[root["id"]]["status"] = "error"  # Nova's _check_volume_status
    got = _rebuild(client, uuid, IMAGE, "2.92")
    assert (got.status_code, got.json["badRequest"]["message"]) == (
        400, f"Invalid volume: volume '{root['id']}' status must be 'in-use'. Currently in 'error' status")
    assert not [r for r in cinder.requests if "os-reimage" in (r["body"] or {})]
    server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)


def test_same_image_before_2_93_keeps_the_volume(controller_world, cinder):
    client, controller, cluster, _conf = controller_world
    uuid, root = _boot(client, controller, cinder)
    attachments = dict(cinder.attachments)
    got = _rebuild(client, uuid, IMAGE, "2.92")
    assert got.status_code == 202, got.text
    assert got.json["server"]["image"] == ""  # Nova keeps the empty image_ref of a server booted from a volume
    server = _settle(client, controller, uuid)
    assert (server["status"], server["image"]) == ("ACTIVE", "")
    assert _claims(cluster, uuid)[0] == {"root": f"vol-{root['id']}"}
    assert cinder.attachments == attachments and cinder.volumes[root["id"]]["status"] == "in-use"
    assert not [r for r in cinder.requests if "os-reimage" in (r["body"] or {})]
    assert _events(client, uuid)["compute_rebuild_instance"][0] == "Success"


def test_2_93_reimages_the_root_volume(volume_world, cinder, notified):
    client, controller, cluster = volume_world
    cinder.nova = _tell_nova(client)
    uuid, root = _boot(client, controller, cinder)
    (old,) = cinder.attachments
    got = _rebuild(client, uuid, IMAGE_ALT)
    assert got.status_code == 202, got.text
    server = _settle(client, controller, uuid)
    assert (server["status"], server["image"]) == ("ACTIVE", ""), server
    (asked,) = [r for r in cinder.requests if "os-reimage" in (r["body"] or {})]
    assert (asked["body"], asked["version"]) == (
        {"os-reimage": {"image_id": IMAGE_ALT, "reimage_reserved": True}}, "volume 3.68")
    (new,) = cinder.attachments
    assert new != old and cinder.attachments[new]["status"] == "attached"
    volume = cinder.volumes[root["id"]]
    assert (volume["status"], volume["volume_image_metadata"]["image_id"]) == ("in-use", IMAGE_ALT)
    claims, vm = _claims(cluster, uuid)
    assert claims == {"root": f"vol-{root['id']}"} and "dataVolumeTemplates" not in vm["spec"]
    pvs = [k[-1] for k in cluster.objects("PersistentVolume")]
    assert [name for name in pvs if old in name] == [] and [name for name in pvs if new in name]
    assert _events(client, uuid)["compute_rebuild_instance"][0] == "Success"
    attachments = client.get(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=ADMIN).json
    assert attachments["volumeAttachments"][0]["volumeId"] == root["id"]
    sent = [(t, p) for t, _prio, p in notified() if t.startswith("instance.rebuild.")]
    assert [t for t, _ in sent] == ["instance.rebuild.start", "instance.rebuild.end"]
    for _t, payload in sent:
        devices = payload["nova_object.data"]["block_devices"]
        assert [d["nova_object.data"]["volume_id"] for d in devices] == [root["id"]]
        assert payload["nova_object.data"]["image_uuid"] == ""


@pytest.mark.parametrize("result", ["failed", None])
@pytest.mark.volume_options(DEFAULT={"reimage_timeout_per_gb": "1"})
def test_2_93_reimage_failed_or_never_ends_in_error(controller_world, cinder, result):
    client, controller, cluster, _conf = controller_world
    cinder.nova = _tell_nova(client)
    cinder.reimage_result = result
    uuid, root = _boot(client, controller, cinder)
    (old,) = cinder.attachments
    assert _rebuild(client, uuid, IMAGE_ALT).status_code == 202
    server = _settle(client, controller, uuid)
    message = f"Build of instance {uuid} aborted: Failed to rebuild volume backed instance."
    assert (server["status"], server["fault"]["code"], server["fault"]["message"]) == ("ERROR", 500, message)
    assert _events(client, uuid)["compute_rebuild_instance"] == ("Error", message)
    (new,) = cinder.attachments  # the mapping names the attachment Cinder has: a delete gives it back
    got = client.get(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=ADMIN).json
    assert [(a["volumeId"], a["attachment_id"]) for a in got["volumeAttachments"]] == [(root["id"], new)]
    assert not [k for k in cluster.objects("PersistentVolume") if old in k[-1]]
    assert client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 204
    deadline = time.monotonic() + 120
    while cinder.attachments and time.monotonic() < deadline:
        controller.run_once()
        time.sleep(0.05)
    assert cinder.attachments == {}


def test_stopped_server_stays_stopped_on_its_volume(controller_world, cinder):
    """A SHUTOFF volume-backed server rebuilt (re-imaged at 2.93) ends SHUTOFF once its VM is recreated on
    the volume's claim: no root disk is imported, so none is waited for."""
    client, controller, cluster, _conf = controller_world
    cinder.nova = _tell_nova(client)
    uuid, root = _boot(client, controller, cinder)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"os-stop": None}).status_code == 202
    assert _settle(client, controller, uuid)["status"] == "SHUTOFF"
    for version in ("2.92", "2.93"):
        assert _rebuild(client, uuid, IMAGE, version).status_code == 202
        server = _settle(client, controller, uuid)
        assert (server["status"], server["OS-EXT-STS:task_state"]) == ("SHUTOFF", None), server
    assert _claims(cluster, uuid)[0] == {"root": f"vol-{root['id']}"}
    assert cinder.volumes[root["id"]]["status"] == "in-use"
    assert len([r for r in cinder.requests if "os-reimage" in (r["body"] or {})]) == 1


def test_2_93_reimage_failed_notifies_the_error(volume_world, cinder, notified):
    client, controller, _cluster = volume_world
    cinder.nova = _tell_nova(client)
    cinder.reimage_result = "failed"
    uuid, root = _boot(client, controller, cinder)
    assert _rebuild(client, uuid, IMAGE_ALT).status_code == 202
    assert _settle(client, controller, uuid)["status"] == "ERROR"
    sent = [(t, prio, p) for t, prio, p in notified() if t.startswith("instance.rebuild.")]
    assert [(t, prio) for t, prio, _ in sent] == [("instance.rebuild.start", "INFO"), ("instance.rebuild.error", "ERROR")]
    data = sent[-1][2]["nova_object.data"]
    assert data["fault"]["nova_object.data"]["exception_message"] == (
        f"Build of instance {uuid} aborted: Failed to rebuild volume backed instance.")
    assert [d["nova_object.data"]["volume_id"] for d in data["block_devices"]] == [root["id"]]


def test_volume_reimaged_nobody_waits_for_is_dropped(controller_world, cinder):
    from openkeel_compute.compute import external_events
    from openkeel_compute.db import api as db_api

    client, controller, _cluster, conf = controller_world
    uuid, root = _boot(client, controller, cinder)
    _tell_nova(client)({"name": "volume-reimaged", "server_uuid": uuid, "tag": root["id"]})
    engine = db_api.get_engine(conf)
    with db_api.reader(engine) as conn:
        assert [e["name"] for e in external_events.pending(conn, uuid)] == ["volume-reimaged"]
    controller.run_once()
    with db_api.reader(engine) as conn:
        assert external_events.pending(conn, uuid) == []
    server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
