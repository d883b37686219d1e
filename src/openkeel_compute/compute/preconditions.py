"""Which vm_state and task_state each server action accepts, and the lock rule.

Nova checks, in this order: the lock (admins bypass it), the vm_state, the task_state (None,
that is no task running, unless the action says otherwise), then that the server was launched
once; some actions also need a host ("Instance <uuid> is not ready"), checked before the states
(stop, start, the console) or after them (resize). The first failed check gives the 409 message.
``Precondition.check`` does the same on an instance row (any mapping with ``uuid``,
``vm_state``, ``task_state``, ``locked``, ``launched_at``, ``host``); ``instances.cas.begin_action``
repeats it inside a compare-and-swap so that of concurrent actions exactly one proceeds.
"""

from __future__ import annotations

from dataclasses import dataclass

from openkeel_compute.compute import errors
from openkeel_compute.model.states import (
    ACTIVE,
    ALLOW_REBOOT,
    ERROR,
    PAUSED,
    RESCUED,
    RESIZED,
    SHELVED,
    SHELVED_OFFLOADED,
    SOFT_DELETED,
    STOPPED,
    SUSPENDED,
    task_states,
)

ANY = None  # a precondition that does not look at this attribute


@dataclass(frozen=True, slots=True)
class Precondition:
    """``name`` is the action as the 409 message names it ("stop", "reboot", "confirmResize")."""

    name: str
    vm_states: frozenset | None = ANY
    task_states: frozenset | None = frozenset({None})
    must_have_launched: bool = True
    lock: bool = True
    # What the action sets task_state to when it proceeds (None: it does not set one).
    next_task_state: str | None = None
    # Whether the server must have a host (a compute service that owns it): checked "before" or
    # "after" the states, as Nova does for that action; None: not checked.
    host: str | None = None

    def check(self, instance, *, is_admin: bool) -> None:
        uuid = instance["uuid"]
        if self.lock and instance["locked"] and not is_admin:
            raise errors.InstanceIsLocked(uuid)
        if self.host == "before" and not instance["host"]:
            raise errors.InstanceNotReady(uuid)
        self._check_states(instance, uuid)
        if self.host == "after" and not instance["host"]:
            raise errors.InstanceNotReady(uuid)

    def _check_states(self, instance, uuid) -> None:
        if self.vm_states is not None and instance["vm_state"] not in self.vm_states:
            raise errors.InstanceInvalidState(self.name, uuid, "vm_state", instance["vm_state"])
        if self.task_states is not None and instance["task_state"] not in self.task_states:
            raise errors.InstanceInvalidState(self.name, uuid, "task_state", instance["task_state"])
        if self.must_have_launched and not instance["launched_at"]:
            raise errors.InstanceInvalidState(self.name, uuid, "launched_at", instance["launched_at"])


def _p(name, vm=ANY, task=frozenset({None}), *, launched=True, lock=True, next_task=None, host=None):
    return Precondition(name, None if vm is None else frozenset(vm),
                        None if task is None else frozenset(task), launched, lock, next_task, host)


_SNAPSHOTTABLE = (ACTIVE, STOPPED, PAUSED, SUSPENDED)
_VOLUME_STATES = (ACTIVE, PAUSED, STOPPED, RESIZED, SOFT_DELETED, SHELVED, SHELVED_OFFLOADED)
_METADATA_STATES = (ACTIVE, PAUSED, SUSPENDED, STOPPED)

