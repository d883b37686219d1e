"""Attach, update and detach of a running server's volumes (os-volume_attachments POST/PUT/DELETE): Nova's
answers at each microversion, Cinder's attachment flow (reserved by the API, exported to the node and
completed by the controller, deleted on detach), KubeVirt's declarative hotplug (the VMI's volumeStatus),
nothing left behind on a refusal, a failure or the server's delete."""

from __future__ import annotations

import time

import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin, user
from tests.server_world import IMAGE, SETTLE_SECONDS, controller_running

ADMIN = admin("2.96")
UNKNOWN = "11111111-2222-3333-4444-555555555555"


def _settle(controller, until, timeout=SETTLE_SECONDS):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        controller.run_once()
        if until():
            return True
        time.sleep(0.05)
    return False


def _server(client, controller):
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "s", "imageRef": IMAGE, "flavorRef": "small", "networks": "none"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert _settle(controller, lambda: client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"][
        "status"] == "ACTIVE")
    return uuid


def _vmi_entry(cluster, uuid, volume_id):
    for key, vmi in cluster.objects("VirtualMachineInstance").items():
        if key[1].endswith(uuid):
            for entry in (vmi.get("status") or {}).get("volumeStatus") or ():
                if entry["name"] == f"vol-{volume_id}":
                    return entry
    return None


def _vm_volumes(cluster, uuid):
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(uuid)]
    return {v["name"]: v for v in vm["spec"]["template"]["spec"]["volumes"]}


def _actions(client, uuid):
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=ADMIN).json["instanceActions"]
    return {a["action"]: a["request_id"] for a in got}


def _events(client, uuid, request_id):
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{request_id}", headers=ADMIN)
    return [(e["event"], e["result"]) for e in got.json["instanceAction"]["events"]]


def _live_rows(controller, uuid):
    table = models.BLOCK_DEVICE_MAPPING
    with db_api.reader(controller.engine) as conn:
        return conn.execute(sa.select(table.c.volume_id).where(
            table.c.instance_uuid == uuid, table.c.deleted == 0, table.c.volume_id.is_not(None))).scalars().all()


def _volume_notes(notified, volume_id):
    """The notifications naming the volume: the versioned ones in order, then the legacy ones (each format
    has its own sender and topic: their relative order is not kept)."""
    out = []
    for event_type, priority, payload in notified():
        data = payload.get("nova_object.data", payload)
        if volume_id in (data.get("volume_id"), data.get("old_volume_id")):
            out.append((event_type, priority, payload.get("nova_object.name")))
    return [n for n in out if n[2]] + [n for n in out if not n[2]]


