"""The server loop against the built-in cluster: server rows and their outbox rows (written with compute/,
as the servers API writes them) become KubeVirt objects and verbs, and KubeVirt's status comes back."""

from __future__ import annotations

import dataclasses
import json
import time

from sqlalchemy import select

from openkeel_compute.compute import preconditions
from openkeel_compute.compute.instances import cas, instance_actions, instance_faults, updates
from openkeel_compute.controller.gateway import SUBRESOURCES
from openkeel_compute.controller.kube import http_of, make_client
from openkeel_compute.controller.servers import make_loop, root_device_name, verb_for
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.emulator import Fault
from openkeel_compute.model import states
from tests.controller.helpers import (
    OWNER,
    Both,
    action,
    active,
    boot,
    every_engine_conf,  # noqa: F401 - the fixture conf, on every database
    pending,
    row_of,
    until,
)


def test_power_operations_name_kubevirt_verbs():
    def call(operation):  # (the plural the subresource acts on, KubeVirt's verb)
        return SUBRESOURCES[verb_for(operation)][0], verb_for(operation)

    assert call("stop") == ("virtualmachines", "stop")
    assert call("reboot-hard") == ("virtualmachines", "restart")
    assert call("reboot-soft") == ("virtualmachineinstances", "softreboot")
    assert verb_for("create") is None and verb_for("delete") is None


def test_root_device_name_follows_the_images_disk_bus():
    assert root_device_name({}) == "/dev/vda"
    assert root_device_name({"image_hw_disk_bus": "sata"}) == "/dev/sda"
    assert root_device_name({"image_hw_disk_bus": "scsi"}) == "/dev/sda"
    assert root_device_name({"image_hw_disk_bus": "ide"}) == "/dev/hda"


def test_create_ends_active_with_addresses(loop, db, apiserver):
    uuid = boot(db)
    row = until(loop, db, uuid, active)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.ACTIVE, None,
                                                                       states.power_state.RUNNING)
    assert row["launched_at"] is not None and row["host"] == "emulated-node-1"
    assert row["root_device_name"] == "/dev/vda"  # KubeVirt's default disk bus is virtio
    assert row["availability_zone"] == "nova"  # its host's zone, as Nova's scheduler sets it
    assert row["namespace"] and row["vm_name"] == uuid
    addresses = json.loads(row["network_info"])
    (ips,) = addresses.values()
    assert ips[0]["addr"].startswith("10.244.") and ips[0]["OS-EXT-IPS:type"] == "fixed"
    vm = apiserver.get("VirtualMachine", uuid, row["namespace"])
    assert vm["spec"]["runStrategy"] == "Manual"
    vm_writes = [params for method, path, params in apiserver.writes
                 if method == "PATCH" and path.endswith(f"/virtualmachines/{uuid}")]
    assert vm_writes and all(p.get("fieldManager") == "openkeel" and p.get("fieldValidation") == "Strict"
                             for p in vm_writes)
    assert pending(db) == []


def test_stop_then_start(loop, db):
    uuid = boot(db)
    until(loop, db, uuid, active)
    action(db, uuid, "stop", "stop")
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.STOPPED, None,
                                                                       states.power_state.SHUTDOWN)
    action(db, uuid, "start", "start")
    row = until(loop, db, uuid, active)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.ACTIVE, None,
                                                                       states.power_state.RUNNING)


def test_pause_unpause(loop, db):
    uuid = boot(db)
    until(loop, db, uuid, active)
    action(db, uuid, "pause", "pause")
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.PAUSED)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.PAUSED, None,
                                                                       states.power_state.PAUSED)
    action(db, uuid, "unpause", "unpause")
    row = until(loop, db, uuid, active)
    assert row["power_state"] == states.power_state.RUNNING


def test_delete_leaves_nothing_in_the_cluster(loop, db, apiserver):
    uuid = boot(db)
    row = until(loop, db, uuid, active)
    namespace = row["namespace"]
    assert apiserver.objects("Secret")  # the user data Secret is there before
    action(db, uuid, "delete", "delete")
    row = until(loop, db, uuid, lambda r: r["deleted"] != 0)
    assert row["deleted"] != 0 and row["vm_state"] == states.DELETED
    for kind in ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "Secret", "VirtualMachinePreference"):
        assert [k for k in apiserver.objects(kind) if k[0] == namespace] == [], kind
    assert pending(db) == []


