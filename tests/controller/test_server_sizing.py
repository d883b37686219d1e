"""A server's VM never depends on the catalogue's instancetypes (issue 27.3).

Every server gets its own instancetype and preference in its namespace, owned by its VM: a boot right
after its flavor was created (the catalogue not synced yet), an administrator's boot of a private flavor
the project has no access to, a stop and start after the access was removed or the flavor deleted, and a
resize and revert across a deleted flavor all run."""

from __future__ import annotations

import time

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.databases import ENGINES, throwaway_database
from tests.server_world import DEMO, IMAGE, SETTLE_SECONDS, image_service, server_world

DEMO_PROJECT = "demo-project"


@pytest.fixture(params=ENGINES)
def world(request, tmp_path):
    """The API, the controller and the built-in cluster, on each supported database."""
    policies.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            yield client, controller, cluster


def _flavor(client, flavorid, ram, *, public=True, vcpus=1):
    got = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": f"m1.{flavorid}", "ram": ram, "vcpus": vcpus, "disk": 1, "id": flavorid,
                   "os-flavor-access:is_public": public}})
    assert got.status_code == 200, got.text


def _access(client, flavorid, verb, project=DEMO_PROJECT):
    got = client.post(f"/v2.1/flavors/{flavorid}/action", headers=admin(), json_body={verb: {"tenant": project}})
    assert got.status_code == 200, got.text


def _server(client, uuid, headers):
    return client.get(f"/v2.1/servers/{uuid}", headers=headers).json["server"]


def _run_until(step, client, uuid, status, headers=DEMO, timeout=SETTLE_SECONDS):
    """Run ``step`` (a controller pass, or the server loop's alone) until the server is in ``status`` with no
    task."""
    deadline = time.monotonic() + timeout
    while True:
        step()
        server = _server(client, uuid, headers)
        if (server["status"], server["OS-EXT-STS:task_state"]) == (status, None) or time.monotonic() > deadline:
            assert server["status"] == status, server
            return server
        time.sleep(0.05)


def _boot(client, flavor, headers=DEMO):
    got = client.post("/v2.1/servers", headers=headers, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": flavor, "networks": "auto"}})
    assert got.status_code == 202, got.text
    return got.json["server"]["id"]


def _action(client, uuid, body, headers=DEMO):
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=headers, json_body=body)
    assert got.status_code in (202, 204), got.text


def _vm(cluster, uuid):
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    return vm


def _own_sizing(cluster, vm):
    """The VM's instancetype and preference: the server's own, in its namespace, owned by its VM."""
    found = []
    for field, kind in (("instancetype", "VirtualMachineInstancetype"), ("preference", "VirtualMachinePreference")):
        matcher = vm["spec"][field]
        assert matcher["kind"] == kind and matcher["name"].startswith(vm["metadata"]["name"] + "-")
        body = cluster.get(kind, matcher["name"], vm["metadata"]["namespace"])
        assert [r["uid"] for r in body["metadata"]["ownerReferences"]] == [vm["metadata"]["uid"]]
        found.append(body)
    return found


def _memory(cluster, uuid):
    (vmi,) = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    return vmi["spec"]["domain"]["memory"]["guest"]


def test_a_boot_right_after_the_flavor_was_created_needs_no_catalogue_sync(world):
    """The flavor's cluster instancetype is not there yet (the catalogue's pass has not run): the server
    runs all the same, on its own instancetype."""
    client, controller, cluster = world
    _flavor(client, "quick", 512)
    uuid = _boot(client, "quick")
    _run_until(controller.servers.run_once, client, uuid, "ACTIVE")  # the server loop alone
    assert not cluster.objects("VirtualMachineClusterInstancetype")
    (instancetype, _preference) = _own_sizing(cluster, _vm(cluster, uuid))
    assert instancetype["spec"] == {"cpu": {"guest": 1}, "memory": {"guest": "512Mi"}}
    assert _memory(cluster, uuid) == "512Mi"
    # the catalogue's pass that follows leaves the server's objects alone, also its full resync
    controller.run_once()
    controller.resync()
    assert _own_sizing(cluster, _vm(cluster, uuid))
    assert cluster.objects("VirtualMachineClusterInstancetype")


def test_an_administrators_boot_of_a_private_flavor_the_project_cannot_see(world):
    """Nova lets an administrator boot any flavor; the project's namespace has no copy of it."""
    client, controller, cluster = world
    _flavor(client, "secret", 768, public=False)
    _access(client, "secret", "addTenantAccess", "someone-else")
    controller.run_once()
    uuid = _boot(client, "secret", admin("2.96"))
    server = _run_until(controller.run_once, client, uuid, "ACTIVE", admin("2.96"))
    assert server["OS-EXT-STS:vm_state"] == "active" and not server.get("fault")
    vm = _vm(cluster, uuid)
    assert not cluster.get("VirtualMachineInstancetype", "secret", vm["metadata"]["namespace"])
    _own_sizing(cluster, vm)
    assert _memory(cluster, uuid) == "768Mi"


