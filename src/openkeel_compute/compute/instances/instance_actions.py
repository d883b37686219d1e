"""Instance actions and their events (os-instance-actions): one action per request, found by its
request id; events started and finished by the API and the controller.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors
from openkeel_compute.compute.instances.base import Actor, first_row, new_request_id
from openkeel_compute.db.models import INSTANCE_ACTIONS, INSTANCE_ACTIONS_EVENTS, utcnow
from openkeel_compute.notifications import server_events


def start_action(conn: Connection, instance_uuid: str, action: str, actor: Actor) -> int:
    """Record an instance action (one per request, found by its request id); returns its id."""
    now = utcnow()
    result = conn.execute(insert(INSTANCE_ACTIONS), {
        "action": action, "instance_uuid": instance_uuid, "request_id": actor.request_id or new_request_id(),
        "user_id": actor.user_id, "project_id": actor.project_id, "start_time": now, "finish_time": None,
        "message": None, "created_at": now, "updated_at": None, "deleted": 0})
    return int(result.inserted_primary_key[0])  # type: ignore[index]  # one row inserted: its key


def start_event(conn: Connection, action_id: int, event: str, host: str | None = None) -> int:
    """An event of an action ("api_lock", "compute_stop_instance", ...), started now."""
    now = utcnow()
    result = conn.execute(insert(INSTANCE_ACTIONS_EVENTS), {
        "event": event, "action_id": action_id, "start_time": now, "host": host, "created_at": now,
        "deleted": 0})
    # Nova moves the action's updated_at with each event (2.58 lists and filters on it).
    conn.execute(update(INSTANCE_ACTIONS).where(INSTANCE_ACTIONS.c.id == action_id).values(updated_at=now))
    server_events.event_started(conn, action_id, event, host)  # instance.<action>.start, after commit
    return int(result.inserted_primary_key[0])  # type: ignore[index]  # one row inserted: its key


def finish_event(conn: Connection, event_id: int, result: str, *, traceback: str | None = None,
                 details: str | None = None, host: str | None = None) -> None:
    """Finish an event with "Success" or "Error" (then ``traceback``, and ``details`` for 2.84), on
    ``host`` when it had none (a build's host is known only once it runs)."""
    now = utcnow()
    values = {"finish_time": now, "result": result, "traceback": traceback, "details": details, "updated_at": now}
    if host is not None:
        values["host"] = func.coalesce(INSTANCE_ACTIONS_EVENTS.c.host, host)
    conn.execute(update(INSTANCE_ACTIONS_EVENTS).where(INSTANCE_ACTIONS_EVENTS.c.id == event_id).values(**values))
    action_id = select(INSTANCE_ACTIONS_EVENTS.c.action_id).where(
        INSTANCE_ACTIONS_EVENTS.c.id == event_id).scalar_subquery()
    conn.execute(update(INSTANCE_ACTIONS).where(INSTANCE_ACTIONS.c.id == action_id).values(updated_at=now))
    server_events.event_finished(conn, event_id, result, host, details, traceback)  # .end / .error


def action_for_request(conn: Connection, instance_uuid: str, request_id: str) -> int | None:
    query = (select(INSTANCE_ACTIONS.c.id)
             .where(INSTANCE_ACTIONS.c.instance_uuid == instance_uuid, INSTANCE_ACTIONS.c.request_id == request_id)
             .order_by(INSTANCE_ACTIONS.c.id.desc()).limit(1))
    return conn.execute(query).scalar()


def actions_of(conn: Connection, instance_uuid: str, *, limit: int | None = None, marker: str | None = None,
               changes_since=None, changes_before=None) -> list[dict]:
    """A server's actions, newest first (deleted servers keep theirs: 2.21 lists them).

    From 2.58 a page: ``limit`` (0 gives nothing), ``marker`` (a request id: the actions after
    it) and ``changes_since`` / ``changes_before`` on ``updated_at``. An unknown marker is
    Nova's 400, which names the marker "None" (Nova loses the value before it words the error).
    """
    if limit == 0:
        return []
    A = INSTANCE_ACTIONS.c  # the column namespace
    query = select(INSTANCE_ACTIONS).where(A.instance_uuid == instance_uuid)
    if changes_since is not None:
        query = query.where(A.updated_at >= changes_since)
    if changes_before is not None:
        query = query.where(A.updated_at <= changes_before)
    if marker is not None:
        found = (select(A.created_at, A.id).where(A.instance_uuid == instance_uuid, A.request_id == marker)
                 .order_by(A.created_at.desc(), A.id.desc()).limit(1))
        row = conn.execute(found).first()
        if row is None:
            raise errors.MarkerNotFound(None)
        query = query.where(or_(A.created_at < row.created_at, and_(A.created_at == row.created_at, A.id < row.id)))
    query = query.order_by(A.created_at.desc(), A.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [dict(r) for r in conn.execute(query).mappings()]


def get_action(conn: Connection, instance_uuid: str, request_id: str) -> dict:
    """One action by request id with its events (oldest first); 404 "Action … not found"."""
    query = (select(INSTANCE_ACTIONS)
             .where(INSTANCE_ACTIONS.c.instance_uuid == instance_uuid, INSTANCE_ACTIONS.c.request_id == request_id)
             .order_by(INSTANCE_ACTIONS.c.id.desc()).limit(1))
    action = first_row(conn.execute(query))
    if action is None:
        raise errors.InstanceActionNotFound(request_id)
    events = (select(INSTANCE_ACTIONS_EVENTS).where(INSTANCE_ACTIONS_EVENTS.c.action_id == action["id"])
              .order_by(INSTANCE_ACTIONS_EVENTS.c.start_time.desc(), INSTANCE_ACTIONS_EVENTS.c.id.desc()))
    action["events"] = [dict(r) for r in conn.execute(events).mappings()]
    return action
