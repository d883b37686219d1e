"""createImage and createBackup at the API: the image made in the image service with Nova's properties,
the task set, the controller asked; Nova's answers (checked against the live Nova 34.0.0 servers oracle:
the 2.45 body, the Location before it, none for a backup with rotation 0, the lock not refusing, the 409
while a snapshot is pending, the quota of metadata items before 2.39). Runs on the three engines."""

from __future__ import annotations

import json
import pathlib

import pytest

from openkeel_compute.db import api as db_api
from tests.api.servers import oracle_state as oracle
from tests.api.servers.helpers import (
    PATH,
    UUID,
    answer_of,
    demo,
    last_action,
    local_image_service,
    outbox_rows,
    server_row,
    set_server,
)
from tests.conftest import admin


@pytest.fixture
def engine(app, conf):
    engine = db_api.get_engine(conf)
    oracle.boot_server_a(engine)
    with db_api.transaction(engine) as conn:
        from openkeel_compute.compute.instances import instance_sysmeta

        for key, value in {"image_base_image_ref": oracle.IMAGE, "image_hw_disk_bus": "virtio",
                           "image_img_signature": "sig", "image_os_glance_import_method": "x",
                           "image_cache_in_nova": "True"}.items():
            instance_sysmeta.set_system_metadata_item(conn, UUID, key, value)
    return engine


@pytest.fixture
def images(conf, tmp_path):
    with local_image_service(conf, tmp_path):
        yield tmp_path / "images"


def _image(directory: pathlib.Path, image_id: str) -> dict:
    return json.loads((directory / f"{image_id}.json").read_text())


def _images(directory: pathlib.Path) -> set[str]:
    return {p.stem for p in directory.glob("*.json")}


def test_create_image_makes_a_queued_image_with_novas_properties(client, engine, images):
    before = _images(images)
    got = client.post(PATH, headers=demo("2.45"), json_body={"createImage": {"name": "snap", "metadata": {"k": "v"}}})
    assert got.status_code == 202 and list(got.json) == ["image_id"]
    image_id = got.json["image_id"]
    assert _images(images) - before == {image_id}
    image = _image(images, image_id)
    assert (image["name"], image["status"], image["visibility"], image["owner"]) == ("snap", "queued", "private",
                                                                                     "demo")
    assert (image["min_ram"], image["min_disk"], image["disk_format"], image["container_format"]) == (0, 1, None,
                                                                                                      None)
    assert {k: image.get(k) for k in ("instance_uuid", "user_id", "image_type", "base_image_ref", "k",
                                      "architecture", "hw_disk_bus")} == {
        "instance_uuid": UUID, "user_id": "demo", "image_type": "snapshot", "base_image_ref": oracle.IMAGE,
        "k": "v", "architecture": "x86_64", "hw_disk_bus": "virtio"}
    # never inherited: the signature, the os_glance namespace, [DEFAULT] non_inheritable_image_properties
    assert not {"img_signature", "os_glance_import_method", "cache_in_nova"} & set(image)
    row = server_row(engine)
    assert (row["vm_state"], row["task_state"]) == ("active", "image_snapshot_pending")
    assert outbox_rows(engine)[-1][0] == "snapshot" and outbox_rows(engine)[-1][1]["image_id"] == image_id
    assert last_action(engine) == ("createImage", [])
    # a second one while the first is pending: Nova's 409, and no second image
    got = client.post(PATH, headers=demo("2.45"), json_body={"createImage": {"name": "again"}})
    assert answer_of(got) == (409, (f"Cannot 'createImage' instance {UUID} while it is in task_state "
                                   "image_snapshot_pending"))
    assert _images(images) - before == {image_id}


def test_before_2_45_the_location_names_the_image(client, engine, images, conf):
    got = client.post(PATH, headers=demo("2.44"), json_body={"createImage": {"name": "snap"}})
    assert (got.status_code, got.content) == (202, b"")
    location = got.header("Location")
    assert location.startswith(conf.glance.api_servers[0] + "/images/")
    assert location.rsplit("/", 1)[1] in _images(images)


