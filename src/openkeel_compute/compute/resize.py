"""A server's resize, confirm and revert as Nova keeps them in the database (no HTTP, no Kubernetes).

Nova's cold resize is two-phase: the API records the request (task ``resize_prep``, a ``migrations`` row
in status ``pre-migrating``, the instance action ``resize``); the compute service moves the server
through ``resize_migrating`` → ``resize_migrated`` → ``resize_finish`` and ends in vm_state ``resized``
(VERIFY_RESIZE) with the migration ``finished``; then the user confirms (migration ``confirming`` →
``confirmed``, the server ``active`` or ``stopped`` by its power state) or reverts (task
``resize_reverting``, migration ``reverting`` → ``reverted``, the old flavor back, the server
``active`` or ``stopped`` by the vm_state it had before the resize).

The flavors live in the instance's flavor copy (``cur``/``old``/``new``, compute/flavor_copy.py): the API
writes ``old`` = the current flavor and ``new`` = the requested one; the end of the resize makes ``new``
current (and the instance's memory_mb, vcpus, root_gb... columns with it); confirm drops ``old`` and
``new``; revert makes ``old`` current again. Here are the API's steps (``start``, ``confirm``,
``revert``) and the ones the controller takes (``advance``, ``finish``, ``confirmed``, ``reverted``).
"""

from __future__ import annotations

import json
import uuid as uuidlib

from sqlalchemy import and_, insert, select, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors, flavor_copy, preconditions
from openkeel_compute.compute.instances import cas, instance_actions, instance_sysmeta, store, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db.models import MIGRATIONS, utcnow
from openkeel_compute.model import operations, states
from openkeel_compute.model.states import task_states
from openkeel_compute.model.sysmeta import OLD_VM_STATE

M = MIGRATIONS.c
SYSMETA_OLD_VM_STATE = OLD_VM_STATE


class NotResized(errors.Invalid):
    """No finished resize to confirm or revert: Nova's MigrationNotFoundByStatus as its API words it."""

    def __init__(self) -> None:
        super().__init__("Instance has not been resized.")


def _flavor_json(row: dict) -> dict:
    return json.loads(row["flavor"])


def _dump(copy: dict) -> str:
    return json.dumps(copy, sort_keys=True, separators=(",", ":"))


def _sizes(entry: dict) -> dict:
    data = entry["nova_object.data"]
    return {"memory_mb": data["memory_mb"], "vcpus": data["vcpus"], "root_gb": data["root_gb"],
            "ephemeral_gb": data["ephemeral_gb"], "instance_type_id": data["id"]}


sysmeta = instance_sysmeta.system_metadata_item
set_sysmeta = instance_sysmeta.set_system_metadata_item


# --- the migrations table -----------------------------------------------------------------------------

def migration_of(conn: Connection, instance_uuid: str, status: str | tuple[str, ...]) -> dict | None:
    """The newest live resize migration of the server in ``status`` (one status or several)."""
    wanted = (status,) if isinstance(status, str) else status
    row = conn.execute(select(MIGRATIONS).where(M.instance_uuid == instance_uuid, M.deleted == 0,
                                                M.status.in_(wanted)).order_by(M.id.desc()).limit(1)).first()
    return dict(row._mapping) if row is not None else None


def move_migration(conn: Connection, migration_uuid: str, status: str, *, expected: str | tuple[str, ...] | None = None,
                   **values) -> bool:
    """Set the migration's status (compare-and-swap on ``expected`` when given). Returns whether it moved."""
    where = [M.uuid == migration_uuid, M.deleted == 0]
    if expected is not None:
        where.append(M.status.in_((expected,) if isinstance(expected, str) else expected))
    return conn.execute(update(MIGRATIONS).where(and_(*where)).values(
        status=status, updated_at=utcnow(), **values)).rowcount == 1


# --- the API's steps ----------------------------------------------------------------------------------

def start(conn: Connection, row: dict, new_flavor: dict, new_specs: dict[str, str], actor: Actor, *,
          auto_disk_config: bool) -> str:
    """Record an accepted resize of ``row`` to ``new_flavor`` (a catalogue row; its extra specs apart):
    the compare-and-swap into ``resize_prep`` (409 when another action won), the instance action
    ``resize``, the migration ``pre-migrating``, the flavor copy's old/new, the old vm_state, and the
    outbox row for the controller. Returns the migration's uuid."""
    pre = preconditions.precondition("resize")
    checked = cas.begin_action(conn, row, pre, actor, values={"progress": 0, "auto_disk_config": auto_disk_config})
    copy = _flavor_json(checked)
    return _record(conn, checked, copy["cur"], flavor_copy.primitive(new_flavor, new_specs), new_flavor["id"], actor)


