"""Servers' rows on a Connection: create, read, the task_state compare-and-swap, lock, actions
and events, faults, soft delete.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass

from sqlalchemy import Update, and_, bindparam, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute import console, errors, flavor_copy, names
from openkeel_compute.compute.actions import PRECONDITIONS, Precondition
from openkeel_compute.db.models import (
    INSTANCE_ACTIONS,
    INSTANCE_ACTIONS_EVENTS,
    INSTANCE_FAULTS,
    INSTANCE_METADATA,
    INSTANCE_SYSTEM_METADATA,
    INSTANCES,
    OUTBOX,
    TAGS,
    utcnow,
)
from openkeel_compute.model import operations, states
from openkeel_compute.notifications import server_events

I = INSTANCES.c  # the column namespace: I.task_state


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asks: the request's user, project, admin flag and request id (instance actions)."""

    user_id: str
    project_id: str
    is_admin: bool = False
    request_id: str | None = None


def new_request_id() -> str:
    return f"req-{uuidlib.uuid4()}"


# --- create and read -----------------------------------------------------------------------------

def create(conn: Connection, *, actor: Actor, flavor: dict, extra_specs: dict[str, str],
           display_name: str, uuid: str | None = None, metadata: dict[str, str] | None = None,
           system_metadata: dict[str, str] | None = None, tags: list[str] | None = None,
           **columns) -> dict:
    """Insert a server in BUILD (vm_state building, task_state scheduling, power_state
    NOSTATE) with its frozen flavor copy, metadata and tags, and record the "create" action.

    ``columns`` are further instance columns (image_ref, key_name, user_data, ...). Without a
    ``hostname`` the server gets Nova's from its display name, without a ``reservation_id`` a
    new one. Returns the row as read back.
    """
    instance_uuid = uuid or str(uuidlib.uuid4())
    if not columns.get("hostname"):
        columns["hostname"] = names.hostname_for(display_name, instance_uuid)
    if not columns.get("reservation_id"):
        columns["reservation_id"] = names.new_reservation_id()
    copy = flavor_copy.primitive(flavor, extra_specs)
    now = utcnow()
    values = {
        "uuid": instance_uuid,
        "user_id": actor.user_id,
        "project_id": actor.project_id,
        "display_name": display_name,
        "vm_state": states.BUILDING,
        "task_state": states.task_states.SCHEDULING,
        "power_state": states.power_state.NOSTATE,
        "progress": 0,
        "locked": False,
        "launch_index": 0,
        "memory_mb": flavor["memory_mb"],
        "vcpus": flavor["vcpus"],
        "root_gb": flavor["root_gb"],
        "ephemeral_gb": flavor["ephemeral_gb"],
        "instance_type_id": flavor["id"],
        "flavor": flavor_copy.dumps(copy),
        "created_at": now,
        "updated_at": None,
        "deleted": 0,
        **columns,
    }
    conn.execute(insert(INSTANCES), values)
    for table, pairs in ((INSTANCE_METADATA, metadata), (INSTANCE_SYSTEM_METADATA, system_metadata)):
        if pairs:
            conn.execute(insert(table), [{"instance_uuid": instance_uuid, "key": k, "value": v,
                                          "created_at": now, "deleted": 0} for k, v in pairs.items()])
    if tags:
        conn.execute(insert(TAGS), [{"resource_id": instance_uuid, "tag": t} for t in dict.fromkeys(tags)])
    start_action(conn, instance_uuid, "create", actor)
    return get(conn, instance_uuid, read_deleted="yes")


def _row(result) -> dict | None:
    row = result.mappings().first()
    return dict(row) if row is not None else None


