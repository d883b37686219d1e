"""Each server step on its own, against a small fake of the cluster gateway (tests/controller/fake_cluster.py)
and a real database (the fixtures are this folder's conftest.py): what it asks the cluster, what it writes,
and how it ends (done, waiting, failed). The end-to-end tests (test_server_loop.py, ...) drive the same steps against the built-in cluster."""

from __future__ import annotations

from typing import Any

import pytest

from openkeel_compute.compute import console as console_rows
from openkeel_compute.compute.instances import cas
from openkeel_compute.controller.steps import build, console, delete, power, reboot, rebuild, resize
from openkeel_compute.controller.steps.base import (
    DONE,
    Failed,
    ServerRow,
    Wait,
    Waiting,
    read_server,
)
from openkeel_compute.db import api as db_api
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states
from tests.controller.helpers import OWNER, boot, row_of


def _server(db, uuid: str, **state: Any) -> dict[str, Any]:
    """The server's row as a step gets it, after ``state`` (vm_state, task_state, ...) was written."""
    if state:
        with db_api.transaction(db) as conn:
            cas.save_state(conn, uuid, **state)
    server = read_server(db, uuid)
    assert server is not None
    return server


def _row(uuid: str, operation: str, **payload: Any) -> ServerRow:
    return ServerRow(1, uuid, operation, {"request_id": OWNER.request_id, **payload})


# -- build --------------------------------------------------------------------------------------------

def test_build_applies_the_objects_then_starts_the_vm(ctx, db, cluster):
    uuid = boot(db)
    assert build.run(ctx, _row(uuid, ops.CREATE), _server(db, uuid)) is DONE
    kinds = [call[1] for call in cluster.calls if call[0] == "apply"]
    # the VM, then the server's own instancetype and preference it names, owned by it (KubeVirt admits the
    # VM first and starts it once they exist); no patch; then the start
    sizing = ["VirtualMachineInstancetype", "VirtualMachinePreference"]
    assert cluster.calls[0][0] == "namespace" and "Secret" in kinds
    assert kinds[kinds.index("VirtualMachine"):] == ["VirtualMachine", *sizing]
    assert cluster.patches == []
    assert cluster.verbs() == ["start"] and [p[0] for p in ctx.pass_state.placed] == [uuid]


def test_a_build_that_already_ended_makes_nothing(ctx, db, cluster):
    uuid = boot(db)
    assert build.run(ctx, _row(uuid, ops.CREATE), _server(db, uuid, vm_state=states.ERROR)) is DONE
    assert cluster.calls == []


# -- power, reboot ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("operation", "first", "stages"), [
    (ops.REBOOT_SOFT, "rebooting", ["reboot_pending", "reboot_started"]),
    (ops.REBOOT_HARD, "rebooting_hard", ["reboot_pending_hard", "reboot_started_hard"])])
def test_a_reboot_passes_novas_stages_before_the_guest_is_asked(ctx, db, cluster, operation, first, stages):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running")
    server = _server(db, uuid, vm_state=states.ACTIVE, task_state=first)
    assert reboot.begin(ctx, _row(uuid, operation), server)
    assert read_server(db, uuid)["task_state"] == server["task_state"] == stages[-1]
    assert cluster.verbs() == []  # the stages come before the guest is asked
    # tried again: nothing written again; another task took over: nothing written, not rebooted
    assert reboot.begin(ctx, _row(uuid, operation), server)
    other = _server(db, uuid, task_state="deleting")
    assert not reboot.begin(ctx, _row(uuid, operation), other)
    assert read_server(db, uuid)["task_state"] == "deleting"

@pytest.mark.parametrize(("operation", "verb"), [(ops.STOP, "stop"), (ops.PAUSE, "pause"), (ops.UNPAUSE, "unpause"),
                                                 (ops.REBOOT_SOFT, "softreboot")])
def test_a_power_operation_is_one_kubevirt_verb(ctx, db, cluster, operation, verb):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running")
    task = {"task_state": "rebooting"} if operation == ops.REBOOT_SOFT else {}  # as the API leaves it
    assert power.run(ctx, _row(uuid, operation), _server(db, uuid, vm_state=states.ACTIVE, **task)) is DONE
    assert cluster.verbs() == [verb]


