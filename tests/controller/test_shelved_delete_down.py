"""A SHELVED server (its VM stopped on its node, its image kept) deleted while its compute service is down, on
the three engines: Nova's API deletes the shelved image before it deletes the server locally
(nova/compute/api.py ``_delete``: "Working on deleting snapshot ... from shelved instance"); here the API names
the image to the controller's local delete, which deletes it: no shelved image outlives its server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
import sqlalchemy as sa

from openkeel_compute.compute.instances import cas, instance_sysmeta
from openkeel_compute.db import api as db_api
from tests.controller.evacuate_world import evacuate_world
from tests.databases import ENGINES
from tests.server_world import DEMO, until


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service):
    with evacuate_world(request.param, tmp_path, placement_service) as w:
        yield w


def _image_service(world) -> str:
    from openkeel_compute.images import glance

    glance.register_opts(world.conf)
    return str(world.conf.glance.api_servers[0]).rstrip("/")


def _make_image(url: str, name: str) -> str:
    req = urllib.request.Request(f"{url}/v2/images", method="POST", data=json.dumps({
        "name": name, "disk_format": "raw", "container_format": "bare"}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())["id"]


def _exists(url: str, image_id: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/v2/images/{image_id}").close()
        return True
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return False


def _shelved(world, uuid: str, image_id: str | None) -> None:
    """The server as a shelve leaves it with ``shelved_offload_time`` -1: SHELVED on its node, its image named."""
    with db_api.transaction(world.engine) as conn:
        assert cas.save_state(conn, uuid, vm_state="shelved", power_state=4)
        if image_id:
            instance_sysmeta.set_system_metadata_item(conn, uuid, "shelved_image_id", image_id)
            instance_sysmeta.set_system_metadata_item(conn, uuid, "shelved_at", "2026-01-01T00:00:00")


@pytest.mark.parametrize("shelved", [True, False], ids=["shelved", "active"])
def test_a_shelved_server_deleted_on_a_down_service_takes_its_image(world, shelved):
    url = _image_service(world)
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    image_id = _make_image(url, "web-shelved")
    if shelved:
        _shelved(world, uuid, image_id)
    world.node_down(source, force=True)
    assert world.service(source)["state"] == "down"
    got = world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert got.status_code == 204, got.text
    assert world.client.get(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 404  # deleted at once

    def pending() -> int:  # the local delete's outbox rows not carried out yet
        with db_api.reader(world.engine) as conn:
            return conn.execute(sa.text("select count(*) from outbox where object_id = :u and done_at is null"),
                                {"u": uuid}).scalar()

    until(world.client, world.controller, uuid, lambda g: pending() == 0)
    assert pending() == 0
    # only a shelved server's image is its own to delete
    assert _exists(url, image_id) is not shelved
    assert world.allocations(uuid) == set()