def get(conn: Connection, instance_uuid: str, *, read_deleted: str = "no", for_update: bool = False) -> dict:
    """One server by uuid; ``read_deleted`` "no" (the default), "yes" or "only", as in Nova."""
    query = select(INSTANCES).where(I.uuid == instance_uuid)
    if read_deleted == "no":
        query = query.where(I.deleted == 0)
    elif read_deleted == "only":
        query = query.where(I.deleted != 0)
    if for_update:
        query = query.with_for_update()
    row = _row(conn.execute(query))
    if row is None:
        raise errors.InstanceNotFound(instance_uuid)
    return row


def ever_existed(conn: Connection, instance_uuid: str) -> bool:
    """Whether a server of this uuid was ever created (deleted ones included)."""
    return conn.execute(select(I.id).where(I.uuid == instance_uuid).limit(1)).first() is not None


def flavors_of(row: dict) -> flavor_copy.FlavorCopy:
    return flavor_copy.FlavorCopy.loads(row["flavor"])


def metadata_of(conn: Connection, instance_uuid: str, *, system: bool = False) -> dict[str, str]:
    table = INSTANCE_SYSTEM_METADATA if system else INSTANCE_METADATA
    # in the order the items were added, as Nova lists them
    query = (select(table.c.key, table.c.value)
             .where(table.c.instance_uuid == instance_uuid, table.c.deleted == 0).order_by(table.c.id))
    return dict(conn.execute(query).all())


def tags_of(conn: Connection, instance_uuid: str) -> list[str]:
    query = select(TAGS.c.tag).where(TAGS.c.resource_id == instance_uuid).order_by(TAGS.c.tag)
    return [r[0] for r in conn.execute(query)]


def status(row: dict) -> str:
    return states.status_from_state(row["vm_state"], row["task_state"], deleted=bool(row["deleted"]))


# --- list ---------------------------------------------------------------------------------------

def list_filter(*, is_admin: bool, project_id: str | None = None, statuses=None,
                deleted: bool | None = None, changes_since=None, changes_before=None,
                all_tenants: bool = False, version_2_38: bool = True, soft_deleted: bool | None = None):
    """The WHERE clause of a server list, with Nova's rules for deleted rows and ``status``.

    Without ``deleted``, ``changes-since`` or ``changes-before`` only live servers are listed
    (not soft-deleted ones);
    with a changes filter, deleted ones too (so a client polling for changes sees deletions).
    ``status=DELETED`` lists deleted servers for admins and is a 403 for others. An unknown status
    is a 400 from 2.38 (``version_2_38``) and returns None (an empty list) before.
    """
    clauses = []
    if not all_tenants and project_id is not None:
        clauses.append(I.project_id == project_id)
    if statuses:
        selected = states.status_filter(statuses)
        if selected.matches_nothing:
            if version_2_38:
                raise errors.InvalidStatus()
            return None
        clauses.append(I.vm_state.in_(selected.vm_states))
        if selected.task_states is not None:
            clauses.append(I.task_state.in_(selected.task_states))
        if selected.vm_states == [states.DELETED]:
            if not is_admin:
                raise errors.DeletedListForbidden()
            deleted = True
    if deleted is None and changes_since is None and changes_before is None:
        deleted = False
    # A soft-deleted server (vm_state soft-delete, waiting for its reclaim) counts as deleted
    # for lists, as in Nova: hidden from the default list, shown with the deleted ones.
    # ``soft_deleted`` (Nova's filter of that name) turns that off: a deleted list without the
    # soft-deleted servers, a live list with them.
    if deleted is True:
        clauses.append(or_(I.deleted != 0, I.vm_state == states.SOFT_DELETED) if soft_deleted in (None, True)
                       else I.deleted != 0)
    elif deleted is False:
        clauses.append(I.deleted == 0)
        if not soft_deleted:
            clauses.append(or_(I.vm_state != states.SOFT_DELETED, I.vm_state.is_(None)))
    # Nova compares updated_at alone (a row never updated is no change); a soft delete sets it,
    # so a deletion shows as a change.
    if changes_since is not None:
        clauses.append(I.updated_at >= changes_since)
    if changes_before is not None:
        clauses.append(I.updated_at <= changes_before)
    return and_(*clauses) if clauses else and_(True)


