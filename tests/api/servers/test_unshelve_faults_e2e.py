"""An unshelve whose shelved image is gone, and a server deleted while it is being unshelved (its shelved image
being restored into the cluster), end to end on each engine (tests/api/servers/faulty_images.py).

Nova 34.0.0 (the servers oracle: boot, shelve to SHELVED_OFFLOADED, ``DELETE /v2.1/images/{shelved image}``,
unshelve): the conductor's ``get_image_info`` finds no image: the server in ERROR with its task
``unshelving`` kept, host None, the fault ``{"code": 404, "message": "Unshelve attempted but the image <id>
cannot be found."}``, the action's only event ``get_image_info`` Error; no claim was made. A server deleted
while SHELVED_OFFLOADED or unshelving: its shelved image deleted by the API (nova/compute/api.py ``_delete``),
its allocations and everything the unshelve made in the cluster gone."""

from __future__ import annotations

import pytest

from tests.api.servers.faulty_images import (
    capture_left,
    events,
    fault_world,
    of_server,
)
from tests.conftest import admin
from tests.server_world import DEMO, boot, settled, until


@pytest.fixture
def world(tmp_path, db_engine, placement_service):
    with fault_world(tmp_path, db_engine, placement_service) as made:
        yield made


def _offloaded(client, controller, images):
    uuid = boot(client, controller)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    assert until(client, controller, uuid, settled("SHELVED_OFFLOADED")).json["server"]["status"] \
        == "SHELVED_OFFLOADED"
    [image] = [i for i in images.images() if i["name"] == "web-1-shelved"]
    assert image["status"] == "active"
    return uuid, image["id"]


def _gone(client, controller, cluster, placement, uuid):
    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    assert until(client, controller, uuid, lambda got: got.status_code == 404).status_code == 404
    for _ in range(20):  # what the cluster's garbage collector takes with the VM
        if not of_server(cluster, uuid):
            break
        controller.run_once()
    assert of_server(cluster, uuid) == {}
    assert capture_left(cluster) == {}
    assert placement.get_allocations(uuid).allocations == {}


def test_an_unshelve_whose_image_was_deleted_errors_as_novas_conductor(world):
    client, controller, cluster, images, _tmp, placement = world
    uuid, image_id = _offloaded(client, controller, images)
    images.delete(image_id)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"unshelve": None}).status_code == 202
    got = until(client, controller, uuid, lambda g: g.json["server"]["status"] != "SHELVED_OFFLOADED")
    for _ in range(5):  # it stays so
        controller.run_once()
    shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
    assert {k: shown[k] for k in ("status", "OS-EXT-STS:vm_state", "OS-EXT-STS:task_state",
                                  "OS-EXT-SRV-ATTR:host", "OS-EXT-STS:power_state")} == {
        "status": "ERROR", "OS-EXT-STS:vm_state": "error", "OS-EXT-STS:task_state": "unshelving",
        "OS-EXT-SRV-ATTR:host": None, "OS-EXT-STS:power_state": 4}, got.json
    assert {k: shown["fault"][k] for k in ("code", "message")} == {
        "code": 404, "message": f"Unshelve attempted but the image {image_id} cannot be found."}
    assert events(client, uuid, "unshelve") == [("get_image_info", "Error")]
    assert of_server(cluster, uuid) == {} and placement.get_allocations(uuid).allocations == {}
    _gone(client, controller, cluster, placement, uuid)


def test_a_server_deleted_while_its_shelved_image_is_restored_leaves_nothing(world):
    client, controller, cluster, images, _tmp, placement = world
    uuid, image_id = _offloaded(client, controller, images)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"unshelve": None}).status_code == 202
    for _ in range(50):  # until the unshelve made the VM from the shelved image (its disk importing)
        controller.run_once()
        if "VirtualMachine" in of_server(cluster, uuid):
            break
    shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
    assert (shown["OS-EXT-STS:task_state"], shown["OS-EXT-STS:vm_state"]) == ("unshelving", "shelved_offloaded")
    assert "VirtualMachine" in of_server(cluster, uuid) and placement.get_allocations(uuid).allocations
    _gone(client, controller, cluster, placement, uuid)
    assert images.image(image_id) is None  # the API's delete of a shelved server deletes its image


def test_a_server_deleted_before_its_unshelve_was_taken_leaves_nothing(world):
    client, controller, cluster, images, _tmp, placement = world
    uuid, image_id = _offloaded(client, controller, images)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"unshelve": None}).status_code == 202
    _gone(client, controller, cluster, placement, uuid)
    assert images.image(image_id) is None


def test_an_unshelve_waits_for_the_image_service_without_holding_a_node(world):
    """Nova's conductor, the image service away, raises out of the unshelve (the server stuck ``unshelving``);
    OpenKeel's controller reads the image again on later passes, with no claim and nothing in the cluster
    meanwhile, and unshelves once the image service is back."""
    client, controller, cluster, images, _tmp, placement = world
    uuid, image_id = _offloaded(client, controller, images)
    images.down()
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"unshelve": None}).status_code == 202
    for _ in range(10):
        controller.run_once()
    shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("SHELVED_OFFLOADED", "unshelving")
    assert of_server(cluster, uuid) == {} and placement.get_allocations(uuid).allocations == {}
    images.up()
    assert until(client, controller, uuid, settled("ACTIVE")).json["server"]["status"] == "ACTIVE"
    assert placement.get_allocations(uuid).allocations
    for _ in range(20):
        if images.image(image_id) is None:
            break
        controller.run_once()
    assert images.image(image_id) is None  # the shelved image deleted once the guest runs
