"""POST /servers with block devices: block_device_mapping_v2 and the legacy block_device_mapping read,
checked against Cinder and kept (block_device_mapping) as Nova 34.0.0's API does (its words and
codes, measured on the servers oracle), each existing volume reserved for its server (a Cinder
attachment without a connector). A refusal writes nothing and leaves no attachment in Cinder."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.api.servers.helpers import IMAGE, local_image_service, row_counts
from tests.conftest import make_conf, user
from tests.databases import ENGINES, throwaway_database

PROJECT = "demo"
UNKNOWN = "11111111-2222-3333-4444-555555555555"


@pytest.fixture(scope="module", params=ENGINES)
def database_url(request, tmp_path_factory):
    with throwaway_database(request.param, tmp_path_factory.mktemp("db")) as url:
        yield url


def _world(tmp_path, database_url, cinder=None, **extra):
    from openkeel_compute import policies
    from openkeel_compute.api.deploy import deploy
    from tests.wsgi_client import Client

    policies.reset()
    overrides = {"database": {"connection": database_url}, **extra}
    if cinder is not None:
        overrides["cinder"] = {"auth_type": "admin_token", "endpoint": cinder.url, "token": "cinder-admin",
                               "endpoint_template": cinder.url + "/v3/%(project_id)s",
                               **overrides.pop("cinder_options", {})}
    conf = make_conf(tmp_path, **overrides)
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    return conf, Client(deploy(conf)), engine


@pytest.fixture
def world(tmp_path, cinder, database_url):
    from openkeel_compute import policies

    conf, client, engine = _world(tmp_path, database_url, cinder)
    with local_image_service(conf, tmp_path):
        _flavors(engine)
        yield client, engine, cinder
    db_api.dispose_all()
    policies.reset()


def _flavors(engine):
    from openkeel_compute.catalog import errors as catalog_errors
    from openkeel_compute.catalog import flavors as catalog

    with db_api.transaction(engine) as conn:
        for flavorid, extra in (("1", {}), ("eph", {"ephemeral_gb": 1, "swap": 512})):
            try:
                catalog.get(conn, flavorid)
            except catalog_errors.FlavorNotFound:  # not made yet in this engine's database
                catalog.create(conn, name=f"m1.{flavorid}", memory_mb=512, vcpus=1, root_gb=1, flavorid=flavorid,
                               **extra)


def _boot(client, version="2.100", project=PROJECT, **fields):
    server = {"name": "v1", "flavorRef": "1", "networks": "none", **fields}
    return client.post("/v2.1/servers", headers=user(project, name="demo", version=version),
                       json_body={"server": server})


def _volume_boot(volume_id, **extra):
    return {"block_device_mapping_v2": [{"source_type": "volume", "destination_type": "volume", "uuid": volume_id,
                                         "boot_index": 0, **extra}]}


def _bdm_rows(engine):
    with db_api.reader(engine) as conn:
        return [dict(r._mapping) for r in conn.execute(
            sa.select(models.BLOCK_DEVICE_MAPPING).order_by(models.BLOCK_DEVICE_MAPPING.c.id))]


def _refused(world, code, message, version="2.100", **fields):
    client, engine, cinder = world
    before = (row_counts(engine), len(_bdm_rows(engine)))
    resp = _boot(client, version=version, **fields)
    kind = {400: "badRequest", 403: "forbidden", 409: "conflictingRequest", 500: "computeFault"}[code]
    assert (resp.status_code, resp.json) == (code, {kind: {"code": code, "message": message}})
    assert (row_counts(engine), len(_bdm_rows(engine))) == before
    assert cinder.attachments == {}  # nothing reserved is left behind
    return resp


# -- accepted boots ------------------------------------------------------------------------------

def test_boot_from_an_existing_volume_reserves_it_and_keeps_the_mapping(world):
    client, engine, cinder = world
    volume = cinder.volume(size=2, bootable=True, image_metadata={"min_disk": "1", "hw_disk_bus": "virtio"})
    resp = _boot(client, **_volume_boot(volume["id"], delete_on_termination="true", tag="root"))
    assert resp.status_code == 202, resp.json
    server_id = resp.json["server"]["id"]
    (attachment,) = cinder.attachments.values()
    assert (attachment["instance"], attachment["status"]) == (server_id, "reserved")
    assert cinder.volumes[volume["id"]]["status"] == "reserved"
    (row,) = [r for r in _bdm_rows(engine) if r["instance_uuid"] == server_id]
    assert (row["source_type"], row["destination_type"], row["volume_id"], row["boot_index"]) == (
        "volume", "volume", volume["id"], 0)
    assert (row["volume_size"], row["delete_on_termination"], row["tag"], row["attachment_id"]) == (
        2, True, "root", attachment["id"])
    with db_api.reader(engine) as conn:
        image_ref = conn.execute(sa.select(models.INSTANCES.c.image_ref).where(
            models.INSTANCES.c.uuid == server_id)).scalar()
    assert image_ref == ""  # volume-backed: no image, as Nova keeps it
    calls = [r for r in cinder.requests if r["method"] == "GET" and "/volumes/" in r["path"]]
    assert calls and all(r["token"] for r in calls)  # read as the caller


def test_image_boot_with_a_data_volume_and_the_flavors_disks(world):
    client, engine, cinder = world
    volume = cinder.volume()
    resp = _boot(client, imageRef=IMAGE, flavorRef="eph", block_device_mapping_v2=[
        {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0},
        {"source_type": "volume", "destination_type": "volume", "uuid": volume["id"], "device_name": "vdb"}])
    assert resp.status_code == 202, resp.json
    rows = [r for r in _bdm_rows(engine) if r["instance_uuid"] == resp.json["server"]["id"]]
    kinds = [(r["source_type"], r["destination_type"], r["guest_format"], r["boot_index"], r["volume_size"])
             for r in rows]
    assert kinds == [("image", "local", None, 0, None), ("volume", "volume", None, None, 1),
                     ("blank", "local", None, -1, 1), ("blank", "local", "swap", -1, 512)]
    assert rows[1]["device_name"] == "/dev/vdb"


def test_legacy_mapping_on_vda_boots_from_the_volume(world):
    client, engine, cinder = world
    volume = cinder.volume(bootable=True)
    resp = _boot(client, block_device_mapping=[{"volume_id": volume["id"], "device_name": "vda",
                                                "delete_on_termination": "1"}])
    assert resp.status_code == 202, resp.json
    (row,) = [r for r in _bdm_rows(engine) if r["instance_uuid"] == resp.json["server"]["id"]]
    assert (row["source_type"], row["boot_index"], row["device_name"], row["delete_on_termination"]) == (
        "volume", 0, "/dev/vda", True)


def test_volumes_made_from_an_image_a_snapshot_or_nothing(world):
    client, engine, cinder = world
    snapshot = cinder.snapshot(cinder.volume(size=3))
    resp = _boot(client, version="2.67", block_device_mapping_v2=[
        {"source_type": "image", "destination_type": "volume", "uuid": IMAGE, "boot_index": 0, "volume_size": 2,
         "volume_type": cinder.types[0]["id"]},
        {"source_type": "snapshot", "destination_type": "volume", "uuid": snapshot["id"], "boot_index": 1},
        {"source_type": "blank", "destination_type": "volume", "volume_size": 1, "boot_index": -1}])
    assert resp.status_code == 202, resp.json
    rows = [r for r in _bdm_rows(engine) if r["instance_uuid"] == resp.json["server"]["id"]]
    assert [(r["source_type"], r["volume_size"], r["volume_type"]) for r in rows] == [
        ("image", 2, cinder.types[0]["name"]), ("snapshot", 3, None), ("blank", 1, None)]
    assert cinder.attachments == {}  # volumes still to be made are not reserved


# -- refusals, in Nova's words --------------------------------------------------------------------

def test_format_refusals(world):
    vol = world[2].volume()["id"]
    _refused(world, 400, "Using different block_device_mapping syntaxes is not allowed in the same request.",
             block_device_mapping=[{"volume_id": vol}], **_volume_boot(vol))
    _refused(world, 400, "Block Device Mapping is Invalid: Invalid device UUID.", block_device_mapping_v2=[
        {"source_type": "blank", "destination_type": "volume", "uuid": vol, "boot_index": 0}])
    _refused(world, 400, "Block Device Mapping is Invalid: Missing device UUID.", block_device_mapping_v2=[
        {"source_type": "image", "destination_type": "volume", "boot_index": 0}])
    _refused(world, 400, "Block Device Mapping is Invalid: Mapping image to local is not supported.",
             block_device_mapping_v2=[{"source_type": "image", "destination_type": "local", "uuid": IMAGE,
                                       "boot_index": 0}])
    _refused(world, 400, "Block Device Mapping is Invalid: Specifying volume type to existing volume is not "
                         "supported.", **_volume_boot(vol, volume_type="x"))
    _refused(world, 400, "Block Device Mapping is Invalid: Specifying a volume_type with destination_type=local is "
                         "not supported.", block_device_mapping_v2=[
                 {"source_type": "blank", "destination_type": "local", "boot_index": 0, "volume_type": "x"}])
    _refused(world, 400, "Block Device Mapping is Invalid: Unrecognized legacy format.",
             block_device_mapping=[{"device_name": "vdb"}])
    _refused(world, 400, "Block Device Mapping is Invalid: Following fields are invalid: virtual_name",
             **_volume_boot(vol, virtual_name="swap"))
    _refused(world, 400, "Missing imageRef attribute")


def test_schema_per_microversion(world):
    vol = world[2].volume(bootable=True)["id"]
    client = world[0]
    assert _boot(client, version="2.66", **_volume_boot(vol, volume_type=None)).status_code == 400
    assert _boot(client, version="2.33", networks=[], **_volume_boot(vol, tag="t")).status_code == 400
    assert _boot(client, version="2.41", networks="none", **_volume_boot(vol, tag="t")).status_code == 400
    assert world[2].attachments == {}
    resp = _boot(client, version="2.32", networks=[], **_volume_boot(vol, tag="t"))
    assert resp.status_code == 202, resp.json


def test_boot_sequence_and_root_device(world):
    vol = world[2].volume()["id"]
    sequence = ("Block Device Mapping is Invalid: Boot sequence for the instance and image/block device mapping "
                "combination is not valid.")
    _refused(world, 400, sequence, **_volume_boot(vol, boot_index=1))
    _refused(world, 400, sequence, imageRef=IMAGE, **_volume_boot(vol, boot_index=None))
    _refused(world, 400, sequence, block_device_mapping=[{"volume_id": vol, "device_name": "vdb"}])
    _refused(world, 400, "The volume cannot be assigned the same device name as the root device vda",
             imageRef=IMAGE, block_device_mapping_v2=[
                 {"source_type": "volume", "destination_type": "volume", "uuid": vol, "boot_index": 1,
                  "device_name": "/dev/vda"},
                 {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0}])


def test_volume_refusals(world):
    cinder = world[2]
    _refused(world, 400, f"Volume {UNKNOWN} could not be found.", imageRef=IMAGE, block_device_mapping_v2=[
        {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0},
        {"source_type": "volume", "destination_type": "volume", "uuid": UNKNOWN}])
    _refused(world, 400, f"Block Device Mapping is Invalid: failed to get volume {UNKNOWN}.",
             **_volume_boot(UNKNOWN))
    in_use = cinder.volume(status="in-use", bootable=True)
    _refused(world, 400, f"Invalid volume: Invalid input received: Invalid volume: Volume {in_use['id']} status must "
                         "be available or downloading to reserve, but the current status is in-use. (HTTP 400) "
                         "(Request-ID: req-fake)", **_volume_boot(in_use["id"]))
    not_bootable = cinder.volume()
    not_bootable["bootable"] = "false"
    _refused(world, 400, f"Block Device {not_bootable['id']} is not bootable.", **_volume_boot(not_bootable["id"]))
    multi = cinder.volume(multiattach=True, bootable=True)["id"]
    _refused(world, 400, "Multiattach volumes are only supported starting with compute API version 2.60.",
             version="2.59", **_volume_boot(multi))
    _refused(world, 400, "Cannot attach one or more volumes to multiple instances", max_count=2,
             **_volume_boot(cinder.volume(bootable=True)["id"]))
    _refused(world, 400, f"Block Device Mapping is Invalid: failed to get snapshot {UNKNOWN}.", imageRef=IMAGE,
             block_device_mapping_v2=[
                 {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0},
                 {"source_type": "snapshot", "destination_type": "volume", "uuid": UNKNOWN}])
    _refused(world, 400, "Volume type nope could not be found.", block_device_mapping_v2=[
        {"source_type": "blank", "destination_type": "volume", "volume_size": 1, "boot_index": 0,
         "volume_type": "nope"}])


def test_size_and_disk_refusals(world):
    vol = world[2].volume(bootable=True)["id"]
    _refused(world, 400, "Blank volumes (source: 'blank', dest: 'volume') need to have non-zero size",
             block_device_mapping_v2=[{"source_type": "blank", "destination_type": "volume", "boot_index": 0}])
    _refused(world, 400, "Images with destination_type 'volume' need to have a non-zero size specified",
             block_device_mapping_v2=[{"source_type": "image", "destination_type": "volume", "uuid": IMAGE,
                                       "boot_index": 0}])
    _refused(world, 400, "Block Device Mapping is Invalid.", **_volume_boot(vol, disk_bus="foo"))
    _refused(world, 400, "Ephemeral disks requested are larger than the instance type allows. If no size is given "
                         "in one block device mapping, flavor ephemeral size will be used.",
             block_device_mapping_v2=[_volume_boot(vol)["block_device_mapping_v2"][0],
                                      {"source_type": "blank", "destination_type": "local", "boot_index": -1,
                                       "volume_size": 5}])
    _refused(world, 400, "Swap drive requested is larger than instance type allows.",
             block_device_mapping_v2=[_volume_boot(vol)["block_device_mapping_v2"][0],
                                      {"source_type": "blank", "destination_type": "local", "boot_index": -1,
                                       "guest_format": "swap", "volume_size": 5}])


def test_root_volume_below_the_images_min_disk(world):
    client = world[0]
    from tests.api.servers.helpers import QUEUED  # noqa: F401 (the image service of the helpers)

    resp = _boot(client, block_device_mapping_v2=[{"source_type": "image", "destination_type": "volume",
                                                   "uuid": IMAGE, "boot_index": 0, "volume_size": 1}])
    assert resp.status_code == 202, resp.json  # the helpers' image has no min_disk


def test_other_zone_with_cross_az_attach_false(tmp_path, cinder, database_url):
    from openkeel_compute import policies

    conf, client, engine = _world(tmp_path, database_url, cinder, cinder_options={"cross_az_attach": "false"},
                                  DEFAULT={"max_local_block_devices": 0})
    with local_image_service(conf, tmp_path):
        _flavors(engine)
        world = (client, engine, cinder)
        _refused(world, 400, "Block Device Mapping is Invalid: You specified more local devices than the limit "
                             "allows", imageRef=IMAGE, block_device_mapping_v2=[
                     {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0}])
        a, b = cinder.volume(zone="az1", bootable=True), cinder.volume(zone="az2")
        _refused(world, 400, "The availability zone between the server and its attached volumes do not match: "
                             "Volumes are in different availability zones: az1,az2.",
                 block_device_mapping_v2=[_volume_boot(a["id"])["block_device_mapping_v2"][0],
                                          {"source_type": "volume", "destination_type": "volume", "uuid": b["id"]}])
    db_api.dispose_all()
    policies.reset()


def test_cinder_down_is_novas_500_and_nothing_is_written(world):
    cinder = world[2]
    vol = cinder.volume()["id"]
    cinder.fail_with = 500
    _refused(world, 500, "Unexpected API Error. Please contact the administrator\n"
                         "<class 'nova.exception.CinderConnectionFailed'>", **_volume_boot(vol))


def test_a_failed_reservation_releases_the_others(world):
    """The second volume cannot be reserved: the first one's attachment is deleted, nothing is written."""
    cinder = world[2]
    first, second = cinder.volume(bootable=True), cinder.volume(status="error")
    _refused(world, 400, f"Invalid volume: Invalid input received: Invalid volume: Volume {second['id']} status must "
                         "be available or downloading to reserve, but the current status is error. (HTTP 400) "
                         "(Request-ID: req-fake)", block_device_mapping_v2=[
                 _volume_boot(first["id"])["block_device_mapping_v2"][0],
                 {"source_type": "volume", "destination_type": "volume", "uuid": second["id"]}])
    assert cinder.volumes[first["id"]]["status"] == "available"
    assert [r["method"] for r in cinder.requests if "/attachments" in r["path"]] == ["POST", "POST", "DELETE"]