def test_unschedulable_build_ends_in_error_with_a_fault(loop, db, apiserver):
    apiserver.inject(Fault(kind="unschedulable", message="0/1 nodes are available: Insufficient memory."))
    uuid = boot(db)
    row = until(loop, db, uuid, lambda r: r["vm_state"] != states.BUILDING)
    assert (row["vm_state"], row["task_state"]) == (states.ERROR, None)
    with db_api.reader(db) as conn:
        fault = instance_faults.latest_faults(conn, [uuid])[uuid]
        events = instance_actions.get_action(conn, uuid, OWNER.request_id)["events"]
    assert [(e["event"], e["result"]) for e in events] == [("compute__do_build_and_run_instance", "Error")]
    assert fault["code"] == 500 and "Insufficient memory" in (fault["message"] + (fault["details"] or ""))


def test_a_busy_cluster_is_asked_again_within_the_pass(loop, db, apiserver):
    uuid = boot(db)
    apiserver.inject(Fault(500, method="PATCH", plural="virtualmachines", times=1))
    assert loop.process_outbox() == {}  # the gateway's retry policy: 429, 5xx and transport errors
    assert pending(db) == [] and row_of(db, uuid)["namespace"]


def test_a_refused_request_leaves_the_row_pending_with_the_error(loop, db, apiserver):
    uuid = boot(db)
    apiserver.inject(Fault(422, method="PATCH", plural="virtualmachines", times=1))
    problems = loop.process_outbox()
    assert uuid in problems
    with db_api.reader(db) as conn:
        (error,) = conn.execute(select(models.OUTBOX.c.last_error).where(models.OUTBOX.c.object_id == uuid,
                                                                          models.OUTBOX.c.done_at.is_(None))).one()
    assert error and "create" in error
    assert active(until(loop, db, uuid, active))  # the next passes do it


def test_the_controller_runs_the_server_loop_after_the_flavors(conf, apiserver, db):
    from tests.controller.helpers import controller_for

    client = make_client(apiserver.kubeconfig())
    try:
        controller = controller_for(conf, apiserver, servers=make_loop(client, db))
        uuid = boot(db)
        deadline = time.monotonic() + 120
        while not active(row_of(db, uuid)) and time.monotonic() < deadline:
            controller.run_once()
            time.sleep(0.05)
        assert active(row_of(db, uuid))
        assert pending(db) == []
    finally:
        client.close()


def test_soft_reboot_ends_active(loop, db, apiserver):
    uuid = boot(db)
    row = until(loop, db, uuid, active)
    writes = len(apiserver.writes)
    with db_api.transaction(db) as conn:
        cas.begin_action(conn, uuid, preconditions.precondition("reboot", reboot_type="SOFT"), OWNER)
        updates.outbox(conn, uuid, "reboot-soft", OWNER)
    row = until(loop, db, uuid, active)
    assert (row["vm_state"], row["task_state"]) == (states.ACTIVE, None)
    assert any(path.endswith(f"/virtualmachineinstances/{uuid}/softreboot") for _m, path, _p in apiserver.writes[writes:])


def test_a_build_that_never_starts_ends_in_error(apiserver, db, ctl):
    import datetime as dt

    client = make_client(apiserver.kubeconfig())
    try:
        later = lambda: models.utcnow() + dt.timedelta(hours=2)
        servers = make_loop(client, db, build_timeout=3600, now=later)
        uuid = boot(db)
        apiserver.inject(Fault(403, method="PATCH", plural="virtualmachines", times=100))  # the VM is never taken
        servers.run_once()
        row = row_of(db, uuid)
        assert (row["vm_state"], row["task_state"]) == (states.ERROR, None)
        with db_api.reader(db) as conn:
            assert instance_faults.latest_faults(conn, [uuid])[uuid]["message"] == "Instance build timed out. Set to error state."
    finally:
        client.close()


def test_hard_reboot_ends_active_on_a_new_vmi(loop, db, apiserver):
    uuid = boot(db)
    row = until(loop, db, uuid, active)
    before = apiserver.get("VirtualMachineInstance", uuid, row["namespace"])["metadata"]["uid"]
    # the old VMI takes a second to go: on a loaded machine one pass could otherwise outlast the whole restart
    apiserver.lifecycle.delays = dataclasses.replace(apiserver.lifecycle.delays, stopping=1.0)
    with db_api.transaction(db) as conn:
        cas.begin_action(conn, uuid, preconditions.precondition("reboot", reboot_type="HARD"), OWNER)
        updates.outbox(conn, uuid, "reboot-hard", OWNER)
    loop.run_once()  # the restart is asked; the old VMI still runs: the task is not done
    assert row_of(db, uuid)["task_state"] is not None
    row = until(loop, db, uuid, active)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.ACTIVE, None,
                                                                       states.power_state.RUNNING)
    after = apiserver.get("VirtualMachineInstance", uuid, row["namespace"])["metadata"]["uid"]
    assert after != before


