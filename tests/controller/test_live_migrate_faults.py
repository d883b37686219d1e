"""Live migration under faults, end to end on the built-in cluster's two nodes and each database engine: a
node lost while KubeVirt's migration runs.

- The target node stops answering: the transfer makes no progress, the source's migration monitor aborts it
  (KubeVirt's "Live migration has been aborted"), and OpenKeel rolls back as Nova's compute does: the server
  ACTIVE on its source, the migration ``error``, the fault recorded, compute_live_migration failed and
  compute_rollback_live_migration_at_destination recorded, the destination's allocation given back.
- The source node stops answering: its virt-handler, which drives the transfer and reports its end, is silent;
  KubeVirt's migration stays Running, and so does the server's (MIGRATING, the migration ``running``: Nova's
  while its source compute is down). Once the operator declares the node out of service its pods go, the VMI
  fails, KubeVirt fails the migration: the migration ``error``, the destination's allocation given back, the
  server SHUTOFF on its source (the guest died with the node; an evacuation takes it from there)."""

from __future__ import annotations

import sqlalchemy as sa
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from openkeel_compute.controller.kube import make_client
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin
from tests.controller import test_live_migrate as lm
from tests.server_world import until

placed_world = lm.placed_world
FLAVOR = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def _slow(cluster, transfer: float) -> None:
    delays = cluster.lifecycle.delays
    cluster.lifecycle.delays = type(delays)(**{**delays.__dict__, "migration_transfer": transfer})


def _by_node(placement, consumer):
    return {placement.provider(rp)["name"]: r for rp, r in placement.get_allocations(consumer).allocations.items()}


def _faults(controller, uuid):
    with db_api.reader(controller.engine) as conn:
        return [r.message for r in conn.execute(sa.select(models.INSTANCE_FAULTS.c.message).where(
            models.INSTANCE_FAULTS.c.instance_uuid == uuid))]


def test_the_target_node_lost_mid_migration_rolls_back_to_the_source(placed_world):
    client, controller, cluster = placed_world
    placement = controller.servers.claims.placement
    uuid = lm._boot(client, controller)
    source = lm._until(client, controller, uuid)["OS-EXT-SRV-ATTR:host"]
    _slow(cluster, 3.0)  # long enough to be caught running
    assert lm._live(client, uuid).status_code == 202
    m = lm._running(client, controller, uuid)
    target = m["dest_compute"]
    assert _by_node(placement, uuid) == {target: FLAVOR} and _by_node(placement, m["uuid"]) == {source: FLAVOR}
    assert cluster.set_node_ready(target, "Unknown")  # its kubelet stopped answering
    server = lm._until(client, controller, uuid)
    assert server["OS-EXT-SRV-ATTR:host"] == source and lm._vmi_node(cluster, uuid) == source
    assert [x["status"] for x in lm._migrations(client)] == ["error"]
    events = lm._events(client, uuid)
    assert ("compute_live_migration", "Error") in events
    assert ("compute_rollback_live_migration_at_destination", "Success") in events
    assert "Live migration has been aborted" in _faults(controller, uuid)
    # the destination's claim given back, the server's own back on its source
    assert _by_node(placement, m["uuid"]) == {} and _by_node(placement, uuid) == {source: FLAVOR}
    (job,) = [o for k, o in cluster.objects("VirtualMachineInstanceMigration").items()]
    assert job["status"]["phase"] == "Failed"


def test_the_source_node_lost_mid_migration_waits_then_ends_in_error(placed_world):
    client, controller, cluster = placed_world
    placement = controller.servers.claims.placement
    uuid = lm._boot(client, controller)
    source = lm._until(client, controller, uuid)["OS-EXT-SRV-ATTR:host"]
    _slow(cluster, 1.5)
    assert lm._live(client, uuid).status_code == 202
    m = lm._running(client, controller, uuid)
    assert cluster.set_node_ready(source, "Unknown")
    # longer than the transfer would take: nothing moves while the source is silent
    until(client, controller, uuid, lambda _got: False, timeout=3.0)
    shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
    assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("MIGRATING", source)
    assert [x["status"] for x in lm._migrations(client)] == ["running"]
    assert lm._vmi_node(cluster, uuid) == source
    # the operator declares the node out of service: its pods go, the VMI fails, so does KubeVirt's migration
    kube = make_client(cluster.kubeconfig())
    try:
        taints = cluster.objects("Node")[(None, source)]["spec"].get("taints") or []
        kube.patch(Node, source, {"spec": {"taints": [*taints, {
            "key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]}},
            patch_type=PatchType.MERGE)
    finally:
        kube.close()
    got = until(client, controller, uuid, lambda got: got.json["server"]["OS-EXT-STS:task_state"] is None)
    server = got.json["server"]
    assert server["OS-EXT-STS:task_state"] is None, server
    assert client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"][
        "OS-EXT-SRV-ATTR:host"] == source
    assert [x["status"] for x in lm._migrations(client)] == ["error"]
    assert ("compute_live_migration", "Error") in lm._events(client, uuid)
    assert _by_node(placement, m["uuid"]) == {} and _by_node(placement, uuid) == {source: FLAVOR}
    assert server["status"] == "SHUTOFF"  # the guest died with its node: stopped, evacuable from there
