"""Starting an action: the compare-and-swap on task_state (the API's side and the controller's).

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import Update, and_, bindparam, or_, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors
from openkeel_compute.compute.instances import deletion
from openkeel_compute.compute.instances.base import Actor, I
from openkeel_compute.compute.instances.instance_actions import start_action
from openkeel_compute.compute.instances.store import get
from openkeel_compute.compute.preconditions import PRECONDITIONS, Precondition
from openkeel_compute.db.models import INSTANCES, utcnow
from openkeel_compute.model import states
from openkeel_compute.notifications import server_events


def _cas(pre: Precondition, row: dict, is_admin: bool):
    """The UPDATE's guard: the whole precondition, evaluated by the database on the current row."""
    guard = [I.uuid == row["uuid"], I.deleted == 0]
    if pre.vm_states is not None:
        guard.append(I.vm_state.in_(sorted(pre.vm_states)))
    if pre.task_states is None:
        # Any task_state may be replaced, but only the one just checked (not a newer one).
        guard.append(I.task_state.is_(None) if row["task_state"] is None else I.task_state == row["task_state"])
    else:
        named = sorted(s for s in pre.task_states if s is not None)
        either = [I.task_state.in_(named)] if named else []
        if None in pre.task_states:
            either.append(I.task_state.is_(None))
        guard.append(or_(*either))
    if pre.must_have_launched:
        guard.append(I.launched_at.is_not(None))
    if pre.lock and not is_admin:
        guard.append(I.locked.is_(False))
    if pre.host is not None:
        guard.append(I.host.is_not(None))
        guard.append(I.host != "")
    return and_(*guard)


_ATTEMPTS = 3


def begin_action(conn: Connection, instance: str | dict, pre: Precondition, actor: Actor, *,
                 instance_action: str | None = None, values: dict | None = None) -> dict:
    """Check ``pre`` and move task_state to ``pre.next_task_state`` in one guarded UPDATE.

    ``instance`` is a uuid, or the row the caller already read (the API reads it for the policy
    target first, as Nova does; it may be stale by now). The UPDATE's WHERE repeats the whole
    precondition, so of concurrent callers on one server exactly one matches; the others read
    the row again and get the 409 that the winner's state gives (as if they had come after it).
    ``values`` are further columns set with the task_state. Records the instance action
    (``instance_action``, default the precondition's name). Returns the row the check passed on.
    """
    if isinstance(instance, str):
        row = get(conn, instance)
    else:
        row = instance
    instance_uuid = row["uuid"]
    for _ in range(_ATTEMPTS):
        pre.check(row, is_admin=actor.is_admin)
        changes = dict(values or {})
        if pre.next_task_state is not None:
            changes["task_state"] = pre.next_task_state
        if changes:
            changes["updated_at"] = utcnow()
            result = conn.execute(update(INSTANCES).where(_cas(pre, row, actor.is_admin)).values(changes))
            if result.rowcount != 1:
                # Lost the race: a locking read sees the winner's committed row even under
                # MariaDB's repeatable read.
                row = get(conn, instance_uuid, for_update=True)
                continue
            server_events.state_saved(conn, instance_uuid, server_events.state_before_of(row), actor)
        start_action(conn, instance_uuid, instance_action or pre.name, actor)
        return row
    raise errors.InstanceInvalidState(pre.name, instance_uuid, "task_state", row["task_state"])


def begin_delete(conn: Connection, instance: str | dict, actor: Actor) -> bool:
    """Start a delete as Nova does: refused only by the lock; any vm_state and task_state, no
    compare-and-swap (a delete overrides whatever task runs). task_state becomes deleting and
    progress 0. Returns False when there is nothing more to do: termination is disabled, or a
    delete is already under way (a repeated DELETE records no second action)."""
    row = get(conn, instance) if isinstance(instance, str) else instance
    PRECONDITIONS["delete"].check(row, is_admin=actor.is_admin)
    if row["disable_terminate"]:
        return False
    under_way = (states.task_states.DELETING, states.task_states.SOFT_DELETING)
    # Only the delete that moves the server into "deleting" records the action: of parallel
    # DELETEs exactly one matches this row; the others find a delete under way.
    guard = [I.uuid == row["uuid"], I.deleted == 0, or_(I.task_state.is_(None), I.task_state.not_in(under_way))]
    if not actor.is_admin:
        guard.append(I.locked.is_(False))
    result = conn.execute(update(INSTANCES).where(*guard).values(
        task_state=states.task_states.DELETING, progress=0, updated_at=utcnow()))
    if result.rowcount != 1:
        # locked or deleted meanwhile (the current row says which), or a delete under way
        PRECONDITIONS["delete"].check(get(conn, row["uuid"], for_update=True), is_admin=actor.is_admin)
        return False
    server_events.state_saved(conn, row["uuid"], server_events.state_before_of(row), actor)
    start_action(conn, row["uuid"], "delete", actor)
    return True


