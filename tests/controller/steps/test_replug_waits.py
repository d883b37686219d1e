"""A rebuild and a revert-resize of a server on Neutron ports wait for them plugged again where Nova does.

A revert-resize of a server on Neutron ports waits for them plugged again, as Nova's
``finish_revert_migration`` does (``_create_guest_with_network`` with the network info read after the
bindings moved back): network-vif-plugged of each port Neutron shows not ACTIVE, up to
``vif_plugging_timeout``; a plug that never comes with ``vif_plugging_is_fatal`` ends the revert in ERROR
with Nova's "Virtual Interface creation failed"; ports Neutron shows ACTIVE are not waited for. The revert
step on its own, against a fake cluster and the in-memory Neutron, on every database engine.

A rebuild's guest started again waits in ``rebuild_spawning`` for the ports its network info shows unplugged
(Nova's spawn waits for the vifs its network info shows inactive), not for the others."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import external_events, network_requests, working_state
from openkeel_compute.compute import resize as resize_rows
from openkeel_compute.compute.instances import cas, instance_faults, store
from openkeel_compute.controller.steps import ports, rebuild, revert
from openkeel_compute.controller.steps.base import DONE, ServerRow, Waiting, read_server
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states
from openkeel_compute.network.client import NeutronClient
from tests.conftest import make_conf
from tests.controller.helpers import OWNER, boot, row_of
from tests.network.fake_neutron import FakeNeutron

OLD_IT = "it-old"


@pytest.fixture
def neutron():
    fake = FakeNeutron()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2030, 1, 1)

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def with_neutron(ctx, neutron, tmp_path, clock):
    conf = make_conf(tmp_path, neutron={"auth_type": "admin_token", "endpoint": neutron.url, "token": "t",
                                        "endpoint_override": neutron.url})
    settings = dataclasses.replace(ctx.settings, vif_plugging_timeout=30.0)
    return dataclasses.replace(ctx, network=NeutronClient(conf), settings=settings, now=clock)


def _reverting(ctx, neutron) -> tuple[str, str, dict]:
    """A running server on one Neutron port (bound to node-1, ACTIVE) whose resize is being reverted."""
    db = ctx.engine
    net = neutron.network(name="private", project_id="project-1")
    uuid = boot(db, requested_networks="requested")
    with db_api.transaction(db) as conn:
        network_requests.record(conn, uuid, [{"position": 0, "network_id": net["id"]}])
        cas.save_state(conn, uuid, vm_state=states.ACTIVE, task_state=None, power_state=states.power_state.RUNNING,
                       host="node-1", node="node-1", launched_at=models.utcnow())
    (vif,) = ports.allocate(ctx, read_server(db, uuid))
    neutron.ports[vif["port_id"]]["status"] = "ACTIVE"
    with db_api.transaction(db) as conn:
        catalog.create(conn, name=f"bigger-{uuid[:8]}", memory_mb=1024, vcpus=2, root_gb=1,
                       flavorid=f"bigger-{uuid[:8]}")
        flavor = catalog.get(conn, f"bigger-{uuid[:8]}")
        migration = resize_rows.start(conn, store.get(conn, uuid), flavor, {}, OWNER, auto_disk_config=False)
        cas.save_state(conn, uuid, task_state=task_states.RESIZE_FINISH)
        assert resize_rows.finish(conn, uuid, migration, power_state=states.power_state.RUNNING, host="node-1")
        before = {"instancetype": {"matcher": {"kind": "VirtualMachineInstancetype", "name": OLD_IT},
                                   "revision": "rev-old-it"}}
        working_state.put(conn, uuid, sysmeta.RESIZE_FROM, json.dumps(before))
        resize_rows.revert(conn, store.get(conn, uuid), OWNER)
    return uuid, migration, neutron.ports[vif["port_id"]]


def _cluster_has_it_running(cluster, uuid):
    cluster.vms[uuid] = {"metadata": {"name": server_vm_name(uuid)},
                         "spec": {"instancetype": {"kind": "VirtualMachineInstancetype", "name": OLD_IT}},
                         "status": {"instancetypeRef": {"name": OLD_IT,
                                                        "controllerRevisionRef": {"name": "rev-old-it"}}}}
    cluster.vmi_in(uuid, "Running")
    cluster.vmis[uuid]["status"]["nodeName"] = "node-1"


def _run(ctx, uuid, migration):
    return revert.run(ctx, ServerRow(1, uuid, ops.REVERT_RESIZE, {"request_id": OWNER.request_id,
                                                                   "migration": migration}), read_server(ctx.engine, uuid))


def test_a_revert_waits_for_the_ports_neutron_shows_unplugged(with_neutron, cluster, neutron):
    uuid, migration, port = _reverting(with_neutron, neutron)
    _cluster_has_it_running(cluster, uuid)
    port["status"] = "DOWN"  # the binding moved back: the source's agent has not plugged it yet
    outcome = _run(with_neutron, uuid, migration)
    assert isinstance(outcome, Waiting)
    assert row_of(with_neutron.engine, uuid)["task_state"] == task_states.RESIZE_REVERTING
    assert isinstance(_run(with_neutron, uuid, migration), Waiting)  # nothing reported yet
    with db_api.transaction(with_neutron.engine) as conn:
        external_events.record(conn, [{"instance_uuid": uuid, "name": "network-vif-plugged", "status": "completed",
                                       "tag": port["id"], "host": "node-1"}])
    assert _run(with_neutron, uuid, migration) is DONE
    row = row_of(with_neutron.engine, uuid)
    assert (row["vm_state"], row["task_state"]) == (states.ACTIVE, None)
    server = read_server(with_neutron.engine, uuid)
    assert sysmeta.VIF_WAIT not in server["system_metadata"]
    assert [v["active"] for v in ports.info_of(server)] == [True]


def test_ports_neutron_shows_active_are_not_waited_for(with_neutron, cluster, neutron):
    uuid, migration, _port = _reverting(with_neutron, neutron)
    _cluster_has_it_running(cluster, uuid)
    assert _run(with_neutron, uuid, migration) is DONE
    assert row_of(with_neutron.engine, uuid)["vm_state"] == states.ACTIVE


def test_a_plug_that_never_comes_ends_the_revert_in_error_as_nova(with_neutron, cluster, neutron, clock):
    uuid, migration, port = _reverting(with_neutron, neutron)
    _cluster_has_it_running(cluster, uuid)
    port["status"] = "DOWN"
    assert isinstance(_run(with_neutron, uuid, migration), Waiting)
    clock.now += dt.timedelta(seconds=31)
    outcome = _run(with_neutron, uuid, migration)
    assert outcome.fault is not None and outcome.fault.message == "Virtual Interface creation failed"
    row = row_of(with_neutron.engine, uuid)
    assert (row["vm_state"], row["task_state"]) == (states.ERROR, None)
    with db_api.reader(with_neutron.engine) as conn:
        assert instance_faults.latest_faults(conn, [uuid])[uuid]["message"] == "Virtual Interface creation failed"


def _rebuilding(ctx, neutron, *, plugged: bool) -> tuple[str, dict]:
    """A server on one Neutron port whose rebuild has its new root disk (``rebuild_block_device_mapping``);
    its network info shows the port plugged or not."""
    db = ctx.engine
    net = neutron.network(name="private", project_id="project-1")
    uuid = boot(db, requested_networks="requested")
    with db_api.transaction(db) as conn:
        network_requests.record(conn, uuid, [{"position": 0, "network_id": net["id"]}])
        cas.save_state(conn, uuid, vm_state=states.ACTIVE, task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING,
                       power_state=states.power_state.RUNNING, host="node-1", node="node-1",
                       launched_at=models.utcnow())
    server = read_server(db, uuid)
    (vif,) = ports.allocate(ctx, server)
    ports.save(ctx, server, [{**vif, "active": plugged}])
    return uuid, neutron.ports[vif["port_id"]]


def _rebuild(ctx, uuid):
    return rebuild.run(ctx, ServerRow(1, uuid, ops.REBUILD, {"request_id": OWNER.request_id}),
                       read_server(ctx.engine, uuid))


def test_a_rebuild_waits_for_the_ports_shown_unplugged(with_neutron, cluster, neutron):
    uuid, port = _rebuilding(with_neutron, neutron, plugged=False)
    assert isinstance(_rebuild(with_neutron, uuid), Waiting)
    assert cluster.verbs() == ["start"]
    assert row_of(with_neutron.engine, uuid)["task_state"] == task_states.REBUILD_SPAWNING
    assert isinstance(_rebuild(with_neutron, uuid), Waiting)
    assert cluster.verbs() == ["start"]  # started once
    with db_api.transaction(with_neutron.engine) as conn:
        external_events.record(conn, [{"instance_uuid": uuid, "name": "network-vif-plugged", "status": "completed",
                                       "tag": port["id"], "host": "node-1"}])
    assert _rebuild(with_neutron, uuid) is DONE
    assert sysmeta.VIF_WAIT not in read_server(with_neutron.engine, uuid)["system_metadata"]


def test_a_rebuild_of_plugged_ports_does_not_wait(with_neutron, cluster, neutron):
    uuid, _port = _rebuilding(with_neutron, neutron, plugged=True)
    assert _rebuild(with_neutron, uuid) is DONE
    assert sysmeta.VIF_WAIT not in read_server(with_neutron.engine, uuid)["system_metadata"]


def test_a_rebuild_whose_port_never_plugs_ends_in_error(with_neutron, cluster, neutron, clock):
    uuid, _port = _rebuilding(with_neutron, neutron, plugged=False)
    assert isinstance(_rebuild(with_neutron, uuid), Waiting)
    clock.now += dt.timedelta(seconds=31)
    outcome = _rebuild(with_neutron, uuid)
    assert outcome.fault is not None and outcome.fault.message == "Virtual Interface creation failed"
    row = row_of(with_neutron.engine, uuid)
    assert (row["vm_state"], row["task_state"]) == (states.ERROR, None)
