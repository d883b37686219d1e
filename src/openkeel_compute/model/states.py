"""vm_state, task_state and power_state values, and Nova's server status map with its inverse.

The values are Nova's strings (and power_state integers) because clients see them as
``OS-EXT-STS:vm_state``, ``OS-EXT-STS:task_state`` and ``OS-EXT-STS:power_state``.
"""

from __future__ import annotations

from collections.abc import Iterable

# --- vm_state: the stable state a user expects ----------------------------------------------
ACTIVE = "active"
BUILDING = "building"
PAUSED = "paused"
SUSPENDED = "suspended"
STOPPED = "stopped"
RESCUED = "rescued"
RESIZED = "resized"
SOFT_DELETED = "soft-delete"
DELETED = "deleted"
ERROR = "error"
SHELVED = "shelved"
SHELVED_OFFLOADED = "shelved_offloaded"

VM_STATES = (ACTIVE, BUILDING, PAUSED, SUSPENDED, STOPPED, RESCUED, RESIZED, SOFT_DELETED, DELETED,
             ERROR, SHELVED, SHELVED_OFFLOADED)


class task_states:  # a namespace, read as task_states.POWERING_OFF
    """task_state: what is happening to the server right now (None when nothing is)."""

    SCHEDULING = "scheduling"
    BLOCK_DEVICE_MAPPING = "block_device_mapping"
    NETWORKING = "networking"
    SPAWNING = "spawning"
    IMAGE_SNAPSHOT = "image_snapshot"
    IMAGE_SNAPSHOT_PENDING = "image_snapshot_pending"
    IMAGE_PENDING_UPLOAD = "image_pending_upload"
    IMAGE_UPLOADING = "image_uploading"
    IMAGE_BACKUP = "image_backup"
    UPDATING_PASSWORD = "updating_password"
    RESIZE_PREP = "resize_prep"
    RESIZE_MIGRATING = "resize_migrating"
    RESIZE_MIGRATED = "resize_migrated"
    RESIZE_FINISH = "resize_finish"
    RESIZE_REVERTING = "resize_reverting"
    RESIZE_CONFIRMING = "resize_confirming"
    REBOOTING = "rebooting"
    REBOOT_PENDING = "reboot_pending"
    REBOOT_STARTED = "reboot_started"
    REBOOTING_HARD = "rebooting_hard"
    REBOOT_PENDING_HARD = "reboot_pending_hard"
    REBOOT_STARTED_HARD = "reboot_started_hard"
    PAUSING = "pausing"
    UNPAUSING = "unpausing"
    SUSPENDING = "suspending"
    RESUMING = "resuming"
    POWERING_OFF = "powering-off"
    POWERING_ON = "powering-on"
    RESCUING = "rescuing"
    UNRESCUING = "unrescuing"
    REBUILDING = "rebuilding"
    REBUILD_BLOCK_DEVICE_MAPPING = "rebuild_block_device_mapping"
    REBUILD_SPAWNING = "rebuild_spawning"
    MIGRATING = "migrating"
    DELETING = "deleting"
    SOFT_DELETING = "soft-deleting"
    RESTORING = "restoring"
    SHELVING = "shelving"
    SHELVING_IMAGE_PENDING_UPLOAD = "shelving_image_pending_upload"
    SHELVING_IMAGE_UPLOADING = "shelving_image_uploading"
    SHELVING_OFFLOADING = "shelving_offloading"
    UNSHELVING = "unshelving"


TASK_STATES = tuple(v for k, v in vars(task_states).items() if k.isupper())

# Task states from which a hard reboot may start (a hard reboot may interrupt a soft one).
ALLOW_REBOOT = (None, task_states.REBOOTING, task_states.REBOOT_PENDING, task_states.REBOOT_STARTED,
                task_states.RESUMING, task_states.REBOOTING_HARD, task_states.UNPAUSING,
                task_states.PAUSING, task_states.SUSPENDING)


class power_state:  # a namespace, read as power_state.RUNNING
    """power_state: what the hypervisor last reported, as Nova's integers."""

    NOSTATE = 0
    RUNNING = 1
    PAUSED = 3
    SHUTDOWN = 4
    CRASHED = 6
    SUSPENDED = 7


POWER_STATE_NAMES = {0: "pending", 1: "running", 3: "paused", 4: "shutdown", 6: "crashed", 7: "suspended"}

