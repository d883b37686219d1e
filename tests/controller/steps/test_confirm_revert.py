"""The confirm-resize and revert-resize steps on their own (controller/steps/confirm.py, revert.py): a server
whose resize finished (compute/resize.py's rows), a fake cluster, and what each step asks of the cluster,
writes, and how it ends. tests/controller/test_server_resize.py drives the same steps end to end."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import resize as resize_rows
from openkeel_compute.compute import working_state
from openkeel_compute.compute.instances import cas, store
from openkeel_compute.controller.steps import TABLE, confirm, revert, vm_edits
from openkeel_compute.controller.steps.base import DONE, ServerRow, Wait, read_server
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.db.models import MIGRATIONS
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states
from tests.controller.helpers import OWNER, boot, row_of

OLD_IT, NEW_IT = "it-old", "it-new"


def _verify_resize(db, *, vm_state: str = states.ACTIVE) -> tuple[str, str]:
    """A server in VERIFY_RESIZE from ``vm_state``: its migration finished, the old matchers and revisions
    kept in the working state as the resize step keeps them. Returns (server uuid, migration uuid)."""
    uuid = boot(db)
    power = states.power_state.SHUTDOWN if vm_state == states.STOPPED else states.power_state.RUNNING
    with db_api.transaction(db) as conn:
        cas.save_state(conn, uuid, vm_state=vm_state, task_state=None, power_state=power, host="node-1",
                       node="node-1", launched_at=models.utcnow())
        catalog.create(conn, name=f"bigger-{uuid[:8]}", memory_mb=1024, vcpus=2, root_gb=1,
                       flavorid=f"bigger-{uuid[:8]}")
        flavor = catalog.get(conn, f"bigger-{uuid[:8]}")
        migration = resize_rows.start(conn, store.get(conn, uuid), flavor, {}, OWNER, auto_disk_config=False)
        cas.save_state(conn, uuid, task_state=task_states.RESIZE_FINISH)
        assert resize_rows.finish(conn, uuid, migration, power_state=power, host="node-1")
        before = {"instancetype": {"matcher": {"kind": "VirtualMachineInstancetype", "name": OLD_IT},
                                   "revision": "rev-old-it"},
                  "preference": {"matcher": {"kind": "VirtualMachinePreference", "name": "pref"},
                                 "revision": "rev-pref"}}
        working_state.put(conn, uuid, sysmeta.RESIZE_FROM, json.dumps(before))
    return uuid, migration


def _vm(uuid: str, instancetype: str, revision: str) -> dict[str, Any]:
    return {"metadata": {"name": server_vm_name(uuid)},
            "spec": {"instancetype": {"kind": "VirtualMachineInstancetype", "name": instancetype},
                     "preference": {"kind": "VirtualMachinePreference", "name": "pref"}},
            "status": {"instancetypeRef": {"name": instancetype, "controllerRevisionRef": {"name": revision}},
                       "preferenceRef": {"name": "pref", "controllerRevisionRef": {"name": "rev-pref"}}}}


def _row(uuid: str, operation: str, migration: str) -> ServerRow:
    return ServerRow(1, uuid, operation, {"request_id": OWNER.request_id, "migration": migration})


def _server(db, uuid: str) -> dict[str, Any]:
    server = read_server(db, uuid)
    assert server is not None
    return server


def _migration_status(db, migration: str) -> str:
    with db_api.reader(db) as conn:
        return conn.execute(select(MIGRATIONS.c.status).where(MIGRATIONS.c.uuid == migration)).scalar_one()


# -- confirm ------------------------------------------------------------------------------------------

def test_confirm_deletes_the_old_revision_and_ends_the_resize(ctx, db, cluster):
    uuid, migration = _verify_resize(db)
    with db_api.transaction(db) as conn:
        resize_rows.confirm(conn, store.get(conn, uuid), OWNER)
    cluster.vms[uuid] = _vm(uuid, NEW_IT, "rev-new-it")
    assert confirm.run(ctx, _row(uuid, ops.CONFIRM_RESIZE, migration), _server(db, uuid)) is DONE
    # the old flavor's revision goes; the preference's, still the VM's, stays
    assert cluster.calls == [("delete", "ControllerRevision", "rev-old-it")]
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"]) == (states.ACTIVE, None)
    assert _migration_status(db, migration) == "confirmed"
    with db_api.reader(db) as conn:
        assert working_state.get(conn, uuid, sysmeta.RESIZE_FROM) is None


def test_confirm_without_a_vm_asks_the_cluster_nothing(ctx, db, cluster):
    uuid, migration = _verify_resize(db, vm_state=states.STOPPED)
    with db_api.transaction(db) as conn:
        resize_rows.confirm(conn, store.get(conn, uuid), OWNER)
    assert confirm.run(ctx, _row(uuid, ops.CONFIRM_RESIZE, migration), _server(db, uuid)) is DONE
    assert cluster.calls == []
    assert row_of(db, uuid)["vm_state"] == states.STOPPED and _migration_status(db, migration) == "confirmed"


def test_auto_confirm_confirms_only_resizes_older_than_the_window(ctx, db):
    uuid, migration = _verify_resize(db)
    assert confirm.auto_confirm(ctx, 0) == []  # no window: never
    # the context's clock is in 2030: every resize of today waited longer than an hour
    assert uuid in confirm.auto_confirm(ctx, 3600)
    assert _migration_status(db, migration) == "confirming"
    assert uuid not in confirm.auto_confirm(ctx, 3600)  # already confirming: not twice


# -- revert -------------------------------------------------------------------------------------------

def _reverting(db) -> tuple[str, str]:
    uuid, migration = _verify_resize(db)
    with db_api.transaction(db) as conn:
        resize_rows.revert(conn, store.get(conn, uuid), OWNER)
    return uuid, migration


def test_a_revert_whose_task_was_taken_over_is_done_without_asking_the_cluster(ctx, db, cluster):
    uuid, migration = _verify_resize(db)  # not reverting
    assert revert.run(ctx, _row(uuid, ops.REVERT_RESIZE, migration), _server(db, uuid)) is DONE
    assert cluster.calls == []


def test_a_revert_of_a_server_whose_vm_is_gone_makes_it_again_at_the_old_size(ctx, db, cluster):
    """Not a wait for ever (issue 27): the VM made again from the server's record on the old flavor, whose
    matchers the revert then waits for (the old revisions went with the old VM); it ends once it runs."""
    uuid, migration = _reverting(db)
    server = _server(db, uuid)
    copy = store.flavors_of(server)
    old, new = (vm_edits.wanted_matchers(ctx, server, flavor)["instancetype"] for flavor in (copy.old, copy.new))
    assert old["name"] != new["name"]
    with pytest.raises(Wait, match="made again"):
        revert.run(ctx, _row(uuid, ops.REVERT_RESIZE, migration), server)
    applied = [c[1:] for c in cluster.calls if c[0] == "apply"]
    assert ("VirtualMachine", server_vm_name(uuid)) in applied and ("VirtualMachineInstancetype", old["name"]) in applied
    assert ("VirtualMachineInstancetype", new["name"]) not in applied
    with db_api.reader(db) as conn:
        before = json.loads(working_state.get(conn, uuid, sysmeta.RESIZE_FROM))
    assert before["instancetype"] == {"matcher": old, "revision": None}
    # KubeVirt takes the made-again VM on: it runs on the old instancetype, and the revert ends
    cluster.vms[uuid] = _vm(uuid, old["name"], "rev-made-again")
    cluster.vmi_in(uuid, "Running")
    assert revert.run(ctx, _row(uuid, ops.REVERT_RESIZE, migration), _server(db, uuid)) is DONE
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"], row["memory_mb"]) == (states.ACTIVE, None, 512)
    assert _migration_status(db, migration) == "reverted"


@pytest.mark.parametrize("operation", [ops.REVERT_RESIZE, ops.CONFIRM_RESIZE])
def test_a_revert_or_confirm_whose_attempts_are_spent_ends_in_error(ctx, db, cluster, operation):
    """As Nova's compute ends a revert or confirm that raised: ERROR with the fault, no task, the migration
    in error, and the resize's working state gone (not retried for ever)."""
    uuid, migration = _reverting(db) if operation == ops.REVERT_RESIZE else _verify_resize(db)
    if operation == ops.CONFIRM_RESIZE:
        with db_api.transaction(db) as conn:
            resize_rows.confirm(conn, store.get(conn, uuid), OWNER)
    give_up = TABLE[operation].give_up
    assert give_up is not None
    outcome = give_up(ctx, _row(uuid, operation, migration), _server(db, uuid), "KubeVirt refused: boom")
    assert outcome.final
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"]) == (states.ERROR, None)
    assert _migration_status(db, migration) == "error"
    server = _server(db, uuid)
    with db_api.reader(db) as conn:
        assert working_state.get(conn, uuid, sysmeta.RESIZE_FROM) is None
        faults = conn.execute(select(models.INSTANCE_FAULTS.c.message)
                              .where(models.INSTANCE_FAULTS.c.instance_uuid == uuid)).scalars().all()
    assert faults == ["KubeVirt refused: boom"] and server["vm_state"] == states.ERROR


