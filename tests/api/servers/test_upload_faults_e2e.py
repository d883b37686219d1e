"""The image service down or breaking during an upload (createImage, createBackup, shelve), end to end on each
engine: the API, the controller's snapshot and shelve steps, the built-in cluster and the development image
service (tests/api/servers/faulty_images.py).

Nova 34.0.0's compute (nova/compute/manager.py, read in the oracle's virtualenv): a snapshot or backup whose
upload raises is ended by ``delete_image_on_error`` (the image deleted; the image service away for that too:
logged, the image stays ``queued``), ``reverts_task_state`` (task None, the server in its vm_state) and
``wrap_instance_event`` (the action's event ``Error``). A shelve has no ``delete_image_on_error``: its task is
reverted, its event fails, its fault is recorded. Whatever happens, no image is ever ``active`` with part of the
disk, and nothing of the capture stays in the cluster. OpenKeel's controller tries a failed upload again
(``step_attempts``): the service back in time, the upload is made whole."""

from __future__ import annotations

import pytest

from tests.api.servers.faulty_images import (
    capture_left,
    events,
    fault_world,
    run_until_task,
)
from tests.conftest import admin
from tests.server_world import DEMO, boot, settled, until

ACTIONS = {
    "createImage": ({"createImage": {"name": "snap"}}, "image_pending_upload", "createImage",
                    "compute_snapshot_instance"),
    "createBackup": ({"createBackup": {"name": "daily", "backup_type": "daily", "rotation": 2}},
                     "image_pending_upload", "createBackup", "compute_backup_instance"),
}


@pytest.fixture
def world(tmp_path, db_engine, placement_service):
    with fault_world(tmp_path, db_engine, placement_service) as made:
        yield made


@pytest.fixture
def kept_world(tmp_path, db_engine, placement_service):
    with fault_world(tmp_path, db_engine, placement_service, offload_time=-1) as made:
        yield made


def _image_id(got):
    assert got.status_code == 202, got.text
    return got.json["image_id"]


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_image_service_down_for_the_upload_ends_the_task_as_novas_compute(world, action):
    client, controller, cluster, images, _tmp, _placement = world
    body, before_upload, name, event = ACTIONS[action]
    uuid = boot(client, controller)
    image_id = _image_id(client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO | {
        "OpenStack-API-Version": "compute 2.45"}, json_body=body))
    run_until_task(client, controller, uuid, before_upload)
    images.down()  # gone before the bytes are sent, and for longer than the controller tries
    run_until_task(client, controller, uuid, None)
    shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)
    assert events(client, uuid, name) == [(event, "Error")]
    assert capture_left(cluster) == {}
    images.up()
    # Nova's delete_image_on_error could not reach the image service either: the image stays, never active
    image = images.image(image_id)
    assert image is not None and image["status"] == "queued" and image["size"] is None


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_an_upload_cut_off_never_leaves_a_partial_image_and_is_made_whole(world, action):
    client, controller, cluster, images, tmp_path, _placement = world
    body, before_upload, _name, _event = ACTIONS[action]
    uuid = boot(client, controller)
    image_id = _image_id(client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO | {
        "OpenStack-API-Version": "compute 2.45"}, json_body=body))
    run_until_task(client, controller, uuid, before_upload)
    images.cuts = 1  # the next upload's connection breaks after 1000 of its bytes
    # the pass that sends the bytes may come after others that wait for the capture (a loaded machine)
    for _ in range(600):
        if not images.cuts:
            break
        controller.run_once()
    assert images.cuts == 0
    image = images.image(image_id)
    assert image["status"] == "queued" and image["size"] is None  # as Glance: back to queued, no data
    run_until_task(client, controller, uuid, None)
    image = images.image(image_id)
    assert (image["status"], image["size"]) == ("active", 4096)
    assert images.data(image_id) == (tmp_path / "disk.raw").read_bytes()
    assert capture_left(cluster) == {}


def test_an_upload_cut_off_every_time_deletes_the_image(world):
    client, controller, cluster, images, _tmp, _placement = world
    uuid = boot(client, controller)
    image_id = _image_id(client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={
        "createImage": {"name": "cut"}}))
    run_until_task(client, controller, uuid, "image_pending_upload")
    images.cuts = 100
    run_until_task(client, controller, uuid, None)
    assert images.image(image_id) is None  # delete_image_on_error, the image service there
    assert events(client, uuid, "createImage") == [("compute_snapshot_instance", "Error")]
    shown = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert capture_left(cluster) == {}


def test_the_image_service_down_for_a_shelve_leaves_the_server_unshelved(kept_world):
    client, controller, cluster, images, _tmp, placement = kept_world
    uuid = boot(client, controller)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    run_until_task(client, controller, uuid, "shelving_image_pending_upload")
    images.down()
    run_until_task(client, controller, uuid, None)
    images.up()
    # Nova: reverts_task_state; the guest it powered off stays off and the power sync stops the server
    assert until(client, controller, uuid, settled("SHUTOFF")).json["server"]["status"] == "SHUTOFF"
    shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
    assert shown["OS-EXT-SRV-ATTR:host"] and shown["OS-EXT-STS:vm_state"] == "stopped"
    assert events(client, uuid, "shelve") == [("compute_shelve_instance", "Error")]
    assert not any(i["status"] == "active" for i in images.images())
    assert capture_left(cluster) == {}
    assert placement.get_allocations(uuid).allocations  # still on its node: nothing offloaded
    # and it can be shelved again once the image service is back
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    assert until(client, controller, uuid, settled("SHELVED")).json["server"]["status"] == "SHELVED"
    # the first shelve's image, which the image service away kept from being deleted, stays queued beside it
    assert sorted(i["status"] for i in images.images() if i["name"] == "web-1-shelved") == ["active", "queued"]


def test_a_shelve_whose_upload_keeps_breaking_leaves_no_image(kept_world):
    """Nova's shelve would leave its ``<name>-shelved`` image queued (no ``delete_image_on_error``); OpenKeel
    deletes it (docs/servers.md, "Shelve"): the server as Nova leaves it, nothing of the shelve left."""
    client, controller, cluster, images, _tmp, placement = kept_world
    uuid = boot(client, controller)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    run_until_task(client, controller, uuid, "shelving_image_pending_upload")
    images.cuts = 100
    run_until_task(client, controller, uuid, None)
    assert until(client, controller, uuid, settled("SHUTOFF")).json["server"]["status"] == "SHUTOFF"
    assert events(client, uuid, "shelve") == [("compute_shelve_instance", "Error")]
    assert [i for i in images.images() if i["name"] == "web-1-shelved"] == []
    assert capture_left(cluster) == {} and placement.get_allocations(uuid).allocations