# The matrix, keyed by the action's name in the 409 message.
PRECONDITIONS: dict[str, Precondition] = {p.name: p for p in (
    # delete: any vm_state and task_state, launched or not; a locked server is refused. Its
    # state change is no compare-and-swap (instances.begin_delete).
    _p("delete", task=ANY, launched=False, next_task=task_states.DELETING),
    _p("forceDelete", launched=False, next_task=task_states.DELETING),
    _p("restore", vm=[SOFT_DELETED], next_task=task_states.RESTORING),
    # a DELETE when deleted servers are kept: any vm_state, no task, launched once, not locked
    _p("soft_delete", next_task=task_states.SOFT_DELETING),
    _p("stop", vm=[ACTIVE, ERROR], next_task=task_states.POWERING_OFF, host="before"),
    _p("start", vm=[STOPPED], next_task=task_states.POWERING_ON, host="before"),
    _p("reboot", vm=[ACTIVE], next_task=task_states.REBOOTING),  # SOFT
    _p("pause", vm=[ACTIVE], next_task=task_states.PAUSING),
    _p("unpause", vm=[PAUSED], next_task=task_states.UNPAUSING),
    _p("suspend", vm=[ACTIVE], next_task=task_states.SUSPENDING),
    _p("resume", vm=[SUSPENDED], next_task=task_states.RESUMING),
    _p("rescue", vm=[ACTIVE, STOPPED, ERROR], next_task=task_states.RESCUING),
    _p("unrescue", vm=[RESCUED], next_task=task_states.UNRESCUING),
    _p("rebuild", vm=[ACTIVE, STOPPED, ERROR], next_task=task_states.REBUILDING),
    _p("resize", vm=[ACTIVE, STOPPED], next_task=task_states.RESIZE_PREP, host="after"),
    # a cold migration is a resize to the same flavor, refused under its own name
    _p("migrate", vm=[ACTIVE, STOPPED], next_task=task_states.RESIZE_PREP, host="after"),
    # the admin actions: injectNetworkInfo looks at the lock only
    _p("injectNetworkInfo", task=ANY, launched=False),
    _p("confirmResize", vm=[RESIZED]),
    _p("revertResize", vm=[RESIZED], next_task=task_states.RESIZE_REVERTING),
    _p("shelve", vm=_SNAPSHOTTABLE, next_task=task_states.SHELVING),
    _p("shelveOffload", vm=[SHELVED], next_task=task_states.SHELVING_OFFLOADING),
    _p("unshelve", vm=[SHELVED, SHELVED_OFFLOADED], next_task=task_states.UNSHELVING),
    _p("createImage", vm=_SNAPSHOTTABLE, lock=False, next_task=task_states.IMAGE_SNAPSHOT_PENDING),
    _p("createBackup", vm=_SNAPSHOTTABLE, lock=False, next_task=task_states.IMAGE_BACKUP),
    _p("changePassword", vm=[ACTIVE], next_task=task_states.UPDATING_PASSWORD),
    _p("trigger_crash_dump", vm=[ACTIVE, PAUSED, RESCUED, RESIZED, ERROR], host="before"),
    # reading the console needs a host only
    _p("get_console_output", task=ANY, launched=False, lock=False, host="before"),
    _p("os-migrateLive", vm=[ACTIVE, PAUSED], next_task=task_states.MIGRATING),
    # Nova checks no task_state but saves with expected_task_state None (a task is its 500: answered 409)
    _p("evacuate", vm=[ACTIVE, STOPPED, ERROR], lock=False, next_task=task_states.REBUILDING),
    _p("attach_volume", vm=_VOLUME_STATES),
    _p("detach_volume", vm=_VOLUME_STATES),
    _p("swap_volume", vm=[ACTIVE, PAUSED, RESIZED]),
    _p("attach_interface", vm=[ACTIVE, PAUSED, STOPPED]),
    _p("detach_interface", vm=[ACTIVE, PAUSED, STOPPED]),
    _p("update metadata", vm=_METADATA_STATES, task=ANY),
    _p("delete metadata", vm=_METADATA_STATES, task=ANY),
)}

# A hard reboot is checked as "reboot" too, but accepts more states, and may interrupt a soft
# reboot or a pause/suspend in progress.
HARD_REBOOT = _p("reboot", vm=[ACTIVE, STOPPED, PAUSED, SUSPENDED, ERROR], task=ALLOW_REBOOT,
                 next_task=task_states.REBOOTING_HARD)

# Lock and unlock look at neither state nor lock; they are recorded as instance actions.
LOCK = _p("lock", task=ANY, launched=False, lock=False)
UNLOCK = _p("unlock", task=ANY, launched=False, lock=False)


def precondition(action: str, *, reboot_type: str | None = None) -> Precondition:
    """The precondition of ``action``; ``reboot_type`` "HARD" (any case) selects the hard reboot."""
    if action == "reboot" and reboot_type is not None and reboot_type.upper() == "HARD":
        return HARD_REBOOT
    try:
        return PRECONDITIONS[action]
    except KeyError:
        raise ValueError(f"no precondition for action {action!r}") from None


def check(action: str, instance, *, is_admin: bool, reboot_type: str | None = None) -> Precondition:
    """Raise the action's 409 for ``instance`` if it may not proceed; return the precondition."""
    pre = precondition(action, reboot_type=reboot_type)
    pre.check(instance, is_admin=is_admin)
    return pre