def test_access_removed_or_flavor_deleted_the_server_still_starts(world):
    client, controller, cluster = world
    _flavor(client, "private", 512, public=False)
    _access(client, "private", "addTenantAccess")
    controller.run_once()
    uuid = _boot(client, "private")
    _run_until(controller.run_once, client, uuid, "ACTIVE")
    _access(client, "private", "removeTenantAccess")
    controller.run_once()
    assert not [k for k in cluster.objects("VirtualMachineInstancetype") if k[1] == "private"]
    _action(client, uuid, {"os-stop": None})
    _run_until(controller.run_once, client, uuid, "SHUTOFF")
    _action(client, uuid, {"os-start": None})
    _run_until(controller.run_once, client, uuid, "ACTIVE")
    assert client.delete("/v2.1/flavors/private", headers=admin()).status_code == 202
    controller.run_once()
    controller.resync()
    _action(client, uuid, {"reboot": {"type": "HARD"}})
    _run_until(controller.run_once, client, uuid, "ACTIVE")
    _own_sizing(cluster, _vm(cluster, uuid))
    assert _memory(cluster, uuid) == "512Mi"
    # the delete takes the server's own objects with it
    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    deadline = time.monotonic() + 120
    while client.get(f"/v2.1/servers/{uuid}", headers=DEMO).status_code != 404 and time.monotonic() < deadline:
        controller.run_once()
        time.sleep(0.05)
    left = [k for kind in ("VirtualMachineInstancetype", "VirtualMachinePreference")
            for k in cluster.objects(kind) if k[1].startswith(uuid)]
    assert left == []


def test_resize_and_revert_after_both_flavors_went(world):
    """The resize's new size is the server's own instancetype (the catalogue not synced, then the flavor
    deleted); the revert comes back to the old size by its revision, and a confirm of the next resize
    removes the old size's own objects."""
    client, controller, cluster = world
    _flavor(client, "small", 512)
    uuid = _boot(client, "small")
    _run_until(controller.run_once, client, uuid, "ACTIVE")
    old = _vm(cluster, uuid)["spec"]["instancetype"]["name"]
    _flavor(client, "large", 1024, vcpus=2)
    assert client.delete("/v2.1/flavors/small", headers=admin()).status_code == 202
    _action(client, uuid, {"resize": {"flavorRef": "large"}})
    _run_until(controller.servers.run_once, client, uuid, "VERIFY_RESIZE")  # no catalogue pass
    assert _memory(cluster, uuid) == "1024Mi"
    _flavor(client, "medium", 768)
    assert client.delete("/v2.1/flavors/large", headers=admin()).status_code == 202
    controller.run_once()
    _action(client, uuid, {"revertResize": None})
    _run_until(controller.run_once, client, uuid, "ACTIVE")
    assert _vm(cluster, uuid)["spec"]["instancetype"]["name"] == old
    assert _memory(cluster, uuid) == "512Mi"
    _action(client, uuid, {"resize": {"flavorRef": "medium"}})
    _run_until(controller.run_once, client, uuid, "VERIFY_RESIZE")
    _action(client, uuid, {"confirmResize": None})
    _run_until(controller.run_once, client, uuid, "ACTIVE")
    vm = _vm(cluster, uuid)
    (instancetype, _preference) = _own_sizing(cluster, vm)
    assert instancetype["spec"]["memory"] == {"guest": "768Mi"}
    names = sorted(k[1] for k in cluster.objects("VirtualMachineInstancetype") if k[1].startswith(uuid))
    assert names == [vm["spec"]["instancetype"]["name"]]  # the old size's went with the confirm


def test_resize_to_a_flavor_created_after_the_servers_flavor_was_deleted(world):
    """The new flavor never takes the deleted flavor's internal id (SQLite reused the highest id), so the
    server's frozen copy of its deleted flavor does not pass for the flavor it is resized to."""
    client, controller, cluster = world
    _flavor(client, "gone", 512)
    uuid = _boot(client, "gone")
    _run_until(controller.run_once, client, uuid, "ACTIVE")
    assert client.delete("/v2.1/flavors/gone", headers=admin()).status_code == 202
    _flavor(client, "after", 1024)
    _action(client, uuid, {"resize": {"flavorRef": "after"}})
    _run_until(controller.run_once, client, uuid, "VERIFY_RESIZE")
    assert _memory(cluster, uuid) == "1024Mi"