def delete_locally(conn: Connection, row: dict, actor: Actor, *, soft: bool = False, kind: str = "delete") -> bool:
    """Nova's ``_local_delete``, for a server whose compute service is down: refused only by the lock,
    nothing when termination is disabled; else ``delete.start``, the row deleted at once (vm_state deleted,
    ``terminated_at``), ``delete.end``, then the ``delete`` action (no events: no compute ran it). Returns
    whether it was deleted (the caller asks the controller to clean what the server had elsewhere).
    ``soft``: a soft delete (``reclaim_instance_interval``), which Nova's local delete destroys all the
    same, its row keeping vm_state ``soft-delete`` when a soft delete was allowed (launched, no task).
    ``kind``: ``force_delete`` for forceDelete (its notifications are ``force_delete.*``)."""
    PRECONDITIONS["delete"].check(row, is_admin=actor.is_admin)
    vm_state = states.DELETED
    if soft:
        try:
            PRECONDITIONS["soft_delete"].check(row, is_admin=actor.is_admin)
            vm_state = states.SOFT_DELETED
        except errors.InstanceInvalidState:
            pass  # Nova's API falls back to its plain delete
    if row["disable_terminate"]:
        return False
    server_events.local_delete(conn, row["uuid"], actor, kind)
    if not deletion.soft_delete(conn, row["uuid"], local=True, vm_state=vm_state):
        return False  # deleted meanwhile
    start_action(conn, row["uuid"], "delete", actor)
    return True


_SAVE_STATEMENTS: dict[tuple, Update] = {}  # (columns set, task states expected) -> UPDATE with bound values


def save_state(conn: Connection, instance_uuid: str, *, expected_task_state=(), **changes) -> bool:
    """Set state columns (vm_state, task_state, power_state, launched_at, host, node, progress...),
    optionally only if task_state is still one of ``expected_task_state`` (the controller's side
    of the compare-and-swap). Returns whether the row was changed.

    The controller writes hundreds of these per pass, always with the same few shapes: each shape's
    UPDATE is built once and run with its values bound, not built and compiled again per server."""
    guard = None
    if expected_task_state != ():
        expected = list(expected_task_state) if isinstance(expected_task_state, (list, tuple, set)) \
            else [expected_task_state]
        guard = (tuple(sorted(s for s in expected if s is not None)), None in expected)
    changes["updated_at"] = utcnow()
    key = (tuple(changes), guard)
    statement = _SAVE_STATEMENTS.get(key)
    if statement is None:
        where = [I.uuid == bindparam("w_uuid", type_=I.uuid.type), I.deleted == 0]
        if guard is not None:
            named, none = guard
            either = [I.task_state.in_(named)] if named else []
            if none:
                either.append(I.task_state.is_(None))
            where.append(or_(*either))
        statement = update(INSTANCES).where(and_(*where)).values(
            {column: bindparam(f"v_{column}", type_=INSTANCES.c[column].type) for column in changes})
        if len(_SAVE_STATEMENTS) < 256:
            _SAVE_STATEMENTS[key] = statement
    values = {f"v_{column}": value for column, value in changes.items()}
    before = server_events.state_before(conn, instance_uuid)
    saved = conn.execute(statement, {"w_uuid": instance_uuid, **values}).rowcount == 1
    if saved:
        server_events.state_saved(conn, instance_uuid, before)  # instance.update, after commit
    return saved