def test_attach_hotplugs_and_detach_unplugs(volume_world, cinder, notified):
    client, controller, cluster = volume_world
    uuid = _server(client, controller)
    volume = cinder.volume(size=2)
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    got = client.post(path, headers=admin("2.79"), json_body={"volumeAttachment": {
        "volumeId": volume["id"], "tag": "data", "delete_on_termination": True}})
    assert got.status_code == 200, got.text
    assert got.json == {"volumeAttachment": {"id": volume["id"], "serverId": uuid, "volumeId": volume["id"],
                                             "device": "/dev/vdb", "tag": "data", "delete_on_termination": True}}
    assert cinder.volumes[volume["id"]]["status"] == "reserved"  # the API's reservation, no connector yet
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "in-use")
    entry = _vmi_entry(cluster, uuid, volume["id"])
    assert entry["phase"] == "Ready" and entry["hotplugVolume"]["attachPodName"]
    assert _vm_volumes(cluster, uuid)[f"vol-{volume['id']}"]["persistentVolumeClaim"] == {
        "claimName": f"vol-{volume['id']}", "hotpluggable": True}
    update = [r for r in cinder.requests if r["method"] == "PUT" and "/attachments/" in r["path"]]
    assert update and update[0]["body"]["attachment"]["connector"]["mountpoint"] == "/dev/vdb"
    request_id = _actions(client, uuid)["attach_volume"]
    assert _events(client, uuid, request_id) == [("compute_attach_volume", "Success")]
    assert _volume_notes(notified, volume["id"]) == [
        ("instance.volume_attach.start", "INFO", "InstanceActionVolumePayload"),
        ("instance.volume_attach.end", "INFO", "InstanceActionVolumePayload"),
        ("compute.instance.volume.attach", "INFO", None)]
    shown = client.get(f"{path}/{volume['id']}", headers=admin("2.89")).json["volumeAttachment"]
    assert shown["device"] == "/dev/vdb" and shown["tag"] == "data" and shown["delete_on_termination"] is True

    got = client.delete(f"{path}/{volume['id']}", headers=ADMIN)
    assert got.status_code == 202, got.text
    assert cinder.volumes[volume["id"]]["status"] == "detaching"
    got = client.delete(f"{path}/{volume['id']}", headers=ADMIN)  # a second detach: Cinder's refusal
    assert got.status_code == 400 and got.json["badRequest"]["message"].startswith(
        "Invalid volume: Invalid input received: Invalid volume: Unable to detach volume.")
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "available")
    assert _vmi_entry(cluster, uuid, volume["id"]) is None
    assert f"vol-{volume['id']}" not in _vm_volumes(cluster, uuid)
    assert _settle(controller, lambda: not [k for k in cluster.objects("PersistentVolumeClaim")
                                            if k[1] == f"vol-{volume['id']}"])  # its pvc-protection let go
    assert _settle(controller, lambda: not [v for v in cluster.objects("PersistentVolume").values()
                                            if v["metadata"]["labels"].get("openkeel.io/volume-id") == volume["id"]])
    assert cinder.attachments == {} and volume["id"] in cinder.volumes  # delete_on_termination: delete only
    assert _live_rows(controller, uuid) == []
    assert _events(client, uuid, _actions(client, uuid)["detach_volume"]) == [("compute_detach_volume", "Success")]
    assert _volume_notes(notified, volume["id"]) == [
        ("instance.volume_attach.start", "INFO", "InstanceActionVolumePayload"),
        ("instance.volume_attach.end", "INFO", "InstanceActionVolumePayload"),
        ("instance.volume_detach.start", "INFO", "InstanceActionVolumePayload"),
        ("instance.volume_detach.end", "INFO", "InstanceActionVolumePayload"),
        ("compute.instance.volume.attach", "INFO", None), ("compute.instance.volume.detach", "INFO", None)]


def test_an_attached_volume_is_named_on_the_images_disk_bus(volume_world, cinder, tmp_path):
    """Nova's libvirt driver names an attached volume on the image's ``hw_disk_bus`` (a requested name is not
    honoured): a server of a scsi image has its root on /dev/sda, a volume attached to it /dev/sdb."""
    from openkeel_compute.images import local

    client, controller, _cluster = volume_world
    image = local.register(tmp_path / "images", tmp_path / "disk.raw", name="scsi", copy=True,
                           properties={"hw_disk_bus": "scsi"})
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "s", "imageRef": image["id"], "flavorRef": "small", "networks": "none"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert _settle(controller, lambda: client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"][
        "status"] == "ACTIVE")
    volume = cinder.volume()
    got = client.post(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=ADMIN, json_body={
        "volumeAttachment": {"volumeId": volume["id"], "device": "/dev/vdq"}})
    assert got.status_code == 200, got.text
    assert got.json["volumeAttachment"]["device"] == "/dev/sdb"
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "in-use")
    update = [r for r in cinder.requests if r["method"] == "PUT" and "/attachments/" in r["path"]]
    assert update[-1]["body"]["attachment"]["connector"]["mountpoint"] == "/dev/sdb"