def test_a_revert_stops_the_vm_before_patching_the_old_matchers_back(ctx, db, cluster):
    uuid, migration = _reverting(db)
    cluster.vms[uuid] = _vm(uuid, NEW_IT, "rev-new-it")
    cluster.vmi_in(uuid, "Running")
    with pytest.raises(Wait, match="stop"):
        revert.run(ctx, _row(uuid, ops.REVERT_RESIZE, migration), _server(db, uuid))
    assert cluster.verbs() == ["stop"] and not [c for c in cluster.calls if c[0] == "patch"]
    del cluster.vmis[uuid]  # stopped: the matchers go back with their revisions
    with pytest.raises(Wait, match="old instancetype back"):
        revert.run(ctx, _row(uuid, ops.REVERT_RESIZE, migration), _server(db, uuid))
    assert ("patch", "VirtualMachine", server_vm_name(uuid), "json") in cluster.calls
    assert row_of(db, uuid)["task_state"] == task_states.RESIZE_REVERTING


def test_a_revert_ends_once_the_vm_runs_on_the_old_instancetype(ctx, db, cluster):
    uuid, migration = _reverting(db)
    cluster.vms[uuid] = _vm(uuid, OLD_IT, "rev-old-it")
    cluster.vmi_in(uuid, "Running")
    assert revert.run(ctx, _row(uuid, ops.REVERT_RESIZE, migration), _server(db, uuid)) is DONE
    assert cluster.verbs() == []
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"], row["memory_mb"]) == (states.ACTIVE, None, 512)
    assert _migration_status(db, migration) == "reverted"


def test_a_revert_of_a_stopped_server_leaves_it_stopped(ctx, db, cluster):
    uuid, migration = _verify_resize(db, vm_state=states.STOPPED)
    with db_api.transaction(db) as conn:
        resize_rows.revert(conn, store.get(conn, uuid), OWNER)
    cluster.vms[uuid] = _vm(uuid, OLD_IT, "rev-old-it")
    assert revert.run(ctx, _row(uuid, ops.REVERT_RESIZE, migration), _server(db, uuid)) is DONE
    assert cluster.verbs() == []  # never started
    assert row_of(db, uuid)["vm_state"] == states.STOPPED
