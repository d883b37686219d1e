"""Rescue and unrescue end to end: through the API app, then the controller on the built-in cluster, on
each database engine (and the metadata service finding such a server by its guest's address).

The VM boots the rescue image (the server's own when none is named) as its first disk with the server's root
disk second, the rescue password in the cloud-init Secret; RESCUE with task rescuing then none; unrescue
puts the VM's disks back exactly as they were and nothing of the rescue stays in the cluster."""

from __future__ import annotations

import base64
import datetime as dt
import json
import urllib.request

import pytest
import sqlalchemy
import webob

from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator.faults import Fault
from openkeel_compute.images import glance, local
from openkeel_compute.kubevirt.rescue import RESCUED_FROM, unrescue_patch
from openkeel_compute.metadata.service import MetadataApp
from tests.conftest import admin, conf_on
from tests.server_world import DEMO, IMAGE, IMAGE_ALT, image_service, server_world, until

STABLE_IMAGE = "5d7a3f0e-1b2c-4d3e-8f9a-0b1c2d3e4f50"
SNAPSHOT_IMAGE = "5d7a3f0e-1b2c-4d3e-8f9a-0b1c2d3e4f51"
MISSING = "5d7a3f0e-1b2c-4d3e-8f9a-0b1c2d3e4f5f"


@pytest.fixture
def world(tmp_path, db_engine):
    with conf_on(db_engine, tmp_path, controller={"poll_interval": "0.05", "workers": "4"}) as conf:
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        clock = [dt.datetime(2026, 12, 1, 12, 0, 0)]
        with image_service(tmp_path) as url:
            directory, disk = tmp_path / "images", tmp_path / "disk.raw"
            local.register(directory, disk, name="rescue-stable", image_id=STABLE_IMAGE, copy=True,
                           properties={"hw_rescue_device": "cdrom", "hw_rescue_bus": "virtio"})
            local.register(directory, disk, name="snap", image_id=SNAPSHOT_IMAGE, copy=True,
                           properties={"img_block_device_mapping": "[]"})
            glance.register_opts(conf)
            conf.set_override("api_servers", [url], group="glance")
            make = lambda kube: make_loop(kube, engine, now=lambda: clock[0])
            with server_world(conf, make) as (client, controller, cluster):
                yield client, controller, cluster, conf


def _settled(status):
    return lambda got: (got.status_code == 200 and got.json["server"]["status"] == status
                        and got.json["server"]["OS-EXT-STS:task_state"] is None)


def _boot(client, controller):
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.rescue", "ram": 512, "vcpus": 1, "disk": 1, "OS-FLV-EXT-DATA:ephemeral": 1, "id": "rescue"}})
    assert flavor.status_code == 200, flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "sick", "imageRef": IMAGE, "flavorRef": "rescue", "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert until(client, controller, uuid, _settled("ACTIVE")).json["server"]["status"] == "ACTIVE"
    return uuid


def _vm(cluster, uuid):
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    return vm


def _devices(vm):
    tspec = vm["spec"]["template"]["spec"]
    return tspec["domain"]["devices"]["disks"], tspec["volumes"], vm["spec"].get("dataVolumeTemplates")


def _vmi_disks(cluster, uuid):
    ((_key, vmi),) = [(k, v) for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    return [d["name"] for d in vmi["spec"]["domain"]["devices"]["disks"]]


def _action(client, uuid, body):
    return client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body=body)


def _events(client, uuid, action):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=DEMO).json["instanceActions"]
    (found,) = [a for a in actions if a["action"] == action][:1]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{found['request_id']}", headers=admin())
    return [(e["event"], e["result"]) + ((e.get("traceback"),) if e["result"] != "Success" else ()) for e in got.json["instanceAction"]["events"]]


def _outbox(conf, columns):
    with db_api.get_engine(conf).connect() as conn:
        return list(conn.execute(sqlalchemy.text(f"SELECT {columns} FROM outbox WHERE kind = 'server'")))


def _rescue_userdata(cluster, uuid):
    secrets = {k[1]: v for k, v in cluster.objects("Secret").items() if k[1].startswith(uuid)}
    return base64.b64decode(secrets[f"{uuid}-rescue-user-data"]["data"]["userdata"]).decode()