def test_refusals_write_nothing(volume_world, cinder):
    client, controller, _cluster = volume_world
    uuid = _server(client, controller)
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    volume = cinder.volume()

    def post(body, version="2.1", headers=None):
        return client.post(path, headers=headers or admin(version), json_body={"volumeAttachment": body})

    got = post({"volumeId": UNKNOWN})
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Volume {UNKNOWN} could not be found.")
    assert post({"volumeId": volume["id"], "tag": "x"}, "2.48").status_code == 400  # tag from 2.49
    assert post({"volumeId": volume["id"], "delete_on_termination": True}, "2.78").status_code == 400
    assert post({"volumeId": volume["id"], "device": "dev/vdb"}).status_code == 400
    multi = cinder.volume(multiattach=True)
    got = post({"volumeId": multi["id"]}, "2.59")
    assert got.json["badRequest"]["message"] == ("Multiattach volumes are only supported starting with compute "
                                                 "API version 2.60.")
    busy = cinder.volume(status="in-use")
    got = post({"volumeId": busy["id"]})
    assert got.status_code == 400 and got.json["badRequest"]["message"].startswith(
        "Invalid input received: Invalid volume: Volume")
    assert cinder.attachments == {} and _live_rows(controller, uuid) == []
    got = client.post(path, headers=user(project="elsewhere", name="other"), json_body={"volumeAttachment": {
        "volumeId": volume["id"]}})
    assert (got.status_code, got.json["itemNotFound"]["message"]) == (404, f"Instance {uuid} could not be found.")
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"lock": None}).status_code == 202
    got = client.post(path, headers=user(project="admin", name="u"), json_body={"volumeAttachment": {
        "volumeId": volume["id"]}})
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (409, f"Instance {uuid} is locked")
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"unlock": None}).status_code == 202

    got = post({"volumeId": volume["id"]}, "2.101")
    assert got.status_code == 202 and not got.content
    got = post({"volumeId": volume["id"]}, "2.101")
    assert got.json["badRequest"]["message"] == (f"Invalid volume: volume {volume['id']} is already attached to "
                                                 f"instances: {uuid}")
    got = client.delete(f"{path}/{UNKNOWN}", headers=ADMIN)
    assert got.json["itemNotFound"]["message"] == f"Volume {UNKNOWN} could not be found."
    other = cinder.volume()
    got = client.delete(f"{path}/{other['id']}", headers=ADMIN)
    assert got.json["itemNotFound"]["message"] == f"Instance {uuid} is not attached to volume {other['id']}"


def test_update_delete_on_termination_and_swap_rules(volume_world, cinder, notified):
    client, controller, _cluster = volume_world
    uuid = _server(client, controller)
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    volume = cinder.volume()
    assert client.post(path, headers=ADMIN, json_body={"volumeAttachment": {"volumeId": volume["id"]}}
                       ).status_code == 200
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "in-use")
    url = f"{path}/{volume['id']}"
    member = user(project="admin", name="u", version="2.85")
    got = client.put(url, headers=member, json_body={"volumeAttachment": {"volumeId": cinder.volume()["id"]}})
    assert (got.status_code, got.json["forbidden"]["message"]) == (
        403, "Policy doesn't allow os_compute_api:os-volumes-attachments:swap to be performed.")
    got = client.put(url, headers=member, json_body={"volumeAttachment": {
        "volumeId": volume["id"], "delete_on_termination": True}})
    assert got.status_code == 202, got.text
    assert client.get(url, headers=admin("2.85")).json["volumeAttachment"]["delete_on_termination"] is True
    got = client.put(url, headers=admin("2.85"), json_body={"volumeAttachment": {
        "volumeId": volume["id"], "device": "/dev/vdz"}})
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, "The device property is not mutable")
    new = cinder.volume()
    got = client.put(url, headers=admin("2.84"), json_body={"volumeAttachment": {"volumeId": new["id"]}})
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (
        409, f"volume {volume['id']} is not migrating; this API should only be called by Cinder")
    got = client.put(url, headers=admin("2.84"), json_body={"volumeAttachment": {"volumeId": new["id"],
                                                                                 "delete_on_termination": True}})
    assert got.status_code == 400  # not in the schema before 2.85
    cinder.volumes[volume["id"]]["migration_status"] = "migrating"
    got = client.put(url, headers=admin("2.84"), json_body={"volumeAttachment": {"volumeId": new["id"]}})
    assert got.status_code == 202, got.text
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "in-use" and not [
        a for a in cinder.attachments.values() if a["volume_id"] == new["id"]])
    request_id = _actions(client, uuid)["swap_volume"]
    assert _settle(controller, lambda: _events(client, uuid, request_id) == [("compute_swap_volume", "Error")])
    assert [n for n in _volume_notes(notified, volume["id"]) if n[2]][-2:] == [
        ("instance.volume_swap.start", "INFO", "InstanceActionVolumeSwapPayload"),
        ("instance.volume_swap.error", "ERROR", "InstanceActionVolumeSwapPayload")]