def live_rows(conn: Connection) -> list[dict]:
    """Every live (not deleted) server's row, in the order they were created."""
    return _dicts(conn.execute(select(INSTANCES).where(I.deleted == 0).order_by(I.id)))


def list_instances(conn: Connection, where, *, limit: int | None = None) -> list[dict]:
    """Servers matching ``where`` (from ``list_filter``), newest first, as Nova's default sort."""
    if where is None:
        return []
    query = select(INSTANCES).where(where).order_by(I.created_at.desc(), I.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [dict(r) for r in conn.execute(query).mappings()]


# --- actions: compare-and-swap on task_state ------------------------------------------------------

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


# --- lock ---------------------------------------------------------------------------------------

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
    action_id = start_action(conn, instance_uuid, "unlock", actor)
    event = start_event(conn, action_id, "api_unlock", host=host)
    conn.execute(update(INSTANCES).where(I.uuid == instance_uuid, I.deleted == 0)
                 .values(locked=False, locked_by=None, locked_reason=None, updated_at=utcnow()))
    server_events.state_saved(conn, instance_uuid, server_events.state_before_of(row), actor)
    finish_event(conn, event, "Success")


# --- instance actions and events -----------------------------------------------------------------

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
    action = _row(conn.execute(query))
    if action is None:
        raise errors.InstanceActionNotFound(request_id)
    events = (select(INSTANCE_ACTIONS_EVENTS).where(INSTANCE_ACTIONS_EVENTS.c.action_id == action["id"])
              .order_by(INSTANCE_ACTIONS_EVENTS.c.start_time.desc(), INSTANCE_ACTIONS_EVENTS.c.id.desc()))
    action["events"] = [dict(r) for r in conn.execute(events).mappings()]
    return action


# --- faults -------------------------------------------------------------------------------------

def add_fault(conn: Connection, instance_uuid: str, *, code: int, message: str, details: str | None = None,
              host: str | None = None) -> None:
    """Record a fault; the message is cut to the column's 255 characters, as Nova does."""
    conn.execute(insert(INSTANCE_FAULTS), {
        "instance_uuid": instance_uuid, "code": code, "message": message[:255], "details": details,
        "host": host, "created_at": utcnow(), "deleted": 0})


_LATEST_FAULTS = (
    select(INSTANCE_FAULTS)
    .where(INSTANCE_FAULTS.c.instance_uuid.in_(bindparam("uuids", expanding=True)), INSTANCE_FAULTS.c.deleted == 0)
    .order_by(INSTANCE_FAULTS.c.instance_uuid, INSTANCE_FAULTS.c.id.desc())
)


def latest_faults(conn: Connection, instance_uuids: list[str]) -> dict[str, dict]:
    """The newest fault (highest id) of each server that has a live one, for the ERROR and
    DELETED views; a deleted server's faults went with it, as in Nova."""
    faults: dict[str, dict] = {}
    if not instance_uuids:
        return faults
    for row in conn.execute(_LATEST_FAULTS, {"uuids": list(instance_uuids)}).mappings():
        faults.setdefault(row["instance_uuid"], dict(row))
    return faults


def fault_view(fault: dict, *, is_admin: bool) -> dict:
    """The ``fault`` of a server body: details only when set, and for a 500 only to admins."""
    view = {"code": fault["code"], "created": fault["created_at"].strftime("%Y-%m-%dT%H:%M:%SZ"),
            "message": fault["message"]}
    if fault.get("details") and (is_admin or fault["code"] != 500):
        view["details"] = fault["details"]
    return view


# --- soft delete --------------------------------------------------------------------------------

def soft_delete(conn: Connection, instance_uuid: str) -> bool:
    """Mark a server deleted as Nova does: ``deleted`` = its id, ``deleted_at`` and
    ``terminated_at`` now, vm_state deleted, task_state none, power_state NOSTATE. Its metadata,
    system metadata and faults are soft-deleted with it, its tags and console log removed; its instance
    actions and events stay (os-instance-actions lists them for deleted servers). Returns False when
    there was nothing left to delete."""
    now = utcnow()
    before = server_events.state_before(conn, instance_uuid)
    result = conn.execute(
        update(INSTANCES).where(I.uuid == instance_uuid, I.deleted == 0)
        .values(deleted=I.id, deleted_at=now, updated_at=now, terminated_at=func.coalesce(I.terminated_at, now),
                vm_state=states.DELETED, task_state=None, power_state=states.power_state.NOSTATE, progress=0))
    if result.rowcount != 1:
        return False
    server_events.state_saved(conn, instance_uuid, before and {**before, "deleting": True}, first=True)
    for table in (INSTANCE_METADATA, INSTANCE_SYSTEM_METADATA, INSTANCE_FAULTS):
        conn.execute(update(table).where(table.c.instance_uuid == instance_uuid, table.c.deleted == 0)
                     .values(deleted=table.c.id, deleted_at=now, updated_at=now))
    conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid))
    console.forget(conn, instance_uuid)
    return True