def test_quota_refusal_reserves_nothing(world):
    """Nova checks the quota before it reserves: a boot over quota leaves no attachment behind."""
    client, _engine, cinder = world
    vol = cinder.volume(bootable=True)
    resp = client.put("/v2.1/os-quota-sets/quota-demo", headers=user("admin", name="admin", version="2.100"),
                      json_body={"quota_set": {"instances": 0}})
    assert resp.status_code == 200, resp.json
    resp = _boot(client, project="quota-demo", **_volume_boot(vol["id"]))
    assert resp.status_code == 403, resp.json
    assert cinder.attachments == {} and cinder.volumes[vol["id"]]["status"] == "available"


def test_without_cinder_volumes_are_refused(tmp_path, cinder, database_url):
    from openkeel_compute import policies

    conf, client, engine = _world(tmp_path, database_url)
    with local_image_service(conf, tmp_path):
        _flavors(engine)
        resp = _boot(client, **_volume_boot(UNKNOWN))
        assert resp.status_code == 400
        assert "no block storage service" in resp.json["badRequest"]["message"]
        resp = _boot(client, imageRef=IMAGE, block_device_mapping_v2=[
            {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0}])
        assert resp.status_code == 202, resp.json  # the image's own root disk needs no Cinder
    db_api.dispose_all()
    policies.reset()