def test_rescue_boots_the_server_image_first_and_unrescue_puts_the_vm_back(world):
    client, controller, cluster, _conf = world
    uuid = _boot(client, controller)
    before = _devices(_vm(cluster, uuid))

    got = _action(client, uuid, {"rescue": {"adminPass": "r3scue-me"}})
    assert (got.status_code, got.json) == (200, {"adminPass": "r3scue-me"})
    shown = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", "rescuing")
    shown = until(client, controller, uuid, _settled("RESCUE")).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:vm_state"], shown["OS-EXT-STS:power_state"]) == (
        "RESCUE", "rescued", 1)

    vm = _vm(cluster, uuid)
    disks, volumes, templates = _devices(vm)
    # legacy rescue: the rescue image first, the root disk second, cloud-init with the password; no ephemeral
    assert [(d["name"], d.get("bootOrder")) for d in disks] == [("rescue", 1), ("root", 2), ("cloudinitdisk", None)]
    assert {v["name"]: v for v in volumes}["rescue"] == {"name": "rescue", "dataVolume": {"name": f"{uuid}-rescue"}}
    rescue_template = next(t for t in templates if t["metadata"]["name"] == f"{uuid}-rescue")
    assert f"/v2/images/{IMAGE}/file" in rescue_template["spec"]["source"]["http"]["url"]
    assert _vmi_disks(cluster, uuid) == ["rescue", "root", "cloudinitdisk"]
    assert '"r3scue-me"' in _rescue_userdata(cluster, uuid)
    cloud_init = next(v for v in volumes if v["name"] == "cloudinitdisk")
    assert cloud_init["cloudInitNoCloud"]["secretRef"]["name"] == f"{uuid}-rescue-user-data"
    assert json.loads(vm["metadata"]["annotations"][RESCUED_FROM])["disks"] == before[0]
    assert _events(client, uuid, "rescue") == [("compute_rescue_instance", "Success")]
    # the password is not kept once the guest has it
    rows = _outbox(_conf, "payload")
    assert rows and all("r3scue-me" not in str(r[0]) for r in rows)

    # a rescued server is refused what Nova refuses it
    got = _action(client, uuid, {"rescue": None})
    assert got.status_code == 409
    assert got.json["conflictingRequest"]["message"] == (
        f"Cannot 'rescue' instance {uuid} while it is in vm_state rescued")

    got = _action(client, uuid, {"unrescue": None})
    assert (got.status_code, got.text) == (202, "")
    shown = until(client, controller, uuid, _settled("ACTIVE")).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)
    vm = _vm(cluster, uuid)
    assert _devices(vm) == before
    assert RESCUED_FROM not in vm["metadata"].get("annotations", {})
    assert _vmi_disks(cluster, uuid) == [d["name"] for d in before[0]]
    assert not [k for kind in ("DataVolume", "Secret") for k in cluster.objects(kind) if "rescue" in k[1]]
    assert _events(client, uuid, "unrescue") == [("compute_unrescue_instance", "Success")]


def test_stable_device_rescue_keeps_every_disk_and_adds_the_rescue_device(world):
    client, controller, cluster, _conf = world
    uuid = _boot(client, controller)
    before = _devices(_vm(cluster, uuid))
    got = _action(client, uuid, {"rescue": {"rescue_image_ref": STABLE_IMAGE}})
    assert got.status_code == 200 and len(got.json["adminPass"]) == 12
    until(client, controller, uuid, _settled("RESCUE"))
    disks, _volumes, _templates = _devices(_vm(cluster, uuid))
    # every disk where it was, none booted first but the rescue cdrom (virtio is no cdrom bus in KubeVirt)
    assert [d["name"] for d in disks] == [d["name"] for d in before[0]] + ["rescue"]
    assert disks[-1] == {"name": "rescue", "cdrom": {"bus": "sata"}, "bootOrder": 1}
    assert all("bootOrder" not in d for d in disks[:-1])
    assert _action(client, uuid, {"unrescue": None}).status_code == 202
    until(client, controller, uuid, _settled("ACTIVE"))
    assert _devices(_vm(cluster, uuid)) == before


def test_rescue_of_a_stopped_server_ends_rescued_and_unrescue_active(world):
    client, controller, _cluster, _conf = world
    uuid = _boot(client, controller)
    assert _action(client, uuid, {"os-stop": None}).status_code == 202
    until(client, controller, uuid, _settled("SHUTOFF"))
    got = _action(client, uuid, {"rescue": {"rescue_image_ref": IMAGE_ALT}})
    assert got.status_code == 200
    shown = until(client, controller, uuid, _settled("RESCUE")).json["server"]
    assert shown["OS-EXT-STS:power_state"] == 1
    assert _action(client, uuid, {"unrescue": None}).status_code == 202
    assert until(client, controller, uuid, _settled("ACTIVE")).json["server"]["status"] == "ACTIVE"


