"""A server's live migration as Nova keeps it in the database (no HTTP, no Kubernetes).

The API records the request (task ``migrating``, vm_state unchanged, the instance action
``live-migration``, a ``migrations`` row of type ``live-migration`` in status ``accepted``) and asks the
controller; the controller claims the destination (``queued``), readies it (``preparing``), moves the guest
(``running``, with KubeVirt's memory/disk counters) and ends it: ``completed`` with the server on the new
host, or ``error`` with the server back ACTIVE (or PAUSED) on its source, no task, as Nova's rollback.
"""

from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from openkeel_compute.compute import preconditions
from openkeel_compute.compute.instances import cas, instance_sysmeta, store, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.compute.resize import move_migration
from openkeel_compute.db.models import MIGRATIONS, utcnow
from openkeel_compute.model import operations
from openkeel_compute.model.states import task_states
from openkeel_compute.model.sysmeta import RESIZE_STEP_EVENT

M = MIGRATIONS.c
TYPE = "live-migration"
#: the statuses Nova's server migrations list (an in-progress live migration)
IN_PROGRESS = ("queued", "preparing", "running", "post-migrating")
OPEN = ("accepted", *IN_PROGRESS)

__all__ = ["abort_requested", "by_id", "completed", "failed", "in_progress", "move_migration", "open_migration", "record", "request_abort", "set_step_event",
           "start", "step_event"]


def step_event(conn: Connection, uuid: str) -> int | None:
    """The running step's event (kept where a resize keeps its own: a server has one move at a time)."""
    value = instance_sysmeta.system_metadata_item(conn, uuid, RESIZE_STEP_EVENT)
    return int(value) if value else None


def set_step_event(conn: Connection, uuid: str, event_id: int | None) -> None:
    instance_sysmeta.set_system_metadata_item(conn, uuid, RESIZE_STEP_EVENT, str(event_id) if event_id else None)


def start(conn: Connection, row: dict, actor: Actor, *, host: str | None, block_migration: bool | None,
          conductor_event: str, force: bool = False) -> str:
    """Record an accepted live migration of ``row`` (toward ``host`` when given). Returns the migration's uuid."""
    pre = preconditions.precondition("os-migrateLive")
    checked = cas.begin_action(conn, row, pre, actor, instance_action="live-migration")
    migration = record(conn, checked, actor, "accepted", dest=host if force else None)
    updates.outbox(conn, checked["uuid"], operations.LIVE_MIGRATE, actor, migration=migration, host=host,
                   block_migration=block_migration, conductor_event=conductor_event, old_vm_state=checked["vm_state"])
    return migration


def record(conn: Connection, row: dict, actor: Actor, status: str, *, dest: str | None) -> str:
    """The live migration's row (Nova's conductor names the destination at once only when forced)."""
    migration = str(uuidlib.uuid4())
    flavor_id = store.flavors_of(row).cur["id"]
    conn.execute(insert(MIGRATIONS).values(
        uuid=migration, source_compute=row["host"], dest_compute=dest, source_node=row["node"],
        dest_node=None, dest_host=None, old_instance_type_id=flavor_id, new_instance_type_id=flavor_id,
        instance_uuid=row["uuid"], migration_type=TYPE, hidden=False, status=status, cross_cell_move=False,
        user_id=actor.user_id, project_id=actor.project_id, created_at=utcnow(), deleted=0))
    return migration


def open_migration(conn: Connection, migration: str) -> dict | None:
    row = conn.execute(select(MIGRATIONS).where(M.uuid == migration, M.deleted == 0)).first()
    return dict(row._mapping) if row is not None else None


def in_progress(conn: Connection, instance_uuid: str) -> list[dict]:
    """The server's live migrations Nova's ``/servers/{id}/migrations`` lists (oldest first)."""
    rows = conn.execute(select(MIGRATIONS).where(
        M.instance_uuid == instance_uuid, M.deleted == 0, M.migration_type == TYPE,
        M.status.in_(IN_PROGRESS)).order_by(M.id)).all()
    return [dict(r._mapping) for r in rows]


def by_id(conn: Connection, instance_uuid: str, migration_id: str) -> dict | None:
    """The server's migration of that id (any type, any status; None: none, or an id that is no integer)."""
    if not str(migration_id).isdigit():
        return None
    row = conn.execute(select(MIGRATIONS).where(M.id == int(migration_id), M.instance_uuid == instance_uuid,
                                                M.deleted == 0)).first()
    return dict(row._mapping) if row is not None else None


ABORT_KEY = "live_migration_abort"


def request_abort(conn: Connection, uuid: str, migration: str) -> None:
    """Mark the migration for the controller to cancel (its live_migrate step reads the mark)."""
    instance_sysmeta.set_system_metadata_item(conn, uuid, ABORT_KEY, migration)


def abort_requested(conn: Connection, uuid: str, migration: str) -> bool:
    return instance_sysmeta.system_metadata_item(conn, uuid, ABORT_KEY) == migration


def completed(conn: Connection, uuid: str, migration: str, node: str) -> bool:
    """The guest runs on ``node``: the server's host and node there, no task, the migration completed."""
    if not cas.save_state(conn, uuid, expected_task_state=task_states.MIGRATING, task_state=None, host=node,
                          node=node):
        return False
    move_migration(conn, migration, "completed", expected=OPEN)
    instance_sysmeta.set_system_metadata_item(conn, uuid, ABORT_KEY, None)
    return True


def failed(conn: Connection, uuid: str, migration: str, status: str = "error") -> bool:
    """The migration did not happen: the server where it was, in its vm_state, no task; migration ``status``
    (error; cancelled when aborted)."""
    moved = cas.save_state(conn, uuid, expected_task_state=task_states.MIGRATING, task_state=None)
    move_migration(conn, migration, status, expected=OPEN)
    instance_sysmeta.set_system_metadata_item(conn, uuid, ABORT_KEY, None)
    return moved