def test_delete_of_the_server_detaches_its_hotplugged_volumes(volume_world, cinder):
    client, controller, cluster = volume_world
    uuid = _server(client, controller)
    keep, drop = cinder.volume(), cinder.volume()
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    for volume, dot in ((keep, False), (drop, True)):
        got = client.post(path, headers=admin("2.79"), json_body={"volumeAttachment": {
            "volumeId": volume["id"], "delete_on_termination": dot}})
        assert got.status_code == 200, got.text
        assert _settle(controller, lambda v=volume: cinder.volumes[v["id"]]["status"] == "in-use")
    assert client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 204
    assert _settle(controller, lambda: client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 404)
    assert cinder.attachments == {}
    assert cinder.volumes[keep["id"]]["status"] == "available" and drop["id"] not in cinder.volumes
    assert not [k for k in cluster.objects("PersistentVolumeClaim") if k[1].startswith("vol-")]
    assert not [v for v in cluster.objects("PersistentVolume").values()
                if v["metadata"]["labels"].get("openkeel.io/volume-id") in (keep["id"], drop["id"])]


def test_volume_extended_grows_the_claim_and_the_guest_sees_it(volume_world, cinder):
    client, controller, cluster = volume_world
    uuid = _server(client, controller)
    volume = cinder.volume(size=1)
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    assert client.post(path, headers=ADMIN, json_body={"volumeAttachment": {"volumeId": volume["id"]}}
                       ).status_code == 200
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "in-use")
    cinder.volumes[volume["id"]]["size"] = 3  # Cinder extended it
    body = {"events": [{"name": "volume-extended", "server_uuid": uuid, "tag": volume["id"]}]}
    assert client.post("/v2.1/os-server-external-events", headers=admin("2.50"), json_body=body).status_code == 400
    got = client.post("/v2.1/os-server-external-events", headers=admin("2.51"), json_body=body)
    assert got.status_code == 200 and got.json["events"][0]["code"] == 200, got.text
    claim = f"vol-{volume['id']}"
    assert _settle(controller, lambda: (_vmi_entry(cluster, uuid, volume["id"]) or {}).get(
        "persistentVolumeClaimInfo", {}).get("capacity", {}).get("storage") == "3Gi")
    pvc = next(v for k, v in cluster.objects("PersistentVolumeClaim").items() if k[1] == claim)
    assert pvc["spec"]["resources"]["requests"]["storage"] == "3Gi" and pvc["status"]["capacity"]["storage"] == "3Gi"
    pv = next(v for v in cluster.objects("PersistentVolume").values()
              if v["metadata"]["labels"].get("openkeel.io/volume-id") == volume["id"])
    assert pv["spec"]["capacity"]["storage"] == "3Gi"
    with controller_running(controller):  # the console is read by the controller
        console = client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"os-getConsoleOutput": {}})
    assert ": detected capacity change from 2097152 to 6291456" in console.json["output"]  # 1 GiB to 3 GiB
    request_id = _actions(client, uuid)["extend_volume"]
    assert _events(client, uuid, request_id) == [("compute_extend_volume", "Success")]
    assert [v for v in _live_rows(controller, uuid)] == [volume["id"]]