def test_backup_image_keeps_the_formats_and_says_its_type(client, engine, images):
    got = client.post(PATH, headers=demo("2.1"), json_body={"createBackup": {
        "name": "b1", "backup_type": "daily", "rotation": 2, "metadata": {"x": "y"}}})
    assert (got.status_code, got.content) == (202, b"")
    assert "/v2.1/images/" in got.header("Location")
    image = _image(images, got.header("Location").rsplit("/", 1)[1])
    assert {k: image.get(k) for k in ("image_type", "backup_type", "x", "disk_format", "container_format")} == {
        "image_type": "backup", "backup_type": "daily", "x": "y", "disk_format": "raw", "container_format": "bare"}
    assert server_row(engine)["task_state"] == "image_backup"
    operation, payload = outbox_rows(engine)[-1]
    assert (operation, payload["backup_type"], payload["rotation"]) == ("backup", "daily", 2)
    assert last_action(engine) == ("createBackup", [])


def test_backup_with_rotation_zero_has_no_location(client, engine, images):
    got = client.post(PATH, headers=demo("2.1"), json_body={"createBackup": {
        "name": "b0", "backup_type": "daily", "rotation": 0}})
    assert (got.status_code, got.header("Location")) == (202, None)
    got = client.post(PATH, headers=admin("2.45"), json_body={"createBackup": {
        "name": "b0", "backup_type": "daily", "rotation": 0}})
    assert answer_of(got)[0] == 409  # the first still runs


def test_the_lock_does_not_refuse_a_snapshot(client, engine, images):
    set_server(engine, locked=True, locked_by="owner")
    got = client.post(PATH, headers=demo("2.45"), json_body={"createImage": {"name": "snap"}})
    assert got.status_code == 202


def test_a_refused_request_leaves_no_image(client, engine, images):
    before = _images(images)
    set_server(engine, vm_state="shelved")
    got = client.post(PATH, headers=demo("2.45"), json_body={"createImage": {"name": "snap"}})
    assert answer_of(got) == (409, f"Cannot 'createImage' instance {UUID} while it is in vm_state shelved")
    got = client.post(PATH, headers=demo("2.45"), json_body={"createBackup": {
        "name": "b", "backup_type": "daily", "rotation": 1}})
    assert answer_of(got) == (409, f"Cannot 'createBackup' instance {UUID} while it is in vm_state shelved")
    assert _images(images) == before and outbox_rows(engine) == []


def test_metadata_items_quota_until_2_38(client, engine, images):
    many = {f"k{i}": "v" for i in range(129)}
    for body in ({"createImage": {"name": "q", "metadata": many}},
                 {"createBackup": {"name": "q", "backup_type": "d", "rotation": 1, "metadata": many}}):
        got = client.post(PATH, headers=demo("2.38"), json_body=body)
        assert answer_of(got) == (403, "Image metadata limit exceeded")
    got = client.post(PATH, headers=demo("2.39"), json_body={"createImage": {"name": "q", "metadata": many}})
    assert got.status_code == 202


def test_bad_bodies_as_nova(client, engine, images):
    got = client.post(PATH, headers=demo("2.45"), json_body={"createBackup": {
        "name": "q", "backup_type": "d", "rotation": -1}})
    assert answer_of(got) == (400, ("Invalid input for field/attribute rotation. Value: -1. -1 is less than the "
                                   "minimum of 0"))
    got = client.post(PATH, headers=demo("2.45"), json_body={"createImage": {"name": ""}})
    assert answer_of(got) == (400, "Invalid input for field/attribute name. Value: . '' should be non-empty")
    got = client.post(PATH, headers=demo("2.45"), json_body={"createImage": {"name": " snap "}})
    assert answer_of(got) == (400, ("An invalid 'name' value was provided. The name must be: printable characters. "
                                   "Can not start or end with whitespace."))


def test_the_image_service_away_is_novas_500_and_nothing_starts(client, engine, conf):
    from openkeel_compute.images import glance

    glance.register_opts(conf)
    conf.set_override("api_servers", ["http://127.0.0.1:9"], group="glance")
    conf.set_override("num_retries", 0, group="glance")
    got = client.post(PATH, headers=demo("2.45"), json_body={"createImage": {"name": "snap"}})
    assert got.status_code == 500 and "GlanceConnectionFailed" in got.json["computeFault"]["message"]
    assert server_row(engine)["task_state"] is None and outbox_rows(engine) == []


def test_an_admins_snapshot_of_another_projects_server_is_shared_with_it(client, engine, images):
    got = client.post(PATH, headers=admin("2.45"), json_body={"createImage": {"name": "admin-snap"}})
    assert got.status_code == 202
    image = _image(images, got.json["image_id"])
    assert (image["visibility"], image["owner"], image["user_id"]) == ("shared", "admin", "admin")
    assert "instance_owner" not in image  # Nova sends it as the member, not as a property
    assert [(m["member_id"], m["status"]) for m in image["_members"]] == [("demo", "pending")]
