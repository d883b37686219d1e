"""The controller and a server booted with volumes: until volumes are carried out on KubeVirt, the build
ends at once in ERROR with Nova's "Build of instance <uuid> aborted: <reason>", nothing made on the
cluster; an image boot without volumes is untouched."""

from __future__ import annotations

import time

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.databases import ENGINES, throwaway_database
from tests.server_world import image_service, server_world
from tests.server_world import out_of_build as _until_settled

ADMIN = admin("2.96")


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, cinder):
    policies.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url},
                         cinder={"auth_type": "admin_token", "endpoint": cinder.url, "token": "cinder-admin",
                                 "endpoint_template": cinder.url + "/v3/%(project_id)s"})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            got = client.post("/v2.1/flavors", headers=admin(), json_body={
                "flavor": {"name": "small", "ram": 512, "vcpus": 1, "disk": 1, "id": "small"}})
            assert got.status_code == 200, got.text
            yield client, controller, cluster


def _boot(client, bdms):
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": bdms}})
    assert got.status_code == 202, got.text
    return got.json["server"]["id"]


def _vm(cluster, uuid):
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(uuid)]
    return vm


def test_boot_from_a_volume_runs_on_its_claim(world, cinder):
    """The attachment gets the node's connector, its NFS connection_info becomes a static PersistentVolume
    bound to a claim by name, the VM's root disk is that claim (no import), serial = volume id; the
    attachment is completed: the volume in-use by the server."""
    client, controller, cluster = world
    root, data = cinder.volume(bootable=True, size=2), cinder.volume()
    uuid = _boot(client, [
        {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0},
        {"source_type": "volume", "destination_type": "volume", "uuid": data["id"], "disk_bus": "scsi"}])
    server = _until_settled(client, controller, uuid)
    assert server["status"] == "ACTIVE", server
    vm = _vm(cluster, uuid)
    assert "dataVolumeTemplates" not in vm["spec"]
    tspec = vm["spec"]["template"]["spec"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in tspec["volumes"]
              if "persistentVolumeClaim" in v}
    assert claims == {"root": f"vol-{root['id']}", f"vol-{data['id']}": f"vol-{data['id']}"}
    serials = {d["name"]: (d.get("serial"), d.get("disk")) for d in tspec["domain"]["devices"]["disks"]}
    assert serials["root"][0] == root["id"]
    assert serials[f"vol-{data['id']}"] == (data["id"], {"bus": "scsi"})
    pvcs = {k[1]: v for k, v in cluster.objects("PersistentVolumeClaim").items() if k[1].startswith("vol-")}
    assert pvcs[f"vol-{root['id']}"]["status"]["phase"] == "Bound"
    pvs = [v for v in cluster.objects("PersistentVolume").values()
           if v["spec"]["claimRef"]["name"] == f"vol-{root['id']}"]
    assert pvs[0]["spec"]["nfs"] == {"server": "127.0.0.1", "path": "/srv/okc-nfs", "readOnly": False}
    assert pvs[0]["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert {cinder.volumes[v["id"]]["status"] for v in (root, data)} == {"in-use"}
    updates = [r for r in cinder.requests if r["method"] == "PUT" and "/attachments/" in r["path"]]
    assert len(updates) == 2 and all(r["body"]["attachment"]["connector"]["host"] is not None for r in updates)


def test_cinder_down_at_the_build_is_novas_build_abort(world, cinder):
    client, controller, cluster = world
    volume = cinder.volume(bootable=True)
    uuid = _boot(client, [{"source_type": "volume", "destination_type": "volume", "uuid": volume["id"],
                           "boot_index": 0}])
    cinder.fail_with = 503
    server = _until_settled(client, controller, uuid)
    assert server["fault"]["message"] == f"Build of instance {uuid} aborted: Failure prepping block device."
    assert not [k for k in cluster.objects("VirtualMachine") if k[1].endswith(uuid)]
    cinder.fail_with = None
    assert client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 204
    deadline = time.monotonic() + 120
    while client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code != 404 and time.monotonic() < deadline:
        controller.run_once()
        time.sleep(0.05)
    assert cinder.attachments == {} and cinder.volumes[volume["id"]]["status"] == "available"


def test_delete_gives_the_reservation_back_and_deletes_volumes_marked_so(world, cinder):
    client, controller, cluster = world
    keep, drop = cinder.volume(bootable=True), cinder.volume()
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": keep["id"], "boot_index": 0},
            {"source_type": "volume", "destination_type": "volume", "uuid": drop["id"],
             "delete_on_termination": True}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    _until_settled(client, controller, uuid)
    assert len(cinder.attachments) == 2
    pvs_before = [k for k, v in cluster.objects("PersistentVolume").items()
                  if v["metadata"]["labels"].get("openkeel.io/volume-id") in (keep["id"], drop["id"])]
    assert len(pvs_before) == 2
    assert client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 204
    deadline = time.monotonic() + 120
    while client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code != 404 and time.monotonic() < deadline:
        controller.run_once()
        time.sleep(0.05)
    assert cinder.attachments == {}
    assert cinder.volumes[keep["id"]]["status"] == "available" and drop["id"] not in cinder.volumes
    assert not [k for k in cluster.objects("PersistentVolume") if k in pvs_before]
    assert not [k for k in cluster.objects("PersistentVolumeClaim") if k[1].startswith("vol-")]
    deletes = [r for r in cinder.requests if r["method"] == "DELETE"]
    assert deletes and all(r["token"] == "cinder-admin" for r in deletes)  # as Nova's compute: [cinder]'s


def test_a_volume_backed_root_claims_no_disk_gb():
    """Nova's is_bfv: the flavor's root_gb is not claimed when the root disk is a volume; ephemeral and swap are."""
    from openkeel_compute.compute import flavor_copy
    from openkeel_compute.controller.claims import Claims
    from openkeel_compute.model import sysmeta

    row = {"id": 1, "name": "f", "memory_mb": 512, "vcpus": 1, "root_gb": 10, "ephemeral_gb": 2, "flavorid": "f",
           "swap": 1024, "rxtx_factor": 1.0, "vcpu_weight": 0, "disabled": False, "is_public": True}
    flavor = flavor_copy.dumps(flavor_copy.primitive(row, {}))
    claims = Claims(None)  # type: ignore[arg-type]
    image_backed = claims.request_of({"flavor": flavor, "system_metadata": {}})
    volume_backed = claims.request_of({"flavor": flavor, "system_metadata": {sysmeta.BOOT_FROM_VOLUME: "True"}})
    assert image_backed.unsuffixed.resources["DISK_GB"] == 13
    assert volume_backed.unsuffixed.resources["DISK_GB"] == 3


def test_an_image_boot_with_mappings_leaves_no_row_behind(world, cinder):
    """The image's root mapping and the flavor's disks are kept at boot and soft-deleted with the server."""
    import sqlalchemy as sa

    from openkeel_compute.db import models
    from tests.server_world import IMAGE

    client, controller, _cluster = world
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "img", "imageRef": IMAGE, "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert _until_settled(client, controller, uuid)["status"] == "ACTIVE"
    assert client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 204
    deadline = time.monotonic() + 120
    while client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code != 404 and time.monotonic() < deadline:
        controller.run_once()
        time.sleep(0.05)
    table = models.BLOCK_DEVICE_MAPPING
    with db_api.reader(controller.engine) as conn:
        live = conn.execute(sa.select(sa.func.count()).select_from(table).where(
            table.c.instance_uuid == uuid, table.c.deleted == 0)).scalar()
    assert live == 0