# --- status: what GET /servers shows, from vm_state and task_state ----------------------------
_REBOOT: dict[str | None, str] = {task_states.REBOOTING: "REBOOT", task_states.REBOOT_PENDING: "REBOOT",
           task_states.REBOOT_STARTED: "REBOOT", task_states.REBOOTING_HARD: "HARD_REBOOT",
           task_states.REBOOT_PENDING_HARD: "HARD_REBOOT", task_states.REBOOT_STARTED_HARD: "HARD_REBOOT"}
_REBUILD: dict[str | None, str] = {task_states.REBUILDING: "REBUILD", task_states.REBUILD_BLOCK_DEVICE_MAPPING: "REBUILD",
            task_states.REBUILD_SPAWNING: "REBUILD"}
_RESIZE: dict[str | None, str] = {task_states.RESIZE_PREP: "RESIZE", task_states.RESIZE_MIGRATING: "RESIZE",
           task_states.RESIZE_MIGRATED: "RESIZE", task_states.RESIZE_FINISH: "RESIZE"}

# vm_state → {task_state or "default": status}, Nova's table. Insertion order matters: the
# inverse below walks it in this order.
STATUS_MAP: dict[str, dict[str | None, str]] = {
    ACTIVE: {"default": "ACTIVE", **_REBOOT, task_states.UPDATING_PASSWORD: "PASSWORD", **_REBUILD,
             task_states.MIGRATING: "MIGRATING", **_RESIZE},
    BUILDING: {"default": "BUILD"},
    STOPPED: {"default": "SHUTOFF", **_RESIZE, **_REBUILD},
    RESIZED: {"default": "VERIFY_RESIZE", task_states.RESIZE_REVERTING: "REVERT_RESIZE"},
    PAUSED: {"default": "PAUSED", task_states.MIGRATING: "MIGRATING"},
    SUSPENDED: {"default": "SUSPENDED"},
    RESCUED: {"default": "RESCUE"},
    ERROR: {"default": "ERROR", **_REBUILD},
    DELETED: {"default": "DELETED"},
    SOFT_DELETED: {"default": "SOFT_DELETED"},
    SHELVED: {"default": "SHELVED"},
    SHELVED_OFFLOADED: {"default": "SHELVED_OFFLOADED"},
}

STATUSES = tuple(sorted({s for m in STATUS_MAP.values() for s in m.values()}))

# Statuses whose server body carries the latest fault, and those that carry ``progress``.
FAULT_STATUSES = ("ERROR", "DELETED")
PROGRESS_STATUSES = ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING")


def status_from_state(vm_state: str | None, task_state: str | None = None, *, deleted: bool = False) -> str:
    """The API's ``status``: DELETED for a deleted row whatever its states, else Nova's table;
    UNKNOWN for a vm_state outside the table."""
    if deleted:
        return "DELETED"
    by_task = STATUS_MAP.get(vm_state) if vm_state is not None else None
    if by_task is None:
        return "UNKNOWN"
    return by_task.get(task_state, by_task["default"])


class StatusFilter:
    """What a ``status`` list filter selects: vm_states, and task_states unless any is allowed.

    ``task_states`` is None when one of the statuses is a vm_state's default status: then
    Nova filters on the vm_state alone (so ``status=ACTIVE`` also lists servers that are
    rebooting). An empty ``vm_states`` means no status matched: 400 "Invalid status value" from
    2.38, an empty list before.
    """

    __slots__ = ("task_states", "vm_states")

    def __init__(self, vm_states: list[str], task_states: list[str] | None) -> None:
        self.vm_states = vm_states
        self.task_states = task_states

    @property
    def matches_nothing(self) -> bool:
        return not self.vm_states

    def __repr__(self) -> str:
        return f"StatusFilter(vm_states={self.vm_states!r}, task_states={self.task_states!r})"


def status_filter(statuses: Iterable[str]) -> StatusFilter:
    """The inverse of the status map for the list filter; statuses compare case-insensitively."""
    wanted = {s.lower() for s in statuses}
    vm: set[str] = set()
    tasks: set[str] = set()
    for vm_state, by_task in STATUS_MAP.items():
        for task_state, status in by_task.items():
            if status.lower() in wanted and task_state is not None:  # the keys are task states or "default"
                vm.add(vm_state)
                tasks.add(task_state)
    if "default" in tasks:
        return StatusFilter(sorted(vm), None)
    return StatusFilter(sorted(vm), sorted(tasks))