def test_the_controller_events_join_the_requests_instance_action(loop, db):
    uuid = boot(db)
    until(loop, db, uuid, active)
    with db_api.reader(db) as conn:
        events = instance_actions.get_action(conn, uuid, OWNER.request_id)["events"]
    assert [(e["event"], e["result"]) for e in events] == [("compute__do_build_and_run_instance", "Success")]
    assert all(e["finish_time"] is not None for e in events)
    assert [e["host"] for e in events] == ["emulated-node-1"]  # the host it ran on, as Nova's compute records


def test_a_server_deleted_while_building_leaves_nothing(loop, db, apiserver):
    uuid = boot(db)
    action(db, uuid, "delete", "delete")  # before any pass: the create and the delete rows are both pending
    row = until(loop, db, uuid, lambda r: r["deleted"] != 0)
    assert row["vm_state"] == states.DELETED
    for kind in ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "Secret"):
        assert [k for k in apiserver.objects(kind) if uuid in k[1]] == [], kind
    assert pending(db) == []


def test_hard_reboot_of_a_stopped_server_starts_it(loop, db):
    # Nova's hard reboot powers a stopped server on (the servers oracle: SHUTOFF -> ACTIVE);
    # KubeVirt refuses to restart a VM that does not run, so the controller starts it
    uuid = boot(db)
    until(loop, db, uuid, active)
    action(db, uuid, "stop", "stop")
    until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED and r["task_state"] is None)
    with db_api.transaction(db) as conn:
        cas.begin_action(conn, uuid, preconditions.precondition("reboot", reboot_type="HARD"), OWNER)
        updates.outbox(conn, uuid, "reboot-hard", OWNER)
    row = until(loop, db, uuid, active)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.ACTIVE, None,
                                                                       states.power_state.RUNNING)
    assert pending(db) == []


def test_a_server_booted_without_networks_has_no_interface_and_no_address(loop, db, apiserver):
    # networks "none": Nova allocates no port and shows no address; the VM gets no pod interface
    uuid = boot(db, requested_networks="none")
    row = until(loop, db, uuid, active)
    assert row["network_info"] is None
    vm = apiserver.get("VirtualMachine", uuid, row["namespace"])
    devices = vm["spec"]["template"]["spec"]["domain"]["devices"]
    assert (devices.get("interfaces"), devices.get("autoattachPodInterface")) == ([], False)
    assert vm["spec"]["template"]["spec"]["networks"] == []


def test_a_rebooted_server_stays_active(loop, db, apiserver):
    # the servers differential: after a soft then a hard reboot the server must stay ACTIVE on later passes
    uuid = boot(db)
    until(loop, db, uuid, active)
    for kind, operation in (("SOFT", "reboot-soft"), ("HARD", "reboot-hard")):
        with db_api.transaction(db) as conn:
            cas.begin_action(conn, uuid, preconditions.precondition("reboot", reboot_type=kind), OWNER)
            updates.outbox(conn, uuid, operation, OWNER)
        until(loop, db, uuid, active)
    for _ in range(20):
        loop.run_once()
        time.sleep(0.05)
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (states.ACTIVE, None,
                                                                       states.power_state.RUNNING)


def test_a_settled_server_is_observed_again_only_once_something_it_depends_on_changed(loop, db, apiserver,
                                                                                       monkeypatch):
    """A pass skips an ACTIVE server whose row and objects are as they were when its last observation
    changed nothing; its guest shutting down (a VMI change) is still seen on the next pass."""
    from openkeel_compute.controller import observe as observe_module

    uuid = boot(db)
    row = until(loop, db, uuid, active)
    loop.run_once()  # settled: this observation changes nothing
    observed: list[str] = []
    real = observe_module.observe

    def counted(server, *args, **kwargs):
        observed.append(server["uuid"])
        return real(server, *args, **kwargs)

    monkeypatch.setattr(observe_module, "observe", counted)
    loop.run_once()
    loop.run_once()
    assert observed == []
    client = make_client(apiserver.kubeconfig())
    try:  # the guest stops by itself: KubeVirt's stop, not an action of the API
        http_of(client).put(f"/apis/subresources.kubevirt.io/v1/namespaces/{row['namespace']}/"
                                   f"virtualmachines/{row['vm_name']}/stop", json={}).raise_for_status()
    finally:
        client.close()
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED)
    assert (row["vm_state"], row["task_state"]) == (states.STOPPED, None)
    assert uuid in observed


