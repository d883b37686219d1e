"""shelve, shelveOffload and unshelve of a volume-backed server, as Nova's: shelve makes no image and offloads
at once (action shelve, event compute_shelve_offload_instance), the VM and its volume claims leave the
cluster, each volume stays reserved for the server in Cinder (a new attachment without a connector, the old
one deleted), the Placement claim is given back; unshelve claims a node again, gives the attachment the
node's connector and boots from the volume again (no image read). On the three engines, the fake Cinder
and the built-in cluster."""

from __future__ import annotations

import time

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


def _events(client, uuid):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=admin("2.84")).json["instanceActions"]
    last = actions[0]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{last['request_id']}", headers=admin("2.84")).json
    return last["action"], [(e["event"], e["result"]) for e in got["instanceAction"]["events"]]


def _claims(cluster, uuid):
    vms = [v for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(uuid)]
    return [{v["persistentVolumeClaim"]["claimName"] for v in vm["spec"]["template"]["spec"]["volumes"]
             if "persistentVolumeClaim" in v} for vm in vms]


def test_a_volume_backed_server_shelves_offloaded_and_unshelves_on_its_volume(controller_world, cinder):
    client, controller, cluster, _conf = controller_world
    root = cinder.volume(bootable=True, size=1)
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0}]}})
    uuid = got.json["server"]["id"]
    assert _until(client, controller, uuid, "ACTIVE")["status"] == "ACTIVE"
    assert _claims(cluster, uuid) == [{f"vol-{root['id']}"}]
    (first,) = cinder.attachments
    images_before = client.get("/v2.1/images", headers=admin("2.1")).json["images"]

    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"shelve": None}).status_code == 202
    server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
    assert server["OS-EXT-STS:task_state"] == "shelving"
    server = _until(client, controller, uuid, "SHELVED_OFFLOADED")
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-STS:power_state"]) == (
        "SHELVED_OFFLOADED", None, 4)
    assert client.get("/v2.1/images", headers=admin("2.1")).json["images"] == images_before  # no image: the volume has it
    assert _events(client, uuid) == ("shelve", [("compute_shelve_offload_instance", "Success")])
    assert _claims(cluster, uuid) == [] and not [k for k in cluster.objects("PersistentVolumeClaim") if uuid in str(k)
                                                 or root["id"] in str(k)]
    (reserved,) = cinder.attachments.values()  # the volume still the server's, no node has it
    assert reserved["id"] != first and (reserved["status"], reserved["connector"]) == ("reserved", None)
    assert cinder.volumes[root["id"]]["status"] == "reserved"
    listed = client.get(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=ADMIN).json["volumeAttachments"]
    assert [a["volumeId"] for a in listed] == [root["id"]]

    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"unshelve": None}).status_code == 202
    server = _until(client, controller, uuid, "ACTIVE")
    assert server["status"] == "ACTIVE" and server["OS-EXT-SRV-ATTR:host"]
    assert _claims(cluster, uuid) == [{f"vol-{root['id']}"}]
    (attached,) = cinder.attachments.values()
    assert attached["id"] == reserved["id"] and attached["status"] == "attached"
    assert attached["connector"] is not None  # exported again (this world has no Placement: the cluster picks the node)
    assert cinder.volumes[root["id"]]["status"] == "in-use"
    action, events = _events(client, uuid)
    assert action == "unshelve" and ("get_image_info", "Success") not in events
    assert ("compute_unshelve_instance", "Success") in events


def shelved_offloaded(client, controller, cinder) -> tuple[str, str]:
    """A server booted from a new volume, then shelved (offloaded at once): its uuid and the volume's id."""
    root = cinder.volume(bootable=True, size=1)
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0}]}})
    uuid = got.json["server"]["id"]
    assert _until(client, controller, uuid, "ACTIVE")["status"] == "ACTIVE"
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"shelve": None}).status_code == 202
    assert _until(client, controller, uuid, "SHELVED_OFFLOADED")["status"] == "SHELVED_OFFLOADED"
    return uuid, root["id"]


def test_the_volume_backed_shelve_notifies_shelve_offload_only(volume_world, cinder, notified):
    client, controller, _cluster = volume_world
    shelved_offloaded(client, controller, cinder)
    sent = [event for event, _priority, _payload in notified()]
    assert "instance.shelve_offload.start" in sent and "instance.shelve_offload.end" in sent
    assert not [e for e in sent if e.startswith(("instance.shelve.", "compute.instance.shelve."))]