def test_an_attach_the_cluster_cannot_take_leaves_nothing(volume_world, cinder, notified):
    """A volume type KubeVirt has no source for: Nova's compute after a failed attach (the event in Error with
    a fault, the attachment deleted, the mapping gone), nothing on the cluster."""
    client, controller, cluster = volume_world
    uuid = _server(client, controller)
    volume = cinder.volume(driver_volume_type="fibre_channel")
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    assert client.post(path, headers=ADMIN, json_body={"volumeAttachment": {"volumeId": volume["id"]}}
                       ).status_code == 200
    request_id = _actions(client, uuid)["attach_volume"]
    assert _settle(controller, lambda: _events(client, uuid, request_id) == [("compute_attach_volume", "Error")])
    assert cinder.attachments == {} and cinder.volumes[volume["id"]]["status"] == "available"
    assert _live_rows(controller, uuid) == []
    assert f"vol-{volume['id']}" not in _vm_volumes(cluster, uuid)
    assert not [k for k in cluster.objects("PersistentVolumeClaim") if k[1] == f"vol-{volume['id']}"]
    server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
    assert server["status"] == "ACTIVE"
    assert [n for n in _volume_notes(notified, volume["id"]) if n[2]] == [
        ("instance.volume_attach.start", "INFO", "InstanceActionVolumePayload"),
        ("instance.volume_attach.error", "ERROR", "InstanceActionVolumePayload")]
    assert client.get(path, headers=ADMIN).json == {"volumeAttachments": []}


def test_a_task_running_refuses_and_a_stopped_server_takes_the_volume(volume_world, cinder):
    client, controller, _cluster = volume_world
    uuid = _server(client, controller)
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    volume = cinder.volume()
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"os-stop": None}).status_code == 202
    got = client.post(path, headers=ADMIN, json_body={"volumeAttachment": {"volumeId": volume["id"]}})
    assert (got.status_code, got.json["conflictingRequest"]["message"]) == (
        409, f"Cannot 'attach_volume' instance {uuid} while it is in task_state powering-off")
    assert cinder.attachments == {}
    assert _settle(controller, lambda: client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"][
        "status"] == "SHUTOFF")
    got = client.post(path, headers=ADMIN, json_body={"volumeAttachment": {"volumeId": volume["id"]}})
    assert got.status_code == 200, got.text  # a stopped server takes it, and has it at its next start
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "in-use")
    assert f"vol-{volume['id']}" in _vm_volumes(cluster=_cluster, uuid=uuid)


def test_the_servers_body_lists_its_volumes_as_nova(volume_world, cinder):
    """``os-extended-volumes:volumes_attached`` in show and detail: each volume with its id, from 2.3 with
    ``delete_on_termination``; a kept page of /servers/detail is not shown once a volume came or went."""
    client, controller, _cluster = volume_world
    uuid = _server(client, controller)

    def attached(version, path=f"/v2.1/servers/{uuid}"):
        got = client.get(path, headers=admin(version)).json
        body = got["server"] if "server" in got else next(s for s in got["servers"] if s["id"] == uuid)
        return body["os-extended-volumes:volumes_attached"]

    assert attached("2.3") == [] and attached("2.3", "/v2.1/servers/detail") == []  # the page kept
    volume = cinder.volume(size=1)
    path = f"/v2.1/servers/{uuid}/os-volume_attachments"
    got = client.post(path, headers=admin("2.79"), json_body={"volumeAttachment": {
        "volumeId": volume["id"], "delete_on_termination": True}})
    assert got.status_code == 200, got.text
    assert attached("2.1") == [{"id": volume["id"]}]
    assert attached("2.3") == [{"id": volume["id"], "delete_on_termination": True}]
    assert attached("2.3", "/v2.1/servers/detail") == [{"id": volume["id"], "delete_on_termination": True}]
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "in-use")
    assert client.delete(f"{path}/{volume['id']}", headers=ADMIN).status_code == 202
    assert _settle(controller, lambda: cinder.volumes[volume["id"]]["status"] == "available")
    assert attached("2.3") == [] and attached("2.3", "/v2.1/servers/detail") == []
