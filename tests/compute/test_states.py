"""Nova's status map and its inverse for the ``status`` list filter."""

from __future__ import annotations

import json

import pytest

from openkeel_compute.model import states
from openkeel_compute.model.states import task_states as ts
from tests._shared import shared_path


@pytest.mark.parametrize(("vm_state", "task_state", "status"), [
    ("active", None, "ACTIVE"),
    ("active", "rebooting", "REBOOT"),
    ("active", "reboot_started", "REBOOT"),
    ("active", "rebooting_hard", "HARD_REBOOT"),
    ("active", "reboot_pending_hard", "HARD_REBOOT"),
    ("active", "updating_password", "PASSWORD"),
    ("active", "rebuild_spawning", "REBUILD"),
    ("active", "migrating", "MIGRATING"),
    ("active", "resize_prep", "RESIZE"),
    ("active", "resize_finish", "RESIZE"),
    ("active", "powering-off", "ACTIVE"),  # a task without a status of its own shows the vm_state's
    ("active", "deleting", "ACTIVE"),
    ("building", "scheduling", "BUILD"),
    ("building", None, "BUILD"),
    ("stopped", None, "SHUTOFF"),
    ("stopped", "powering-on", "SHUTOFF"),
    ("stopped", "resize_migrating", "RESIZE"),
    ("stopped", "rebuilding", "REBUILD"),
    ("resized", None, "VERIFY_RESIZE"),
    ("resized", "resize_reverting", "REVERT_RESIZE"),
    ("resized", "resize_confirming", "VERIFY_RESIZE"),
    ("paused", None, "PAUSED"),
    ("paused", "migrating", "MIGRATING"),
    ("suspended", None, "SUSPENDED"),
    ("rescued", None, "RESCUE"),
    ("error", None, "ERROR"),
    ("error", "rebuild_block_device_mapping", "REBUILD"),
    ("error", "deleting", "ERROR"),
    ("deleted", None, "DELETED"),
    ("soft-delete", None, "SOFT_DELETED"),
    ("shelved", None, "SHELVED"),
    ("shelved_offloaded", None, "SHELVED_OFFLOADED"),
    ("bogus", None, "UNKNOWN"),
    (None, None, "UNKNOWN"),
])
def test_status_from_vm_state_and_task_state(vm_state, task_state, status):
    assert states.status_from_state(vm_state, task_state) == status


def test_a_deleted_row_is_deleted_whatever_its_states():
    # Right after DELETE Nova still shows vm_state active / task_state deleting as ACTIVE; once
    # the row is soft-deleted the states no longer matter.
    assert states.status_from_state("active", "deleting") == "ACTIVE"
    assert states.status_from_state("active", "deleting", deleted=True) == "DELETED"
    assert states.status_from_state("error", None, deleted=True) == "DELETED"


def test_every_status_the_recorded_exchanges_show_follows_from_their_states():
    recorded = json.loads(shared_path("reference/nova/servers-exchanges.json").read_text())
    seen = 0
    for exchange in recorded["exchanges"]:
        server = (exchange.get("body") or {}).get("server") if isinstance(exchange.get("body"), dict) else None
        if not server or "OS-EXT-STS:vm_state" not in server:
            continue
        seen += 1
        assert states.status_from_state(server["OS-EXT-STS:vm_state"], server["OS-EXT-STS:task_state"]) == \
            server["status"], exchange["step"]
    assert seen >= 10


def test_values_are_nova_s():
    assert len(states.VM_STATES) == 12 and len(states.TASK_STATES) == 42
    assert ts.POWERING_OFF == "powering-off" and ts.SOFT_DELETING == "soft-deleting"
    assert states.SOFT_DELETED == "soft-delete" and states.SHELVED_OFFLOADED == "shelved_offloaded"
    assert (states.power_state.NOSTATE, states.power_state.RUNNING, states.power_state.PAUSED,
            states.power_state.SHUTDOWN, states.power_state.CRASHED, states.power_state.SUSPENDED) == (0, 1, 3, 4, 6, 7)
    assert set(states.STATUS_MAP) == set(states.VM_STATES)
    assert states.FAULT_STATUSES == ("ERROR", "DELETED")


def test_status_filter_on_a_default_status_filters_on_the_vm_state_alone():
    # ACTIVE is the default of vm_state active: every active server matches, rebooting ones too.
    selected = states.status_filter(["ACTIVE"])
    assert selected.vm_states == ["active"] and selected.task_states is None


def test_status_filter_on_a_task_status_filters_on_both():
    selected = states.status_filter(["reboot"])  # case-insensitive
    assert selected.vm_states == ["active"]
    assert selected.task_states == sorted([ts.REBOOTING, ts.REBOOT_PENDING, ts.REBOOT_STARTED])
    resize = states.status_filter(["RESIZE"])
    assert resize.vm_states == ["active", "stopped"]
    assert resize.task_states == sorted([ts.RESIZE_PREP, ts.RESIZE_MIGRATING, ts.RESIZE_MIGRATED, ts.RESIZE_FINISH])


def test_status_filter_of_a_default_and_a_task_status_keeps_only_vm_states():
    selected = states.status_filter(["SHUTOFF", "REBUILD"])
    assert selected.vm_states == ["active", "error", "stopped"] and selected.task_states is None


def test_status_filter_of_an_unknown_status_matches_nothing():
    assert states.status_filter(["BOGUS"]).matches_nothing
    assert not states.status_filter(["deleted"]).matches_nothing
    assert states.status_filter(["deleted"]).vm_states == ["deleted"]


@pytest.mark.parametrize("status", states.STATUSES)
def test_the_inverse_of_each_status_contains_every_state_pair_that_shows_it(status):
    selected = states.status_filter([status])
    for vm_state in states.STATUS_MAP:
        for task_state in [None, *states.TASK_STATES]:
            if states.status_from_state(vm_state, task_state) != status:
                continue
            assert vm_state in selected.vm_states
            if selected.task_states is not None:
                assert task_state in selected.task_states, (vm_state, task_state)