def test_refusals_write_nothing(world):
    client, controller, _cluster, conf = world
    uuid = _boot(client, controller)
    for ref in (MISSING, SNAPSHOT_IMAGE):
        got = _action(client, uuid, {"rescue": {"rescue_image_ref": ref}})
        assert got.status_code == 400
        assert got.json["badRequest"]["message"] == f"Requested rescue image '{ref}' is not supported"
    got = _action(client, uuid, {"unrescue": None})
    assert got.status_code == 409
    assert got.json["conflictingRequest"]["message"] == (
        f"Cannot 'unrescue' instance {uuid} while it is in vm_state active")
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"rescue": {"bogus": 1}})
    assert got.status_code == 400
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=admin(),
                       json_body={"lock": None}).status_code == 202
    got = _action(client, uuid, {"rescue": None})
    assert got.status_code == 409
    assert got.json["conflictingRequest"]["message"] == f"Instance {uuid} is locked"
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=DEMO).json["instanceActions"]
    assert [a["action"] for a in actions if "rescue" in a["action"]] == []
    shown = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", None)

    # [api] enable_instance_password false: {} (the admin is not held by the lock)
    conf.set_override("enable_instance_password", False, group="api")
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=admin(), json_body={"rescue": None})
    assert (got.status_code, got.json) == (200, {})


def test_a_rescue_image_that_cannot_be_imported_puts_the_vm_back(world):
    client, controller, cluster, _conf = world
    uuid = _boot(client, controller)
    before = _devices(_vm(cluster, uuid))
    cluster.inject(Fault(kind="import-failure", name=f"{uuid}-rescue", times=100))
    assert _action(client, uuid, {"rescue": None}).status_code == 200
    shown = until(client, controller, uuid, _settled("ERROR")).json["server"]
    assert shown["fault"]["code"] == 400
    assert shown["fault"]["message"] == (
        f"Instance {uuid} cannot be rescued: Driver Error: the rescue image could not be imported")
    assert _events(client, uuid, "rescue")[0][:2] == ("compute_rescue_instance", "Error")
    # nothing of the rescue left, the VM as it was: a hard reboot brings the server's own guest back
    assert not [k for kind in ("DataVolume", "Secret") for k in cluster.objects(kind) if "rescue" in k[1]]
    assert _devices(_vm(cluster, uuid)) == before
    assert _action(client, uuid, {"reboot": {"type": "HARD"}}).status_code == 202
    assert until(client, controller, uuid, _settled("ACTIVE")).json["server"]["status"] == "ACTIVE"
    assert _vmi_disks(cluster, uuid) == [d["name"] for d in before[0]]


def test_a_booted_server_finds_its_metadata_by_the_address_its_guest_has(world):
    # the metadata service beside the same database: the guest's address is the one its VMI reports
    client, controller, _cluster, conf = world
    uuid = _boot(client, controller)
    shown = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]
    ((address,),) = [[a["addr"] for a in entries] for entries in shown["addresses"].values()]
    app = MetadataApp(db_api.get_engine(conf))
    got = webob.Request.blank("/openstack/latest/meta_data.json", remote_addr=address).get_response(app)
    assert (got.status_int, got.json["uuid"], got.json["name"]) == (200, uuid, "sick")
    assert webob.Request.blank("/latest/meta-data/local-ipv4", remote_addr=address).get_response(app).text == address


def test_an_unrescue_cut_short_leaves_nothing_of_the_rescue(world):
    # as if a controller had put the VM's own disks back and died before deleting the rescue's objects
    client, controller, cluster, _conf = world
    uuid = _boot(client, controller)
    before = _devices(_vm(cluster, uuid))
    assert _action(client, uuid, {"rescue": None}).status_code == 200
    until(client, controller, uuid, _settled("RESCUE"))
    vm = _vm(cluster, uuid)
    namespace = vm["metadata"]["namespace"]
    request = urllib.request.Request(
        f"{cluster.url}/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{uuid}",
        data=json.dumps(unrescue_patch(vm)).encode(), method="PATCH",
        headers={"Content-Type": "application/json-patch+json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200
    assert [k for kind in ("DataVolume", "Secret") for k in cluster.objects(kind) if "rescue" in k[1]]
    assert _action(client, uuid, {"unrescue": None}).status_code == 202
    until(client, controller, uuid, _settled("ACTIVE"))
    assert not [k for kind in ("DataVolume", "Secret") for k in cluster.objects(kind) if "rescue" in k[1]]
    assert _devices(_vm(cluster, uuid)) == before