@pytest.mark.parametrize("phase", [None, "Failed"])
def test_on_a_guest_that_does_not_run_a_soft_reboot_is_hard_a_pause_ends_in_a_fault(ctx, db, cluster, phase):
    uuid = boot(db)
    if phase:
        cluster.vmi_in(uuid, phase)
    cluster.vms[uuid] = {"metadata": {"name": uuid, "uid": "vm-1"}}
    assert power.run(ctx, _row(uuid, ops.REBOOT_SOFT), _server(db, uuid, vm_state=states.ACTIVE,
                                                               task_state="rebooting")) is DONE
    assert cluster.verbs() == ["start"]
    outcome = power.run(ctx, _row(uuid, ops.PAUSE), _server(db, uuid, vm_state=states.ACTIVE))
    assert outcome.final and outcome.fault.code == 409
    assert outcome.fault.message == f"Instance {uuid} is not running."
    assert cluster.verbs() == ["start"]  # nothing asked of the cluster


def test_a_start_without_placement_starts_where_the_vm_is_pinned(ctx, db, cluster):
    uuid = boot(db)
    cluster.vms[uuid] = {"metadata": {"name": uuid, "uid": "vm-1"}}
    assert power.start(ctx, _row(uuid, ops.START), _server(db, uuid, vm_state=states.STOPPED)) is DONE
    assert cluster.verbs() == ["start"] and not [c for c in cluster.calls if c[0] == "apply"]


def test_a_start_of_a_server_whose_vm_is_gone_makes_it_again_first(ctx, db, cluster):
    uuid = boot(db)
    assert power.start(ctx, _row(uuid, ops.START), _server(db, uuid, vm_state=states.STOPPED)) is DONE
    kinds = [c[1] for c in cluster.calls if c[0] == "apply"]
    assert "VirtualMachine" in kinds and cluster.calls[-1][0] == "subresource" and cluster.verbs() == ["start"]


