"""Deleting a server whose node failed, on SQLite, PostgreSQL and MariaDB (the API, the controller claiming
in Placement and the built-in cluster with three nodes): the delete never waits for the dead node. Its
launcher pod there is force-deleted (the node's kubelet never confirms it stopped), so nothing of the
server stays in the cluster or in Placement."""

from __future__ import annotations

import pytest

from tests.controller.evacuate_world import evacuate_world
from tests.databases import ENGINES
from tests.server_world import DEMO, until


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, placement_service):
    with evacuate_world(request.param, tmp_path, placement_service) as w:
        yield w


def _left(world, uuid: str) -> list[tuple[str, str]]:
    """The server's objects still in the cluster (kind, name), pods included."""
    return sorted((kind, key[1]) for kind in ("VirtualMachine", "VirtualMachineInstance", "Pod", "DataVolume")
                  for key, obj in world.cluster.objects(kind).items()
                  if uuid in key[1] or uuid in str((obj.get("metadata") or {}).get("labels")))


def test_a_server_on_a_not_ready_node_is_deleted_without_waiting_for_it(world):
    server = world.boot()
    uuid, source = server["id"], server["OS-EXT-SRV-ATTR:host"]
    assert world.pods_on(source, uuid)
    world.node_down(source, force=False)  # NotReady, its service still up (service_down_time not passed)
    assert world.service(source)["state"] == "up"

    got = world.client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert got.status_code == 204, got.text
    got = until(world.client, world.controller, uuid, lambda g: g.status_code == 404, timeout=20)
    assert got.status_code == 404, got.json
    assert _left(world, uuid) == []
    assert world.allocations(uuid) == set()