# --- a page of a server list ----------------------------------------------------------------------

def list_page(conn: Connection, where, *, sort_keys: list[str], sort_dirs: list[str], limit: int | None = None,
              marker: str | None = None, columns: tuple | None = None) -> list[dict]:
    """One page of servers matching ``where``: ordered by ``sort_keys`` / ``sort_dirs`` (each an
    instances column, with created_at and id added last when missing, in the first direction, as
    Nova does), starting after the server ``marker`` (any server, deleted too; an unknown one is
    Nova's 400 "marker [...] not found"). ``columns``: only these (default: every column)."""
    if limit == 0:
        return []
    found = None
    if marker is not None:  # checked even when nothing can match, as Nova looks the marker up first
        found = _row(conn.execute(select(INSTANCES).where(I.uuid == marker)))
        if found is None:
            raise errors.Invalid(f"marker [{marker}] not found")
    if where is None:
        return []
    keys, dirs = list(sort_keys), list(sort_dirs)
    for default in ("created_at", "id"):
        if default not in keys:
            keys.append(default)
            dirs.append(dirs[0] if dirs else "asc")
    while len(dirs) < len(keys):
        dirs.append(dirs[0])
    query = (select(*columns) if columns else select(INSTANCES)).where(where)
    if found is not None:
        query = query.where(_after(found, keys, dirs))
    order = []
    for key, direction in zip(keys, dirs, strict=True):
        column = INSTANCES.c[key]
        # NULL sorts lowest, on every engine (as on MySQL, Nova's engine, and SQLite; PostgreSQL
        # needs telling, and MariaDB has no NULLS FIRST)
        if conn.dialect.name == "postgresql":
            order.append(column.asc().nulls_first() if direction == "asc" else column.desc().nulls_last())
        else:
            order.append(column.asc() if direction == "asc" else column.desc())
    query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return _dicts(conn.execute(query))


def _dicts(result) -> list[dict]:
    """A result's rows as dicts: the keys taken once, not once per row as RowMapping does."""
    keys = tuple(result.keys())
    return [dict(zip(keys, row)) for row in result]


def _after(marker: dict, keys: list[str], dirs: list[str]):
    """Rows strictly after ``marker`` in the order of ``keys`` / ``dirs``, NULL the lowest value."""

    def beyond(column, value, direction):
        if direction == "asc":
            return column.is_not(None) if value is None else column > value
        return and_(False) if value is None else or_(column < value, column.is_(None))

    def same(column, value):
        return column.is_(None) if value is None else column == value

    either = []
    for i, (key, direction) in enumerate(zip(keys, dirs, strict=True)):
        equal = [same(INSTANCES.c[k], marker[k]) for k in keys[:i]]
        either.append(and_(*equal, beyond(INSTANCES.c[key], marker[key], direction)))
    return or_(*either)


