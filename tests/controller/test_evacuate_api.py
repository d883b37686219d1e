"""The evacuate action's answers as Nova 34.0.0's (each message below is what the servers oracle answered,
with its fake computes and a forced-down service), its microversions (onSharedStorage and the adminPass
body before 2.14, force 2.29-2.67, 2.95's target state) and the server's end state, on SQLite, PostgreSQL
and MariaDB."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.db import models
from tests.conftest import admin, user
from tests.controller.evacuate_world import evacuate_world
from tests.databases import ENGINES
from tests.server_world import DEMO


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service):
    with evacuate_world(request.param, tmp_path, placement_service) as w:
        yield w


def _fault(got):
    (body,) = got.json.values()
    return got.status_code, body["message"]


def test_refusals_in_novas_order_with_novas_messages(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    other = next(n for n in ("emulated-node-1", "emulated-node-2") if n != source)
    assert _fault(world.client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"evacuate": {}})) == (
        403, "Policy doesn't allow os_compute_api:os-evacuate to be performed.")
    assert _fault(world.client.post(f"/v2.1/servers/{uuid}/action", headers=user("other", version="2.14"),
                                    json_body={"evacuate": {}})) == (404, f"Instance {uuid} could not be found.")
    bodies = [
        ("2.1", {}, "Invalid input for field/attribute evacuate. Value: {}. 'onSharedStorage' is a required property"),
        ("2.1", {"onSharedStorage": False, "bogus": 1}, ("Invalid input for field/attribute evacuate. Value: "
         "{'onSharedStorage': False, 'bogus': 1}. Additional properties are not allowed ('bogus' was unexpected)")),
        ("2.68", {"force": True, "host": other}, ("Invalid input for field/attribute evacuate. Value: "
         f"{{'force': True, 'host': '{other}'}}. Additional properties are not allowed ('force' was unexpected)")),
        ("2.95", {"onSharedStorage": False}, ("Invalid input for field/attribute evacuate. Value: "
         "{'onSharedStorage': False}. Additional properties are not allowed ('onSharedStorage' was unexpected)")),
        ("2.14", {"host": "a b"}, ("Invalid input for field/attribute host. Value: a b. 'a b' does not match "
         "'^[a-zA-Z0-9-._]*$'")),
        ("2.29", {"force": True}, "Can't force to a non-provided destination"),
        ("2.1", {"onSharedStorage": True, "adminPass": "x"}, "admin password can't be changed on existing disk"),
        ("2.14", {"host": source}, "The target host can't be the same one."),
        ("2.1", {"onSharedStorage": False}, f"Compute service of {source} is still in use."),
        ("2.14", {}, f"Compute service of {source} is still in use."),
        ("2.29", {"host": other, "force": "yes"}, f"Compute service of {source} is still in use."),
    ]
    for version, body, message in bodies:
        assert _fault(world.evacuate(uuid, body, version)) == (400, message), (version, body)
    assert _fault(world.client.post(f"/v2.1/servers/{uuid}/action", headers=admin("2.14"),
                                    json_body={"evacuate": None})) == (
        400, "Invalid input for field/attribute evacuate. Value: None. None is not of type 'object'")
    assert _fault(world.evacuate(uuid, {"host": "nohost"})) == (404, "Compute host nohost not found.")

    world.node_down(source)
    assert world.client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"pause": None}).status_code == 202
    world.wait(uuid, "PAUSED")
    assert _fault(world.evacuate(uuid)) == (409, f"Cannot 'evacuate' instance {uuid} while it is in vm_state paused")
    with world.engine.begin() as conn:  # a task under way: Nova's 500 (its save expects no task), answered 409
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(
            vm_state="active", task_state="powering-off"))
    assert _fault(world.evacuate(uuid)) == (
        409, f"Cannot 'evacuate' instance {uuid} while it is in task_state powering-off")
    assert world.migrations(uuid) == []  # nothing was recorded by a refusal


def test_a_locked_server_is_evacuated_and_before_214_the_answer_is_its_password(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    assert world.client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"lock": None}).status_code == 202
    world.node_down(source)
    got = world.evacuate(uuid, {"onSharedStorage": False}, "2.1")
    assert got.status_code == 200 and set(got.json) == {"adminPass"} and len(got.json["adminPass"]) == 12
    done = world.wait(uuid, "ACTIVE")
    assert done["OS-EXT-SRV-ATTR:host"] != source and done["locked"] is True


def test_given_password_and_shared_storage_before_214(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    world.node_down(source)
    got = world.evacuate(uuid, {"onSharedStorage": "false", "adminPass": "s3cret"}, "2.13")
    assert (got.status_code, got.json) == (200, {"adminPass": "s3cret"})
    world.wait(uuid, "ACTIVE")
    second = world.boot("second")
    assert second["OS-EXT-SRV-ATTR:host"] != source  # a forced-down node's provider is disabled
    world.node_down(second["OS-EXT-SRV-ATTR:host"])
    got = world.evacuate(second["id"], {"onSharedStorage": True}, "2.1")
    assert (got.status_code, got.json) == (200, {"adminPass": None})


@pytest.mark.parametrize("version, stop_first, ends", [("2.94", False, "ACTIVE"), ("2.94", True, "SHUTOFF"),
                                                         ("2.95", False, "SHUTOFF"), ("2.95", True, "SHUTOFF")])
def test_the_state_it_ends_in(world, version, stop_first, ends):
    if world.engine.dialect.name != "sqlite" and (version, stop_first) != ("2.95", False):
        pytest.skip("the state rules run on SQLite; 2.95 on every engine")
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    if stop_first:
        assert world.client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO,
                                 json_body={"os-stop": None}).status_code == 202
        world.wait(uuid, "SHUTOFF")
    world.node_down(source)
    got = world.evacuate(uuid, {}, version)
    assert (got.status_code, got.text, got.header("Content-Type")) == (200, "", "application/json")  # as Nova
    done = world.wait(uuid, ends)
    assert done["OS-EXT-SRV-ATTR:host"] != source
    assert world.migrations(uuid)[0]["status"] == "done"
    vmis = [v for k, v in world.cluster.objects("VirtualMachineInstance").items() if uuid in k[1]]
    assert [v["status"]["nodeName"] for v in vmis] == ([done["OS-EXT-SRV-ATTR:host"]] if ends == "ACTIVE" else [])
