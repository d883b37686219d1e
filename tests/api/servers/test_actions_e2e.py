"""Server actions end to end: through the API app, then the controller on the built-in cluster.

Rebuild: the server gets a new root disk from the new image and ends ACTIVE (or SHUTOFF when rebuilt
while stopped), as in Nova. Soft delete ([DEFAULT] reclaim_instance_interval): DELETE stops the server
and keeps it SOFT_DELETED; restore starts it again; forceDelete and the reclaim delete it for good."""

from __future__ import annotations

import datetime as dt

import pytest

from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.images import glance
from tests.conftest import admin, conf_on
from tests.server_world import DEMO, IMAGE, IMAGE_ALT, image_service, server_world, until
from tests.server_world import boot as _boot
from tests.server_world import settled as _settled

RECLAIM = 60.0


@pytest.fixture
def world(tmp_path, db_engine):
    """The API, the controller and the built-in cluster, on each engine."""
    with conf_on(db_engine, tmp_path, controller={"poll_interval": "0.05", "workers": "4"}) as conf:
        yield from _world(conf, tmp_path)


def _world(conf, tmp_path):
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    clock = [dt.datetime(2026, 12, 1, 12, 0, 0)]
    with image_service(tmp_path) as url:
        glance.register_opts(conf)
        conf.set_override("api_servers", [url], group="glance")
        make = lambda kube: make_loop(kube, engine, reclaim_interval=RECLAIM, now=lambda: clock[0])
        with server_world(conf, make) as (client, controller, cluster):
            yield client, controller, cluster, clock, conf


def _root_disks(cluster, uuid):
    """(DataVolume names of the server, the VM's root template name and its image URL)."""
    dvs = sorted(k[1] for k in cluster.objects("DataVolume") if k[1].startswith(uuid))
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    (template,) = vm["spec"]["dataVolumeTemplates"]
    return dvs, template["metadata"]["name"], template["spec"]["source"]["http"]["url"]


def _rebuild_events(client, uuid):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=DEMO).json["instanceActions"]
    assert actions[0]["action"] == "rebuild"
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{actions[0]['request_id']}", headers=DEMO)
    return [(e["event"], e["result"]) for e in got.json["instanceAction"]["events"]]


def test_rebuild_replaces_the_root_disk_and_keeps_the_state(world):
    client, controller, cluster, _clock, _conf = world
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.e2e", "ram": 512, "vcpus": 1, "disk": 1, "id": "e2e"}})
    assert flavor.status_code == 200, flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "e2e", "networks": "auto",
                   "metadata": {"old": "1"}}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert until(client, controller, uuid, _settled("ACTIVE")).json["server"]["status"] == "ACTIVE"
    first_dvs, first_root, first_url = _root_disks(cluster, uuid)
    assert first_dvs == [first_root] and IMAGE in first_url

    # ACTIVE: rebuilt from the other image, started again
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={
        "rebuild": {"imageRef": IMAGE_ALT, "name": "web-1-rebuilt", "metadata": {"rebuild": "server"},
                    "adminPass": "rebuildPassw0rd"}})
    assert got.status_code == 202, got.text
    body = got.json["server"]
    assert (body["id"], body["image"]["id"], body["name"], body["adminPass"], body["status"]) == (
        uuid, IMAGE_ALT, "web-1-rebuilt", "rebuildPassw0rd", "REBUILD")
    assert body["metadata"] == {"rebuild": "server"}
    assert got.header("Location").endswith(f"/servers/{uuid}")
    shown = until(client, controller, uuid, _settled("ACTIVE")).json["server"]
    assert (shown["status"], shown["image"]["id"], shown["name"]) == ("ACTIVE", IMAGE_ALT, "web-1-rebuilt")
    dvs, root, url = _root_disks(cluster, uuid)
    assert root != first_root and dvs == [root] and IMAGE_ALT in url
    assert _rebuild_events(client, uuid) == [("compute_rebuild_instance", "Success")]

    # SHUTOFF: rebuilt, and left stopped
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-stop": None}).status_code == 202
    assert until(client, controller, uuid, _settled("SHUTOFF")).json["server"]["status"] == "SHUTOFF"
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"rebuild": {"imageRef": IMAGE}})
    assert got.status_code == 202, got.text
    shown = until(client, controller, uuid, _settled("SHUTOFF")).json["server"]
    assert (shown["status"], shown["image"]["id"], shown["OS-EXT-STS:power_state"]) == ("SHUTOFF", IMAGE, 4)
    dvs, second_root, url = _root_disks(cluster, uuid)
    assert second_root not in (root, first_root) and dvs == [second_root] and IMAGE in url
    assert not [k for k in cluster.objects("VirtualMachineInstance") if k[1] == uuid]
    assert _rebuild_events(client, uuid) == [("compute_rebuild_instance", "Success")]

    deleted = client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert deleted.status_code == 204, deleted.text
    assert until(client, controller, uuid, lambda g: g.status_code == 404).status_code == 404
    for kind in ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "Secret"):
        assert [k for k in cluster.objects(kind) if k[1].startswith(uuid)] == [], kind