def test_a_hard_reboot_restarts_a_running_vm_and_remembers_the_vmi_it_replaces(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running", uid="old-vmi")
    assert reboot.run(ctx, _row(uuid, ops.REBOOT_HARD), _server(db, uuid, vm_state=states.ACTIVE,
                                                                task_state="rebooting_hard")) is DONE
    assert cluster.verbs() == ["restart"]
    assert _server(db, uuid)["system_metadata"][sysmeta.REPLACED_VMI] == "old-vmi"


def test_a_hard_reboot_of_a_server_that_does_not_run_starts_it(ctx, db, cluster):
    uuid = boot(db)
    assert reboot.run(ctx, _row(uuid, ops.REBOOT_HARD), _server(db, uuid, vm_state=states.STOPPED,
                                                                task_state="rebooting_hard")) is DONE
    assert cluster.verbs() == ["start"] and sysmeta.REPLACED_VMI not in _server(db, uuid)["system_metadata"]


# -- rebuild ------------------------------------------------------------------------------------------

def test_a_rebuild_waits_for_the_vm_to_stop_then_replaces_the_root_disk_and_starts_it(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running")
    cluster.dv_in(uuid, f"{uuid}-rootdisk", "Succeeded")
    row = _row(uuid, ops.REBUILD, old_vm_state=states.ACTIVE)
    outcome = rebuild.run(ctx, row, _server(db, uuid, vm_state=states.ACTIVE, task_state=task_states.REBUILDING))
    assert isinstance(outcome, Waiting) and "stop" in outcome.reason and cluster.verbs() == ["stop"]
    del cluster.vmis[uuid]
    assert rebuild.run(ctx, row, _server(db, uuid)) is DONE
    assert ("delete", "DataVolume", f"{uuid}-rootdisk") in cluster.calls and cluster.verbs() == ["stop", "start"]
    assert row_of(db, uuid)["task_state"] == task_states.REBUILD_SPAWNING


def test_a_stopped_servers_rebuild_waits_for_the_import_and_fails_with_nova_s_fault(ctx, db, cluster):
    uuid = boot(db)
    row = _row(uuid, ops.REBUILD, old_vm_state=states.STOPPED)
    server = _server(db, uuid, vm_state=states.STOPPED, task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING)
    root = rebuild._root(row)
    cluster.dv_in(uuid, root, "ImportInProgress")
    assert isinstance(rebuild.run(ctx, row, server), Waiting)
    cluster.dvs[uuid][0]["status"]["phase"] = "Failed"
    outcome = rebuild.run(ctx, row, server)
    assert isinstance(outcome, Failed) and outcome.final and outcome.fault is not None
    assert outcome.fault.details == f"KubeVirt: DataVolume {root} Failed"
    assert (row_of(db, uuid)["vm_state"], row_of(db, uuid)["task_state"]) == (states.ERROR, None)
    assert rebuild.run(ctx, row, _server(db, uuid)) is DONE  # no longer this rebuild's to finish


def test_a_stopped_servers_rebuild_ends_stopped_once_the_disk_is_imported(ctx, db, cluster):
    uuid = boot(db)
    row = _row(uuid, ops.REBUILD, old_vm_state=states.STOPPED)
    server = _server(db, uuid, vm_state=states.STOPPED, task_state=task_states.REBUILD_BLOCK_DEVICE_MAPPING)
    cluster.dv_in(uuid, rebuild._root(row), "Succeeded")
    assert rebuild.run(ctx, row, server) is DONE
    assert (row_of(db, uuid)["vm_state"], row_of(db, uuid)["task_state"]) == (states.STOPPED, None)


# -- delete, soft delete, restore ---------------------------------------------------------------------

def test_a_delete_removes_the_servers_objects(ctx, db, cluster):
    uuid = boot(db)
    assert delete.run(ctx, _row(uuid, ops.DELETE), _server(db, uuid)) is DONE
    assert cluster.calls == [("delete_server", "project-1", uuid)]


def test_a_soft_delete_waits_for_the_vm_to_stop(ctx, db, cluster):
    uuid = boot(db)
    cluster.vmi_in(uuid, "Running")
    row = _row(uuid, ops.SOFT_DELETE)
    server = _server(db, uuid, vm_state=states.ACTIVE, task_state=task_states.SOFT_DELETING)
    assert isinstance(delete.soft(ctx, row, server), Waiting) and cluster.verbs() == ["stop"]
    cluster.vmi_in(uuid, "Succeeded")
    assert delete.soft(ctx, row, server) is DONE
    assert row_of(db, uuid)["vm_state"] == states.SOFT_DELETED


def test_a_restore_starts_the_vm_and_is_done_once_it_runs(ctx, db, cluster):
    uuid = boot(db)
    row = _row(uuid, ops.RESTORE)
    server = _server(db, uuid, vm_state=states.SOFT_DELETED, task_state=task_states.RESTORING)
    assert isinstance(delete.restore(ctx, row, server), Waiting) and cluster.verbs() == ["start"]
    cluster.vmi_in(uuid, "Running")
    assert delete.restore(ctx, row, server) is DONE
    assert (row_of(db, uuid)["vm_state"], row_of(db, uuid)["task_state"]) == (states.ACTIVE, None)


def test_a_step_whose_task_was_taken_over_is_done_without_asking_the_cluster(ctx, db, cluster):
    uuid = boot(db)
    server = _server(db, uuid, vm_state=states.ACTIVE, task_state=task_states.DELETING)
    for step, operation in ((delete.soft, ops.SOFT_DELETE), (delete.restore, ops.RESTORE),
                            (rebuild.run, ops.REBUILD)):
        assert step(ctx, _row(uuid, operation), server) is DONE
    assert cluster.calls == []


# -- resize, console ----------------------------------------------------------------------------------

def test_the_console_of_a_server_that_does_not_run_is_empty(ctx, db, cluster):
    uuid = boot(db)
    with db_api.transaction(db) as conn:
        request = console_rows.request(conn, uuid, None)
    assert console.run(ctx, _row(uuid, ops.CONSOLE_OUTPUT), None) is DONE
    with db_api.reader(db) as conn:
        answer = console_rows.answered(conn, request)
    assert answer is not None and (answer.output, answer.error) == ("", None)


def test_a_resize_of_a_server_whose_vm_is_gone_makes_it_again_first(ctx, db, cluster):
    """Not a wait for ever: the VM is made again from the record (not started), then the resize goes on."""
    uuid = boot(db)
    server = _server(db, uuid, vm_state=states.STOPPED, task_state=task_states.RESIZE_PREP)
    with pytest.raises(Wait, match="made again"):
        resize.run(ctx, _row(uuid, ops.RESIZE, migration="m-1"), server)
    assert "VirtualMachine" in [c[1] for c in cluster.calls if c[0] == "apply"] and cluster.verbs() == []


def test_a_resize_stops_the_running_vm_first_and_waits_without_moving_on(ctx, db, cluster):
    uuid = boot(db)
    cluster.vms[uuid] = {"metadata": {"name": uuid, "uid": "vm-1"}}
    cluster.vmi_in(uuid, "Running")
    server = _server(db, uuid, vm_state=states.ACTIVE, task_state=task_states.RESIZE_MIGRATING)
    with pytest.raises(Wait, match="to stop"):
        resize.run(ctx, _row(uuid, ops.RESIZE, migration="m-1"), server)
    assert cluster.verbs() == ["stop"] and row_of(db, uuid)["task_state"] == task_states.RESIZE_MIGRATING
    assert not [c for c in cluster.calls if c[0] in ("apply", "patch")]  # nothing of the VM changed yet
