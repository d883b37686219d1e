"""shelve, shelveOffload and unshelve end to end (on each engine): the API, the controller's shelve step
(createImage's capture and upload), the built-in cluster, Placement and the development image service.

A server shelved with ``shelved_offload_time`` 0 goes SHELVED_OFFLOADED: its image ``<name>-shelved`` is
active with the root disk's bytes, nothing of it stays in the cluster, Placement holds no allocation of it,
its host is cleared; unshelved it runs again from that image (ACTIVE, a host, an allocation) and the image
and the ``shelved_*`` keys are gone. With -1 it stays SHELVED (its VM stopped) until shelveOffload."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.images import glance
from openkeel_compute.placement import embedded
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import admin, conf_on
from tests.server_world import DEMO, IMAGE, image_service, server_world, until

SHELVE_TASKS = ["shelving", "shelving_image_pending_upload", "shelving_image_uploading", "shelving_offloading", None]


def _world(tmp_path, db_engine, placement_url, offload_time):
    with conf_on(db_engine, tmp_path, controller={"poll_interval": "0.05", "workers": "4"}) as conf:
        conf.set_override("shelved_offload_time", offload_time)
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with image_service(tmp_path) as url:
            glance.register_opts(conf)
            conf.set_override("api_servers", [url], group="glance")
            make = lambda kube: make_loop(kube, engine, images=ImageAccess.from_conf(conf),
                                          shelved_offload_time=float(offload_time))
            with server_world(conf, make, placement_url) as (client, controller, cluster):
                yield client, controller, cluster, url, tmp_path, PlacementClient.for_endpoint(
                    placement_url, embedded.TOKEN)


@pytest.fixture
def world(tmp_path, db_engine, placement_service):
    yield from _world(tmp_path, db_engine, placement_service, 0)


@pytest.fixture
def kept_world(tmp_path, db_engine, placement_service):
    yield from _world(tmp_path, db_engine, placement_service, -1)


def _settled(status):
    return lambda got: (got.status_code == 200 and got.json["server"]["status"] == status
                        and got.json["server"]["OS-EXT-STS:task_state"] is None)


def _boot(client, controller):
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.e2e", "ram": 512, "vcpus": 1, "disk": 1, "id": "e2e"}})
    assert flavor.status_code in (200, 409), flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "e2e", "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert until(client, controller, uuid, _settled("ACTIVE")).json["server"]["status"] == "ACTIVE"
    return uuid


def _image(url, image_id):
    try:
        with urllib.request.urlopen(f"{url}/v2/images/{image_id}") as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return None


def _images_named(url, name):
    with urllib.request.urlopen(f"{url}/v2/images?name={name}") as resp:
        return json.loads(resp.read())["images"]


def _tasks_until_done(client, controller, uuid):
    seen = []
    for _ in range(600):
        task = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]["OS-EXT-STS:task_state"]
        if not seen or seen[-1] != task:
            seen.append(task)
        if task is None:
            return seen
        controller.run_once()
    raise AssertionError(f"the task did not end: {seen}")


def _in_cluster(cluster, uuid):
    kinds = ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "PersistentVolumeClaim",
             "VirtualMachineSnapshot", "VirtualMachineExport")
    return {kind: [k for k, o in cluster.objects(kind).items()
                   if uuid in json.dumps(o.get("metadata", {}).get("labels") or {}) or uuid in k[1]]
            for kind in kinds}


def _allocations(placement, uuid):
    return placement.get_allocations(uuid).allocations


def _action(client, uuid, action):
    found = [a for a in client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=DEMO).json[
        "instanceActions"] if a["action"] == action]
    assert found, action
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{found[0]['request_id']}", headers=admin())
    return [(e["event"], e["result"]) for e in got.json["instanceAction"]["events"]]


def test_shelved_offloaded_then_unshelved(world):
    client, controller, cluster, url, _tmp, placement = world
    uuid = _boot(client, controller)
    assert _allocations(placement, uuid)
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None})
    assert got.status_code == 202, got.text
    seen = _tasks_until_done(client, controller, uuid)
    assert seen[0] == "shelving" and seen[-1] is None
    assert [SHELVE_TASKS.index(t) for t in seen] == sorted(SHELVE_TASKS.index(t) for t in seen), seen
    server = client.get(f"/v2.1/servers/{uuid}", headers=admin()).json["server"]
    assert server["OS-EXT-STS:power_state"] == 4  # as Nova's: the state it had when offloaded
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"], server["OS-EXT-SRV-ATTR:hypervisor_hostname"]) \
        == ("SHELVED_OFFLOADED", None, None)
    [image] = _images_named(url, "web-1-shelved")
    assert (image["status"], image["image_type"], image["instance_uuid"]) == ("active", "snapshot", uuid)
    assert not any(_in_cluster(cluster, uuid).values()), _in_cluster(cluster, uuid)
    assert not _allocations(placement, uuid)
    assert _action(client, uuid, "shelve") == [("compute_shelve_instance", "Success")]

    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"unshelve": None})
    assert got.status_code == 202, got.text
    server = until(client, controller, uuid, _settled("ACTIVE")).json["server"]
    assert server["status"] == "ACTIVE"
    for _ in range(20):  # the step deletes the shelved image once the guest runs
        controller.run_once()
        if _image(url, image["id"]) is None:
            break
    assert _image(url, image["id"]) is None
    assert client.get(f"/v2.1/servers/{uuid}", headers=admin()).json["server"]["OS-EXT-SRV-ATTR:host"]
    assert _allocations(placement, uuid)
    assert _in_cluster(cluster, uuid)["VirtualMachine"]
    assert _action(client, uuid, "unshelve") == [  # as Nova 34.0.0's (the servers oracle)
        ("compute_unshelve_instance", "Success"), ("schedule_instances", "Success"), ("get_image_info", "Success")]


def test_kept_shelved_then_offloaded_on_request_and_checks(kept_world):
    client, controller, cluster, _url, _tmp, placement = kept_world
    uuid = _boot(client, controller)
    offload = client.post(f"/v2.1/servers/{uuid}/action", headers=admin(), json_body={"shelveOffload": None})
    assert offload.status_code == 409, offload.text  # only a SHELVED server
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    assert _tasks_until_done(client, controller, uuid)[-1] is None
    server = client.get(f"/v2.1/servers/{uuid}", headers=admin()).json["server"]
    assert server["status"] == "SHELVED" and server["OS-EXT-SRV-ATTR:host"]
    assert _in_cluster(cluster, uuid)["VirtualMachine"] and not _in_cluster(cluster, uuid)["VirtualMachineInstance"]
    assert _allocations(placement, uuid)
    # a zone or a host only for an offloaded server
    v277 = DEMO | {"OpenStack-API-Version": "compute 2.77"}
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=v277, json_body={"unshelve": {"availability_zone": "nova"}})
    assert got.status_code == 409 and "The server status must be SHELVED_OFFLOADED." in got.text, got.text
    offload = client.post(f"/v2.1/servers/{uuid}/action", headers=admin(), json_body={"shelveOffload": None})
    assert offload.status_code == 202, offload.text
    assert until(client, controller, uuid, _settled("SHELVED_OFFLOADED")).json["server"]["status"] \
        == "SHELVED_OFFLOADED"
    assert not any(_in_cluster(cluster, uuid).values())
    assert not _allocations(placement, uuid)
    v291 = admin() | {"OpenStack-API-Version": "compute 2.91"}
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=v291, json_body={"unshelve": {"host": "nowhere"}})
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, "Compute host nowhere could not be found.")
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=v277, json_body={"unshelve": {"availability_zone": "nova"}})
    assert got.status_code == 202, got.text
    assert until(client, controller, uuid, _settled("ACTIVE")).json["server"]["status"] == "ACTIVE"


@pytest.fixture
def timed_world(tmp_path, db_engine, placement_service):
    yield from _world(tmp_path, db_engine, placement_service, 1)


def test_offloaded_by_the_periodic_task_after_shelved_offload_time(timed_world):
    client, controller, cluster, _url, _tmp, placement = timed_world
    uuid = _boot(client, controller)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    assert until(client, controller, uuid, _settled("SHELVED")).json["server"]["status"] == "SHELVED"
    assert _in_cluster(cluster, uuid)["VirtualMachine"] and _allocations(placement, uuid)
    got = until(client, controller, uuid, _settled("SHELVED_OFFLOADED"))
    assert got.json["server"]["status"] == "SHELVED_OFFLOADED"
    assert not any(_in_cluster(cluster, uuid).values()) and not _allocations(placement, uuid)
    assert _action(client, uuid, "shelve") == [("compute_shelve_instance", "Success")]


def test_a_shelved_server_deleted_takes_its_image(world):
    client, controller, cluster, url, _tmp, placement = world
    uuid = _boot(client, controller)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    assert until(client, controller, uuid, _settled("SHELVED_OFFLOADED")).json["server"]["status"] \
        == "SHELVED_OFFLOADED"
    [image] = _images_named(url, "web-1-shelved")
    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    assert until(client, controller, uuid, lambda got: got.status_code == 404).status_code == 404
    assert _image(url, image["id"]) is None
    assert not any(_in_cluster(cluster, uuid).values()) and not _allocations(placement, uuid)


def test_a_shelved_server_unshelved_is_started(kept_world):
    client, controller, cluster, url, _tmp, placement = kept_world
    uuid = _boot(client, controller)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"shelve": None}).status_code == 202
    server = until(client, controller, uuid, _settled("SHELVED")).json["server"]
    assert (server["status"], server["OS-EXT-STS:power_state"]) == ("SHELVED", 4)
    [image] = _images_named(url, "web-1-shelved")
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"unshelve": None}).status_code == 202
    assert until(client, controller, uuid, _settled("ACTIVE")).json["server"]["status"] == "ACTIVE"
    for _ in range(20):
        controller.run_once()
        if _image(url, image["id"]) is None:
            break
    assert _image(url, image["id"]) is None
    assert _in_cluster(cluster, uuid)["VirtualMachineInstance"] and _allocations(placement, uuid)
    # as Nova 34.0.0's (the servers oracle with shelved_offload_time -1): the conductor starts it
    assert _action(client, uuid, "unshelve") == [("compute_start_instance", "Success")]