def _vmis(cluster, uuid):
    return [k for k in cluster.objects("VirtualMachineInstance") if k[1] == uuid]


def _left(cluster, uuid):
    return [(kind, k) for kind in ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "Secret")
            for k in cluster.objects(kind) if k[1].startswith(uuid)]


def test_soft_delete_restore_force_delete_and_reclaim(world):
    client, controller, cluster, clock, conf = world
    conf.set_override("reclaim_instance_interval", int(RECLAIM))
    uuid = _boot(client, controller, "kept")

    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    shown = until(client, controller, uuid, _settled("SOFT_DELETED")).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:vm_state"], shown["OS-EXT-STS:power_state"]) == (
        "SOFT_DELETED", "soft-delete", 4)
    assert _vmis(cluster, uuid) == [] and [k for k in cluster.objects("DataVolume") if k[1].startswith(uuid)]
    listed = client.get("/v2.1/servers", headers=DEMO).json["servers"]
    assert uuid not in [s["id"] for s in listed]
    stop = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-stop": None})
    assert stop.json["conflictingRequest"]["message"] == (
        f"Cannot 'stop' instance {uuid} while it is in vm_state soft-delete")

    # restored: running again, ACTIVE
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"restore": None}).status_code == 202
    shown = until(client, controller, uuid, _settled("ACTIVE")).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1) and _vmis(cluster, uuid)
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=DEMO).json["instanceActions"]
    assert [a["action"] for a in actions] == ["restore", "delete", "create"]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{actions[0]['request_id']}", headers=DEMO)
    assert [(e["event"], e["result"]) for e in got.json["instanceAction"]["events"]] == [
        ("compute_restore_instance", "Success")]

    # soft-deleted again, then deleted now
    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    assert until(client, controller, uuid, _settled("SOFT_DELETED")).json["server"]["status"] == "SOFT_DELETED"
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"forceDelete": None})
    assert got.status_code == 202, got.text
    assert until(client, controller, uuid, lambda g: g.status_code == 404).status_code == 404
    assert _left(cluster, uuid) == []

    # reclaimed once the interval has passed, not before
    other = _boot(client, controller, "reclaimed")
    assert client.delete(f"/v2.1/servers/{other}", headers=DEMO).status_code == 204
    assert until(client, controller, other, _settled("SOFT_DELETED")).json["server"]["status"] == "SOFT_DELETED"
    controller.run_once()
    assert client.get(f"/v2.1/servers/{other}", headers=DEMO).status_code == 200
    clock[0] = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=RECLAIM + 1)
    assert until(client, controller, other, lambda g: g.status_code == 404).status_code == 404
    assert _left(cluster, other) == []