def start_migration(conn: Connection, row: dict, actor: Actor, *, host: str | None) -> str:
    """Record an accepted cold migration of ``row`` (Nova's resize to the same flavor: instance action
    ``migrate``, migration type ``migration``, destination unknown until the controller chose it) to
    another node, ``host`` when given. The controller's resize step carries it out (payload ``cold``);
    confirm and revert end it as they end a resize. Returns the migration's uuid."""
    pre = preconditions.precondition("migrate")
    checked = cas.begin_action(conn, row, pre, actor, values={"progress": 0, "auto_disk_config": False})
    current = _flavor_json(checked)["cur"]
    return _record(conn, checked, current, current, store.flavors_of(checked).cur["id"], actor,
                   migration_type="migration", cold=True, host=host)


def _record(conn: Connection, checked: dict, old: dict, new: dict, new_flavor_id: int, actor: Actor, *,
            migration_type: str = "resize", **payload) -> str:
    """The flavor copy's old/new, the old vm_state, the migration ``pre-migrating`` and the outbox row."""
    uuid = checked["uuid"]
    copy = _flavor_json(checked)
    copy["old"], copy["new"] = old, new
    cas.save_state(conn, uuid, flavor=_dump(copy))
    set_sysmeta(conn, uuid, SYSMETA_OLD_VM_STATE, checked["vm_state"])
    migration = _insert_migration(conn, checked, new_flavor_id, actor, "pre-migrating", migration_type=migration_type)
    updates.outbox(conn, uuid, operations.RESIZE, actor, migration=migration, old_vm_state=checked["vm_state"],
                   **payload)
    return migration


def confirm(conn: Connection, row: dict, actor: Actor) -> str:
    """Record a confirmResize: the finished migration becomes ``confirming`` (of concurrent confirms
    exactly one moves it; the others find no finished resize, as in Nova), the action, the outbox row."""
    preconditions.check("confirmResize", row, is_admin=actor.is_admin)
    migration = migration_of(conn, row["uuid"], "finished")
    if migration is None or not move_migration(conn, migration["uuid"], "confirming", expected="finished"):
        raise NotResized()
    instance_actions.start_action(conn, row["uuid"], "confirmResize", actor)
    updates.outbox(conn, row["uuid"], operations.CONFIRM_RESIZE, actor, migration=migration["uuid"])
    return migration["uuid"]


def revert(conn: Connection, row: dict, actor: Actor) -> str:
    """Record a revertResize: task ``resize_reverting`` (compare-and-swap), migration ``reverting``."""
    pre = preconditions.precondition("revertResize")
    pre.check(row, is_admin=actor.is_admin)
    migration = migration_of(conn, row["uuid"], "finished")
    if migration is None:
        raise NotResized()
    cas.begin_action(conn, row, pre, actor)
    if not move_migration(conn, migration["uuid"], "reverting", expected="finished"):
        raise NotResized()
    updates.outbox(conn, row["uuid"], operations.REVERT_RESIZE, actor, migration=migration["uuid"])
    return migration["uuid"]


# --- the controller's steps ---------------------------------------------------------------------------

def finishing(conn: Connection, uuid: str) -> bool:
    """A resize's finish begins (``resize_migrated`` → ``resize_finish``): the new flavor becomes the
    server's current one (the old kept for a revert), as Nova's finish_resize sets it before it saves
    resize_finish. False when another task took over."""
    row = store.get(conn, uuid)
    copy = _flavor_json(row)
    changes: dict = {}
    if copy.get("new"):
        copy["cur"] = copy["new"]
        changes = {"flavor": _dump(copy), **_sizes(copy["new"])}
    return cas.save_state(conn, uuid, expected_task_state=task_states.RESIZE_MIGRATED,
                          task_state=task_states.RESIZE_FINISH, **changes)


