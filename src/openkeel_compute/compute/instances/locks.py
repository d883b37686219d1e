"""Lock and unlock a server, as Nova does (owner or admin).

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.engine import Connection

from openkeel_compute.compute.instances.base import Actor, I
from openkeel_compute.compute.instances.instance_actions import finish_event, start_action, start_event
from openkeel_compute.compute.instances.store import get
from openkeel_compute.db.models import INSTANCES, utcnow
from openkeel_compute.notifications import server_events


def lock(conn: Connection, instance_uuid: str, actor: Actor, reason: str | None = None,
         host: str | None = None) -> bool:
    """Lock as Nova does: the owner re-locking a locked server changes nothing (and records
    nothing); anyone else locks it as "admin". Returns whether the server changed. The event is the
    API's, on ``host`` (``[DEFAULT] host``, as Nova's API records its own events)."""
    row = get(conn, instance_uuid)
    is_owner = row["project_id"] == actor.project_id
    if row["locked"] and is_owner:
        return False
    action_id = start_action(conn, instance_uuid, "lock", actor)
    event = start_event(conn, action_id, "api_lock", host=host)
    changes = {"locked": True, "locked_by": "owner" if is_owner else "admin", "updated_at": utcnow()}
    if reason:
        changes["locked_reason"] = reason
    conn.execute(update(INSTANCES).where(I.uuid == instance_uuid, I.deleted == 0).values(changes))
    server_events.state_saved(conn, instance_uuid, server_events.state_before_of(row), actor)
    finish_event(conn, event, "Success")
    return True


def is_expected_locked_by(row: dict, actor: Actor) -> bool:
    """False when the lock was taken by the other party (owner vs admin): unlocking it then needs
    the ``unlock_override`` policy."""
    expected = "owner" if row["project_id"] == actor.project_id else "admin"
    return not row["locked_by"] or row["locked_by"] == expected


def unlock(conn: Connection, instance_uuid: str, actor: Actor, host: str | None = None) -> None:
    row = get(conn, instance_uuid)
    server_events.state_saved(conn, instance_uuid, server_events.state_before_of(row), actor)
    action_id = start_action(conn, instance_uuid, "unlock", actor)
    event = start_event(conn, action_id, "api_unlock", host=host)
    conn.execute(update(INSTANCES).where(I.uuid == instance_uuid, I.deleted == 0)
                 .values(locked=False, locked_by=None, locked_reason=None, updated_at=utcnow()))
    finish_event(conn, event, "Success")
