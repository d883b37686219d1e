"""The action precondition matrix and its 409 messages, checked against Nova's answers."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid as uuidlib

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import errors, preconditions, rebuild, soft_delete, unsupported
from openkeel_compute.compute.instances import cas, instance_actions, instance_faults, locks, store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import states
from openkeel_compute.model.states import task_states as ts
from tests._shared import shared_path
from tests.databases import ENGINES, throwaway_database

UUID = "d75df558-90bc-45c5-bb8b-1a3198e0bf90"
LAUNCHED = dt.datetime(2026, 12, 1, 9, 55, 8)


def server(vm_state="active", task_state=None, *, locked=False, launched_at=LAUNCHED, uuid=UUID,
           host="compute1"):
    return {"uuid": uuid, "vm_state": vm_state, "task_state": task_state, "locked": locked,
            "launched_at": launched_at, "host": host}


def refusal(action, instance, *, is_admin=False, reboot_type=None):
    with pytest.raises(errors.Conflict) as caught:
        preconditions.check(action, instance, is_admin=is_admin, reboot_type=reboot_type)
    return caught.value.message


# Answers of the Nova 34.0.0 servers API (recorded from it), by action and state.
NOVA_409 = [
    ("start", server("active"), "Cannot 'start' instance {u} while it is in vm_state active"),
    ("stop", server("stopped"), "Cannot 'stop' instance {u} while it is in vm_state stopped"),
    ("reboot", server("stopped"), "Cannot 'reboot' instance {u} while it is in vm_state stopped"),
    ("reboot", server("paused"), "Cannot 'reboot' instance {u} while it is in vm_state paused"),
    ("confirmResize", server("active"), "Cannot 'confirmResize' instance {u} while it is in vm_state active"),
    ("stop", server("resized"), "Cannot 'stop' instance {u} while it is in vm_state resized"),
    ("pause", server("paused"), "Cannot 'pause' instance {u} while it is in vm_state paused"),
    ("unpause", server("active"), "Cannot 'unpause' instance {u} while it is in vm_state active"),
    ("stop", server("active", locked=True), "Instance {u} is locked"),
    ("delete", server("active", locked=True), "Instance {u} is locked"),
    ("start", server("stopped", locked=True), "Instance {u} is locked"),
    # the losers of eight concurrent os-stop, and a reboot during the stop (HARD: test_hard_reboot_accepts_more_than_soft)
    ("stop", server("active", ts.POWERING_OFF), "Cannot 'stop' instance {u} while it is in task_state powering-off"),
    ("reboot", server("active", ts.POWERING_OFF), "Cannot 'reboot' instance {u} while it is in task_state powering-off"),
]


@pytest.mark.parametrize(("action", "instance", "message"), NOVA_409)
def test_refusals_carry_nova_s_messages(action, instance, message):
    assert refusal(action, instance) == message.format(u=UUID)


def test_the_recorded_exchanges_409s_are_reproduced():
    recorded = json.loads(shared_path("reference/nova/servers-exchanges.json").read_text())
    checked = 0
    names = {"os-stop": "stop", "os-start": "start", "reboot": "reboot", "confirmResize": "confirmResize"}
    for exchange in recorded["exchanges"]:
        if exchange["status"] != 409:
            continue
        message = exchange["body"]["conflictingRequest"]["message"]
        uuid = re.search(r"[0-9a-f-]{36}", message).group(0)
        if message.endswith("is locked"):
            action = "delete" if exchange["method"] == "DELETE" else names[next(iter(exchange["request_body"]))]
            instance = server("active", locked=True, uuid=uuid)
        else:
            action = names[next(iter(exchange["request_body"]))]
            vm_state = message.rsplit(" ", 1)[1]
            instance = server(vm_state, uuid=uuid)
        assert refusal(action, instance) == message, exchange["step"]
        checked += 1
    assert checked >= 6


def test_order_of_checks_lock_then_vm_state_then_task_state_then_launched():
    # locked and in the wrong vm_state: the lock speaks first
    assert refusal("start", server("active", locked=True)) == f"Instance {UUID} is locked"
    # wrong vm_state and a task running: the vm_state speaks
    assert refusal("start", server("active", ts.POWERING_OFF)).endswith("in vm_state active")
    # right vm_state, a task running
    assert refusal("stop", server("active", ts.POWERING_OFF)) == \
        f"Cannot 'stop' instance {UUID} while it is in task_state powering-off"
    # never launched (state None): the generic form
    assert refusal("stop", server("active", launched_at=None)) == \
        f"Instance {UUID} is in an invalid state for 'stop'"


def test_admins_bypass_the_lock_but_not_the_states():
    preconditions.check("stop", server("active", locked=True), is_admin=True)
    assert refusal("stop", server("stopped", locked=True), is_admin=True).endswith("vm_state stopped")


@pytest.mark.parametrize(("action", "allowed"), [
    ("stop", {"active", "error"}),
    ("start", {"stopped"}),
    ("reboot", {"active"}),
    ("pause", {"active"}),
    ("unpause", {"paused"}),
    ("suspend", {"active"}),
    ("resume", {"suspended"}),
    ("resize", {"active", "stopped"}),
    ("confirmResize", {"resized"}),
    ("revertResize", {"resized"}),
    ("rescue", {"active", "stopped", "error"}),
    ("unrescue", {"rescued"}),
    ("rebuild", {"active", "stopped", "error"}),
    ("shelve", {"active", "stopped", "paused", "suspended"}),
    ("unshelve", {"shelved", "shelved_offloaded"}),
    ("delete", set(states.VM_STATES)),
])
def test_the_vm_states_each_action_accepts(action, allowed):
    for vm_state in states.VM_STATES:
        instance = server(vm_state)
        if vm_state in allowed:
            preconditions.check(action, instance, is_admin=False)
        else:
            assert refusal(action, instance) == f"Cannot '{action}' instance {UUID} while it is in vm_state {vm_state}"


def test_hard_reboot_accepts_more_than_soft():
    for vm_state in ("active", "stopped", "paused", "suspended", "error"):
        preconditions.check("reboot", server(vm_state), is_admin=False, reboot_type="hard")
    # a hard reboot may interrupt a soft one, a soft reboot may not
    preconditions.check("reboot", server("active", ts.REBOOTING), is_admin=False, reboot_type="HARD")
    assert refusal("reboot", server("active", ts.REBOOTING), reboot_type="SOFT").endswith("task_state rebooting")
    assert refusal("reboot", server("active", ts.POWERING_OFF), reboot_type="HARD").endswith("task_state powering-off")
    assert preconditions.precondition("reboot", reboot_type="HARD").next_task_state == ts.REBOOTING_HARD
    assert preconditions.precondition("reboot", reboot_type="SOFT").next_task_state == ts.REBOOTING


def test_delete_accepts_any_task_and_an_unlaunched_server():
    preconditions.check("delete", server("building", ts.SCHEDULING, launched_at=None), is_admin=False)
    preconditions.check("delete", server("active", ts.REBOOTING), is_admin=False)


def test_an_unknown_action_is_a_programming_error():
    with pytest.raises(ValueError, match="no precondition"):
        preconditions.precondition("fly")


def test_actions_that_need_a_host_check_it_where_nova_does():
    # stop and start look at the host before the states, resize after them
    assert refusal("stop", server("error", host=None)) == f"Instance {UUID} is not ready"
    assert refusal("start", server("active", host=None)) == f"Instance {UUID} is not ready"
    assert refusal("stop", server("active", host=None, locked=True)) == f"Instance {UUID} is locked"
    assert refusal("resize", server("paused", host=None)).endswith("in vm_state paused")
    assert refusal("resize", server("active", host=None)) == f"Instance {UUID} is not ready"
    assert refusal("get_console_output", server("building", "spawning", host=None, launched_at=None)) == \
        f"Instance {UUID} is not ready"
    preconditions.check("get_console_output", server("error", "deleting", locked=True), is_admin=False)
    # pause needs no host
    preconditions.check("pause", server("active", host=None), is_admin=False)


@pytest.mark.parametrize(("action", "reboot_type", "message"), [
    ("stop", None, "Instance {u} is not ready"),
    ("start", None, "Instance {u} is not ready"),
    ("get_console_output", None, "Instance {u} is not ready"),
    ("pause", None, "Cannot 'pause' instance {u} while it is in vm_state error"),
    ("reboot", "HARD", "Instance {u} is in an invalid state for 'reboot'"),
    ("resize", None, "Cannot 'resize' instance {u} while it is in vm_state error"),
])
def test_a_server_that_was_never_scheduled(action, reboot_type, message):
    # What the Nova API answers for a server in ERROR after "No valid host was found": no host,
    # never launched.
    never = server("error", host=None, launched_at=None)
    assert refusal(action, never, reboot_type=reboot_type) == message.format(u=UUID)


# --- the remaining actions' writes, on SQLite, PostgreSQL and MariaDB ----------------------------------

OWNER = Actor("demo", "demo", request_id="req-remaining")
IMAGE = {"id": "0b7c7f25-5a3e-4d0e-9a7e-2a8a54f4a111", "name": "cirros-alt", "status": "active", "disk_format": "qcow2",
         "container_format": "bare", "min_ram": 0, "min_disk": 0, "properties": {"hw_disk_bus": "virtio"}}


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, tmp_path_factory):
    with throwaway_database(request.param, tmp_path_factory.mktemp("db")) as url:
        engine = db_api.make_engine(url)
        migration.sync(engine)
        yield engine
        engine.dispose()


def _boot(engine):
    flavorid = f"f-{uuidlib.uuid4().hex[:12]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=512, vcpus=1, root_gb=1, flavorid=flavorid)
        flavor = catalog.get(conn, flavorid)
        row = store.create(conn, actor=OWNER, flavor=flavor, extra_specs={}, display_name="srv",
                           metadata={"old": "1"}, image_ref="155d900f-4e14-4e4c-a73d-069cbf4541e6",
                           system_metadata={"image_architecture": "x86_64", "image_min_disk": "1"})
        cas.save_state(conn, row["uuid"], vm_state=states.ACTIVE, task_state=None,
                       power_state=states.power_state.RUNNING, launched_at=models.utcnow(), host="node-1")
        return store.get(conn, row["uuid"])


def _outbox(engine, uuid):
    with db_api.reader(engine) as conn:
        return [r.operation for r in conn.execute(sa.select(models.OUTBOX.c.operation)
                                                  .where(models.OUTBOX.c.object_id == uuid))]


def test_rebuild_replaces_fields_metadata_and_image_system_metadata(engine):
    row = _boot(engine)
    flavor = store.flavors_of(row).cur
    with db_api.transaction(engine) as conn:
        rebuild.begin_rebuild(conn, row, OWNER, image=IMAGE, flavor=flavor, metadata={"new": "2"},
                              changes={"display_name": "renamed", "trusted_certs": ["a", "b"], "user_data": None})
    with db_api.reader(engine) as conn:
        now = store.get(conn, row["uuid"])
        system = store.metadata_of(conn, row["uuid"], system=True)
        meta = store.metadata_of(conn, row["uuid"])
        action = instance_actions.actions_of(conn, row["uuid"])[0]["action"]
    assert (now["task_state"], now["image_ref"], now["display_name"], now["trusted_certs"], now["progress"]) == (
        "rebuilding", IMAGE["id"], "renamed", '["a", "b"]', 0)
    assert meta == {"new": "2"} and action == "rebuild"
    assert system == {"image_hw_disk_bus": "virtio", "image_min_ram": "0", "image_min_disk": "1",
                      "image_disk_format": "qcow2", "image_container_format": "bare",
                      "image_base_image_ref": IMAGE["id"], "openkeel_image_name": "cirros-alt"}
    assert _outbox(engine, row["uuid"]) == ["rebuild"]
    # a second rebuild while the first runs is Nova's 409, and writes nothing
    with pytest.raises(errors.Conflict) as caught, db_api.transaction(engine) as conn:
        rebuild.begin_rebuild(conn, now, OWNER, image=IMAGE, flavor=flavor, metadata=None, changes={})
    assert caught.value.message == f"Cannot 'rebuild' instance {row['uuid']} while it is in task_state rebuilding"
    assert _outbox(engine, row["uuid"]) == ["rebuild"]


def test_soft_delete_then_due_for_reclaim(engine):
    row = _boot(engine)
    with db_api.transaction(engine) as conn:
        soft_delete.begin_soft_delete(conn, row, OWNER)
        cas.save_state(conn, row["uuid"], expected_task_state="soft-deleting", vm_state=states.SOFT_DELETED,
                       task_state=None)
    with db_api.reader(engine) as conn:
        kept = store.get(conn, row["uuid"])
        assert row["uuid"] not in soft_delete.due_for_reclaim(conn, 3600)
        later = kept["deleted_at"] + dt.timedelta(seconds=3601)
        assert row["uuid"] in soft_delete.due_for_reclaim(conn, 3600, later)
    assert (kept["deleted"], store.status(kept)) == (0, "SOFT_DELETED")
    assert _outbox(engine, row["uuid"]) == ["soft-delete"]
    # locked: refused, so the API deletes it at once (or the lock refuses that too)
    other = _boot(engine)
    with db_api.transaction(engine) as conn:
        locks.lock(conn, other["uuid"], OWNER)
    with pytest.raises(errors.Conflict), db_api.transaction(engine) as conn:
        soft_delete.begin_soft_delete(conn, store.get(conn, other["uuid"]), OWNER)


def test_an_unsupported_action_ends_where_nova_leaves_it(engine):
    row = _boot(engine)
    ending = unsupported.Ending("compute_resize_instance", events=("conductor_migrate_server",))
    with db_api.transaction(engine) as conn:
        unsupported.fail(conn, row, preconditions.precondition("resize"), OWNER, ending)
    with db_api.reader(engine) as conn:
        now = store.get(conn, row["uuid"])
        action = instance_actions.get_action(conn, row["uuid"], OWNER.request_id)
        fault = instance_faults.latest_faults(conn, [row["uuid"]])[row["uuid"]]
    assert (now["vm_state"], now["task_state"]) == ("active", None)
    assert [(e["event"], e["result"]) for e in reversed(action["events"])] == [
        ("conductor_migrate_server", "Success"), ("compute_resize_instance", "Error")]
    assert (fault["code"], fault["message"]) == (500, "NotImplementedError")