def finish(conn: Connection, uuid: str, migration: str, *, power_state: int, host: str | None) -> bool:
    """The end of a resize: the new flavor current (old kept for a revert), vm_state resized, no task,
    migration finished on ``host``."""
    row = store.get(conn, uuid)
    copy = _flavor_json(row)
    if not copy.get("new"):
        return False
    copy["cur"] = copy["new"]
    where = {"host": host, "node": host} if host else {}  # the node it now runs on, in the same save
    if not cas.save_state(conn, uuid, expected_task_state=task_states.RESIZE_FINISH, vm_state=states.RESIZED,
                          task_state=None, power_state=power_state,
                          flavor=_dump(copy), **_sizes(copy["new"]), **where):
        return False
    extra = {"dest_compute": host, "dest_node": host} if host else {}
    move_migration(conn, migration, "finished", **extra)
    return True


def confirmed(conn: Connection, uuid: str, migration: str, *, power_state: int) -> bool:
    """The end of a confirm: old and new flavors dropped, vm_state by the power state, migration confirmed."""
    row = store.get(conn, uuid)
    if row["vm_state"] != states.RESIZED:
        return False
    copy = _flavor_json(row)
    copy["old"] = copy["new"] = None
    vm_state = states.STOPPED if power_state == states.power_state.SHUTDOWN else states.ACTIVE
    if not cas.save_state(conn, uuid, expected_task_state=None, vm_state=vm_state, power_state=power_state,
                          flavor=_dump(copy)):
        return False
    set_sysmeta(conn, uuid, SYSMETA_OLD_VM_STATE, None)
    move_migration(conn, migration, "confirmed", expected="confirming")
    return True


def reverted(conn: Connection, uuid: str, migration: str, *, power_state: int) -> bool:
    """The end of a revert: the old flavor current again, vm_state the one before the resize."""
    row = store.get(conn, uuid)
    copy = _flavor_json(row)
    if not copy.get("old"):
        return False
    copy["cur"] = copy["old"]
    copy["old"] = copy["new"] = None
    old_vm_state = sysmeta(conn, uuid, SYSMETA_OLD_VM_STATE)
    vm_state = states.STOPPED if old_vm_state == states.STOPPED else states.ACTIVE
    if not cas.save_state(conn, uuid, expected_task_state=task_states.RESIZE_REVERTING, vm_state=vm_state,
                          task_state=None, power_state=power_state,
                          flavor=_dump(copy), **_sizes(copy["cur"])):
        return False
    set_sysmeta(conn, uuid, SYSMETA_OLD_VM_STATE, None)
    move_migration(conn, migration, "reverted", expected="reverting")
    return True


def failed(conn: Connection, uuid: str, migration: str, *, expected_task_state: str) -> bool:
    """A resize no node could take (no valid host): the server back in the state it had, with its flavor,
    no task; the migration in error. Returns whether the server was still in ``expected_task_state``."""
    row = store.get(conn, uuid)
    copy = _flavor_json(row)
    copy["old"] = copy["new"] = None
    old_vm_state = sysmeta(conn, uuid, SYSMETA_OLD_VM_STATE) or states.ACTIVE
    if not cas.save_state(conn, uuid, expected_task_state=expected_task_state, vm_state=old_vm_state,
                          task_state=None, flavor=_dump(copy)):
        return False
    set_sysmeta(conn, uuid, SYSMETA_OLD_VM_STATE, None)
    move_migration(conn, migration, "error")
    return True


def record_failed(conn: Connection, row: dict, new_flavor: dict, actor: Actor) -> str:
    """The migration of a resize the compute side refused at once (a smaller root disk): status error."""
    return _insert_migration(conn, row, new_flavor["id"], actor, "error")


def _insert_migration(conn: Connection, row: dict, new_flavor_id: int, actor: Actor, status: str, *,
                      migration_type: str = "resize") -> str:
    """A resize's ``migrations`` row, from and to the server's host (the node is known once it runs); a
    cold migration's destination is empty until the controller chose it, as Nova's."""
    migration = str(uuidlib.uuid4())
    dest = row["host"] if migration_type == "resize" else None
    dest_node = row["node"] if migration_type == "resize" else None
    conn.execute(insert(MIGRATIONS).values(
        uuid=migration, source_compute=row["host"], dest_compute=dest, source_node=row["node"],
        dest_node=dest_node, dest_host=None, old_instance_type_id=store.flavors_of(row).cur["id"],
        new_instance_type_id=new_flavor_id, instance_uuid=row["uuid"], migration_type=migration_type, hidden=False,
        status=status, cross_cell_move=False, user_id=actor.user_id, project_id=actor.project_id,
        created_at=utcnow(), deleted=0))
    return migration
