"""A volume-backed server deleted while SHELVED_OFFLOADED, or while it is being unshelved (its volume being
exported to the new node), on the three engines with the fake Cinder and the built-in cluster: as Nova's API
and compute clean up (nova/compute/api.py ``_local_delete`` and ``_local_cleanup_bdm_volumes``, the compute's
``_cleanup_volumes``), the server's Cinder attachments are deleted and its volume is ``available`` again, and
nothing of it stays in the cluster (no VM, no claim or PersistentVolume of the volume)."""

from __future__ import annotations

import pytest

from tests.volume.test_volume_backed_shelve import ADMIN, shelved_offloaded


def _objects(cluster, uuid, volume_id):
    kinds = ("VirtualMachine", "VirtualMachineInstance", "PersistentVolumeClaim", "PersistentVolume")
    return {kind: keys for kind in kinds
            if (keys := [k for k in cluster.objects(kind) if uuid in str(k) or volume_id in str(k)])}


def _offloaded(client, controller, cinder):
    uuid, root = shelved_offloaded(client, controller, cinder)
    (reserved,) = cinder.attachments.values()
    assert reserved["status"] == "reserved"
    return uuid, root


def _deleted(client, controller, cluster, cinder, uuid, volume_id):
    assert client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 204
    for _ in range(400):
        controller.run_once()
        if client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 404 \
                and not _objects(cluster, uuid, volume_id) and not cinder.attachments:
            break
    assert client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 404
    assert _objects(cluster, uuid, volume_id) == {}
    assert cinder.attachments == {}
    assert cinder.volumes[volume_id]["status"] == "available"


def test_a_shelved_offloaded_volume_backed_server_deleted_frees_its_volume(controller_world, cinder):
    client, controller, cluster, _conf = controller_world
    uuid, volume_id = _offloaded(client, controller, cinder)
    _deleted(client, controller, cluster, cinder, uuid, volume_id)


@pytest.mark.parametrize("passes", [0, 1])
def test_a_volume_backed_server_deleted_while_unshelving_frees_its_volume(controller_world, cinder, passes):
    client, controller, cluster, _conf = controller_world
    uuid, volume_id = _offloaded(client, controller, cinder)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=ADMIN, json_body={"unshelve": None}).status_code == 202
    for _ in range(passes):  # the unshelve under way: the node claimed, the volume exported to it, the VM made
        controller.run_once()
    server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
    assert server["OS-EXT-STS:task_state"] == "unshelving"
    if passes:  # the volume attached to the new node and the VM made on it: a restore well under way
        assert {"VirtualMachine", "PersistentVolumeClaim"} <= set(_objects(cluster, uuid, volume_id))
        assert [a["status"] for a in cinder.attachments.values()] == ["attached"]
    _deleted(client, controller, cluster, cinder, uuid, volume_id)
