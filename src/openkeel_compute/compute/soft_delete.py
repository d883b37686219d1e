"""Deleted servers kept for a while (Nova's ``reclaim_instance_interval``): soft delete, restore,
and which servers are due to be reclaimed.

With an interval above 0, DELETE keeps a server that has run and has no task running: its task
becomes ``soft-deleting`` and ``deleted_at`` is set, the action is "delete", and the controller
stops its VM and leaves it in vm_state ``soft-delete`` (status SOFT_DELETED). ``restore`` starts
it again; ``forceDelete`` deletes it now; after the interval the controller deletes it for good.
Anything else (a task running, never launched, locked) is deleted at once, as Nova falls back
to its plain delete.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.engine import Connection

from openkeel_compute.compute.instances import cas, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.compute.preconditions import PRECONDITIONS
from openkeel_compute.db.models import INSTANCES, utcnow
from openkeel_compute.model import operations, states

I = INSTANCES.c


def begin_soft_delete(conn: Connection, row: dict, actor: Actor) -> dict:
    """Start a soft delete of ``row`` (errors.InstanceInvalidState, or InstanceIsLocked, when it
    may not be soft-deleted: the caller then deletes it at once) and ask the controller to stop it."""
    pre = PRECONDITIONS["soft_delete"]
    checked = cas.begin_action(conn, row, pre, actor, instance_action="delete",
                               values={"deleted_at": utcnow()})
    updates.outbox(conn, row["uuid"], operations.SOFT_DELETE, actor, task_state=pre.next_task_state)
    return checked


def due_for_reclaim(conn: Connection, interval: float, now: dt.datetime | None = None) -> list[str]:
    """Servers soft-deleted, with no task, for longer than ``interval`` seconds."""
    cutoff = (now or utcnow()) - dt.timedelta(seconds=interval)
    query = (select(I.uuid).where(I.deleted == 0, I.vm_state == states.SOFT_DELETED, I.task_state.is_(None),
                                  I.deleted_at <= cutoff).order_by(I.deleted_at))
    return [r[0] for r in conn.execute(query)]