def metadata_by_instance(conn: Connection, instance_uuids: list[str], *, system: bool = False
                         ) -> dict[str, dict[str, str]]:
    """The live metadata (or system metadata) of several servers in one statement."""
    table = INSTANCE_SYSTEM_METADATA if system else INSTANCE_METADATA
    result: dict[str, dict[str, str]] = {}
    if not instance_uuids:
        return result
    query = (select(table.c.instance_uuid, table.c.key, table.c.value)
             .where(table.c.instance_uuid.in_(instance_uuids), table.c.deleted == 0).order_by(table.c.id))
    for uuid, key, value in conn.execute(query):
        result.setdefault(uuid, {})[key] = value
    return result


def tags_by_instance(conn: Connection, instance_uuids: list[str]) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    if not instance_uuids:
        return result
    query = select(TAGS.c.resource_id, TAGS.c.tag).where(TAGS.c.resource_id.in_(instance_uuids)).order_by(TAGS.c.tag)
    for uuid, tag in conn.execute(query):
        result.setdefault(uuid, []).append(tag)
    return result


# --- plain updates and the controller's outbox ------------------------------------------------------

_UPDATABLE = frozenset({"display_name", "display_description", "hostname", "auto_disk_config", "access_ip_v4",
                        "access_ip_v6", "pinned_availability_zone"})


def update_fields(conn: Connection, instance_uuid: str, changes: dict, actor: Actor | None = None) -> bool:
    """PUT /servers/{id}: names, description, hostname, disk config, access IPs (no task runs
    for them, as in Nova). Returns False when the server is gone."""
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    values = dict(changes, updated_at=utcnow())
    before = server_events.state_before(conn, instance_uuid)
    saved = conn.execute(update(INSTANCES).where(I.uuid == instance_uuid, I.deleted == 0).values(values)).rowcount == 1
    if saved:
        server_events.state_saved(conn, instance_uuid, before, actor)  # instance.update, after commit
    return saved


_INSERT_OUTBOX = insert(OUTBOX)


def outbox(conn: Connection, instance_uuid: str, operation: str, actor: Actor, **payload) -> None:
    """Ask the controller to act on a server (kind "server"; the operations are in docs/servers.md).
    The payload names the request, so that the controller's events join the API's instance action."""
    conn.execute(_INSERT_OUTBOX, {"kind": operations.SERVER, "object_id": instance_uuid, "operation": operation,
                                  "payload": {"request_id": actor.request_id, **payload}, "created_at": utcnow(),
                                  "attempts": 0})


def fail_unsupported(conn: Connection, row: dict, pre: Precondition, actor: Actor, event: str) -> None:
    """Start ``pre``'s action and end it as Nova's compute service does when its driver lacks the
    feature: the action's event ``event`` fails ("Error", details "NotImplementedError"), a fault
    500 "NotImplementedError" is recorded, and the server goes back to its vm_state with no task.
    The API still answers 202, as Nova's does (it only learns of the failure later)."""
    begin_action(conn, row, pre, actor)
    action_id = action_for_request(conn, row["uuid"], actor.request_id) if actor.request_id else None
    if action_id is None:  # pragma: no cover - every API request has a request id
        action_id = start_action(conn, row["uuid"], pre.name, actor)
    reason = f"NotImplementedError: KubeVirt servers cannot {pre.name} (not supported by OpenKeel yet)\n"
    event_id = start_event(conn, action_id, event, host=row["host"])
    finish_event(conn, event_id, "Error", traceback=reason, details="NotImplementedError")
    add_fault(conn, row["uuid"], code=500, message="NotImplementedError", details=reason, host=row["host"])
    save_state(conn, row["uuid"], expected_task_state=pre.next_task_state, vm_state=row["vm_state"],
               task_state=None)