def test_a_build_the_watches_show_further_on_is_concluded_without_reading_the_cluster(loop, db, apiserver):
    """The watches never show a step a build has not reached: a build they show ACTIVE is ACTIVE with no
    fresh read; one they show a step behind its row (a watch lagging) is concluded from a fresh read."""
    uuid = boot(db)
    loop.process_outbox()
    servers = loop.servers
    row = row_of(db, uuid)
    apiserver.wait_for("VirtualMachineInstance", row["vm_name"], row["namespace"],
                       lambda o: ((o or {}).get("status") or {}).get("phase") == "Running")
    cached = dataclasses.replace(servers.cluster.snapshot(), cached=True)
    fresh: list[str] = []
    look, snapshot = servers.cluster.look, servers.cluster.snapshot
    servers.cluster.look = lambda *a: (fresh.append("look"), look(*a))[1]
    servers.cluster.snapshot = lambda: (fresh.append("list"), snapshot())[1]
    try:
        servers.observe_one(uuid, cached)
        assert active(row_of(db, uuid)) and fresh == []
        # a second server whose row went further than the watches show (spawning: its VM made; a lagging
        # watch shows no VM yet, which alone would read as the VM gone)
        other = boot(db)
        loop.process_outbox()
        with db_api.transaction(db) as conn:
            cas.save_state(conn, other, task_state="spawning")
        behind = dataclasses.replace(snapshot(), cached=True, vms={}, vmis={}, dvs={})
        servers.observe_one(other, behind)
        assert fresh
    finally:
        servers.cluster.look, servers.cluster.snapshot = look, snapshot


def test_servers_whose_objects_a_pass_created_are_observed_from_the_watches_next_pass(apiserver, db, ctl):
    """Servers whose objects the last two passes created are not read from the cluster when the watches
    do not show them yet (later passes observe them from the watches, and they boot); a VM the watches
    still do not show after that is read from the cluster."""
    from openkeel_compute.controller.watch import Snapshot

    client = make_client(apiserver.kubeconfig())
    servers = make_loop(client, db, watch=True)
    try:
        loop = Both(ctl, servers)
        deadline = time.monotonic() + 10
        while not servers.watched.synced and time.monotonic() < deadline:
            time.sleep(0.01)
        uuids = [boot(db) for _ in range(12)]
        ctl.run_once()  # the flavors' objects
        servers.process_outbox()
        assert all(row_of(db, u)["vm_name"] for u in uuids)
        fresh: list[str] = []
        look, snapshot, watched = servers.cluster.look, servers.cluster.snapshot, servers.watched.snapshot
        servers.cluster.look = lambda *a: (fresh.append("look"), look(*a))[1]
        servers.cluster.snapshot = lambda: (fresh.append("list"), snapshot())[1]
        servers.watched.snapshot = lambda: Snapshot({}, {}, {}, cached=True)  # the watches a moment behind
        servers.observe_all()
        assert fresh == []
        servers.process_outbox()  # nothing to do; the watches still behind on the next pass
        servers.observe_all()
        assert fresh == []
        servers.process_outbox()  # two passes on, a VM the watches do not show is read from the cluster
        servers.observe_all()
        assert fresh
        servers.cluster.look, servers.cluster.snapshot, servers.watched.snapshot = look, snapshot, watched
        for uuid in uuids:
            assert active(until(loop, db, uuid, active)), uuid
    finally:
        servers.close()
        client.close()


def test_a_server_whose_node_stopped_answering_is_never_skipped_as_settled():
    """Its VMI stays as the node controller left it (Failed, NodeUnresponsive) when the node is then
    deleted: only asking about the node tells, so such a server is observed on every pass."""
    from openkeel_compute.controller.observe import quiet_key as _quiet_key
    from openkeel_compute.controller.watch import Snapshot
    from openkeel_compute.kubevirt.names import server_vm_name

    U1 = "6f1c9a3e-2b4d-4c8e-9f0a-1b2c3d4e5f60"

    server = {"uuid": U1, "vm_state": states.ACTIVE, "task_state": None, "system_metadata": {}}
    key = ("ns", server_vm_name(U1))
    vm = {"metadata": {"resourceVersion": "1"}}

    def vmi(**status):
        return {"metadata": {"resourceVersion": "2"}, "status": status}

    running = Snapshot(vms={key: vm}, vmis={key: vmi(phase="Running", nodeName="n1")}, dvs={})
    assert _quiet_key(server, "ns", running) is not None
    lost = Snapshot(vms={key: vm}, vmis={key: vmi(phase="Failed", reason="NodeUnresponsive", nodeName="n1")}, dvs={})
    assert _quiet_key(server, "ns", lost) is None