# --- tags ---------------------------------------------------------------------------------------

MAX_TAGS = 50


def add_tag(conn: Connection, instance_uuid: str, tag: str) -> bool:
    """Add one tag; False when the server already has it."""
    if tag in tags_of(conn, instance_uuid):
        return False
    conn.execute(insert(TAGS), {"resource_id": instance_uuid, "tag": tag})
    return True


def set_tags(conn: Connection, instance_uuid: str, tags: list[str]) -> list[str]:
    """Replace all tags (duplicates kept once); returns them as Nova lists them."""
    conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid))
    unique = list(dict.fromkeys(tags))
    if unique:
        conn.execute(insert(TAGS), [{"resource_id": instance_uuid, "tag": t} for t in unique])
    return tags_of(conn, instance_uuid)


def delete_tag(conn: Connection, instance_uuid: str, tag: str) -> None:
    result = conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid, TAGS.c.tag == tag))
    if result.rowcount != 1:
        raise errors.NotFound(f"Instance {instance_uuid} has no tag '{tag}'")


def delete_tags(conn: Connection, instance_uuid: str) -> None:
    conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid))


# --- metadata -----------------------------------------------------------------------------------

def delete_metadata_item(conn: Connection, instance_uuid: str, key: str) -> bool:
    """Soft-delete one live metadata item; False when there was none (of parallel deletes, one wins)."""
    table = INSTANCE_METADATA
    live = [table.c.instance_uuid == instance_uuid, table.c.deleted == 0, table.c.key == key]
    return conn.execute(update(table).where(*live).values(deleted=table.c.id, deleted_at=utcnow())).rowcount == 1


def set_metadata(conn: Connection, instance_uuid: str, metadata: dict[str, str]) -> None:
    """Make the server's live metadata exactly ``metadata`` (changed values rewritten, missing keys
    soft-deleted), as Nova saves it."""
    current = metadata_of(conn, instance_uuid)
    now = utcnow()
    table = INSTANCE_METADATA
    live = [table.c.instance_uuid == instance_uuid, table.c.deleted == 0]
    gone = [k for k in current if k not in metadata]
    if gone:
        conn.execute(update(table).where(*live, table.c.key.in_(gone)).values(deleted=table.c.id, deleted_at=now))
    for key, value in metadata.items():
        if key in current and current[key] != value:  # changed in place: the item keeps its place
            conn.execute(update(table).where(*live, table.c.key == key).values(value=value, updated_at=now))
    new = [{"instance_uuid": instance_uuid, "key": k, "value": v, "created_at": now, "deleted": 0}
           for k, v in metadata.items() if k not in current]
    if new:
        conn.execute(insert(table), new)
    conn.execute(update(INSTANCES).where(I.uuid == instance_uuid).values(updated_at=now))


# --- one system metadata item (what the controller keeps to finish a task) ----------------------------

def system_metadata_item(conn: Connection, instance_uuid: str, key: str) -> str | None:
    table = INSTANCE_SYSTEM_METADATA
    return conn.execute(select(table.c.value).where(table.c.instance_uuid == instance_uuid, table.c.key == key,
                                                    table.c.deleted == 0)).scalar()


def set_system_metadata_item(conn: Connection, instance_uuid: str, key: str, value: str | None) -> None:
    """Set (or, with None, soft-delete) one system metadata item of a server."""
    table = INSTANCE_SYSTEM_METADATA
    live = (table.c.instance_uuid == instance_uuid, table.c.key == key, table.c.deleted == 0)
    now = utcnow()
    if value is None:
        conn.execute(update(table).where(*live).values(deleted=table.c.id, deleted_at=now))
    elif conn.execute(update(table).where(*live).values(value=value, updated_at=now)).rowcount == 0:
        conn.execute(insert(table).values(instance_uuid=instance_uuid, key=key, value=value, created_at=now,
                                          deleted=0))
