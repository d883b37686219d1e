"""Where server notifications come from: a few calls in compute/ that note what changed, sent after commit.

The API and the controller each install their ``ServerNotifier`` (notifications/server.py) at start-up;
without one (the default: nothing to send) every call here returns after one check. compute/ calls:

- ``event_started`` / ``event_finished`` from ``start_event`` / ``finish_event``: an instance-action
  event of a compute step (``compute_stop_instance``, ...) is exactly what Nova's compute wraps in its
  ``.start`` / ``.end`` (``.error``) notifications, so every operation that records its event notifies;
- ``state_before`` / ``state_saved`` around a write of the server's row: ``compute.instance.update``
  / ``instance.update`` as Nova's ``Instance.save()`` sends them (``[notifications]
  notify_on_state_change``).

What is noted goes out once the transaction has committed (``db.api.after_commit``): a write rolled
back or lost to a concurrent one notifies nothing. The payload is read from the database then; an
action event's shows the server's row (state, task, power state, flavor) as the transaction had it when
the event was recorded, so a step records a start before its writes and an end after them.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.engine import Connection

from openkeel_compute.db.api import after_commit
from openkeel_compute.db.models import INSTANCE_ACTIONS, INSTANCE_ACTIONS_EVENTS, INSTANCES


class Emitter(Protocol):
    @property
    def wants_updates(self) -> bool: ...

    def action_event(self, action_id: int, event: str, phase: str, host: str | None, at_step: bool = False,
                     row: dict[str, Any] | None = None) -> None: ...

    def finished_event(self, event_id: int, result: str, host: str | None, details: str | None,
                       traceback: str | None, row: dict[str, Any] | None = None) -> None: ...

    def update(self, uuid: str, old: dict[str, Any], actor: Any = None) -> None: ...

    def api_action(self, uuid: str, action: str, actor: Any) -> None: ...

    def local_delete(self, uuid: str, actor: Any, kind: str) -> None: ...

    def volume_event(self, action_id: int, action: str, phases: tuple[str, ...], host: str | None,
                     volumes: dict[str, str], error: str | None) -> None: ...


_EMITTER: Emitter | None = None


def install(emitter: Emitter | None) -> None:
    """The process's notifier of server events (None: none are sent)."""
    global _EMITTER
    _EMITTER = emitter


def installed() -> Emitter | None:
    return _EMITTER


def _row_now(conn: Connection, uuid: str | None) -> dict[str, Any] | None:
    """The server's row as the transaction has it now: an event's payload shows the server's state, task,
    power state and flavor at the point the event is recorded (a start before the step's writes, an end
    after them, as Nova's compute sends them), not as the transaction leaves it."""
    if uuid is None:
        return None
    row = conn.execute(select(INSTANCES).where(INSTANCES.c.uuid == uuid)).mappings().first()
    return dict(row) if row is not None else None


def _uuid_of_action(conn: Connection, action_id: int) -> str | None:
    return conn.execute(select(INSTANCE_ACTIONS.c.instance_uuid).where(INSTANCE_ACTIONS.c.id == action_id)).scalar()


def _sends(emitter: Emitter) -> bool:
    return bool(getattr(emitter, "sends_servers", True))


def event_started(conn: Connection, action_id: int, event: str, host: str | None) -> None:
    emitter = _EMITTER
    if emitter is not None and _sends(emitter):
        row = _row_now(conn, _uuid_of_action(conn, action_id))
        after_commit(conn, functools.partial(emitter.action_event, action_id, event, "start", host, row=row))


def step_started(conn: Connection, action_id: int, event: str, host: str | None, key: str | None = None) -> None:
    """The ``.start`` notification of an event whose step sends it at its own stage (``Event.start_at_step``:
    a build's, once its node is chosen, as Nova's compute sends it), after commit; with ``key`` (the
    server's uuid) before the transaction's updates, as Nova's reboot sends it before it saves the stage."""
    emitter = _EMITTER
    if emitter is not None and _sends(emitter):
        row = _row_now(conn, _uuid_of_action(conn, action_id))
        after_commit(conn, functools.partial(emitter.action_event, action_id, event, "start", host, at_step=True,
                                             row=row), key=key, first=key is not None)


def event_finished(conn: Connection, event_id: int, result: str, host: str | None, details: str | None,
                   traceback: str | None, uuid: str | None = None) -> None:
    emitter = _EMITTER
    if emitter is not None and _sends(emitter):
        if uuid is None:  # the key that orders a server's notifications in the transaction
            uuid = conn.execute(select(INSTANCE_ACTIONS.c.instance_uuid).where(
                INSTANCE_ACTIONS.c.id == select(INSTANCE_ACTIONS_EVENTS.c.action_id).where(
                    INSTANCE_ACTIONS_EVENTS.c.id == event_id).scalar_subquery())).scalar()
        row = _row_now(conn, uuid)
        after_commit(conn, functools.partial(emitter.finished_event, event_id, result, host, details, traceback,
                                             row=row), key=uuid)


def api_action(conn: Connection, uuid: str, action: str, actor: Any) -> None:
    """An action Nova's API notifies itself, without an event of its own (``evacuate``):
    ``compute.instance.<action>`` / ``instance.<action>`` after commit."""
    emitter = _EMITTER
    if emitter is not None:
        after_commit(conn, functools.partial(emitter.api_action, uuid, action, actor), key=uuid)


def local_delete(conn: Connection, uuid: str, actor: Any, kind: str = "delete") -> None:
    """A server deleted by the API itself (its compute service down): ``<kind>.start`` and ``<kind>.end``
    (``delete`` or ``force_delete``) from the API, after commit, as Nova's ``_local_delete`` sends them."""
    emitter = _EMITTER
    if emitter is not None:
        after_commit(conn, functools.partial(emitter.local_delete, uuid, actor, kind), key=uuid)


def volume_event(conn: Connection, action_id: int, action: str, phases: tuple[str, ...], host: str | None,
                 volumes: dict[str, str], error: str | None = None) -> None:
    """A volume step's notifications (``instance.volume_attach.start``, ...; ``volumes``: volume_id, or
    old_volume_id and new_volume_id), after commit."""
    emitter = _EMITTER
    if emitter is not None:
        after_commit(conn, functools.partial(emitter.volume_event, action_id, action, phases, host, volumes, error))


_STATE = (INSTANCES.c.vm_state, INSTANCES.c.task_state, INSTANCES.c.display_name)


def sends_updates() -> bool:
    """Whether a state write is followed by ``instance.update`` (``[notifications] notify_on_state_change``):
    such a notification shows the server as its transaction left it, so a writer that wants one per state
    writes each state in its own transaction."""
    emitter = _EMITTER
    return emitter is not None and bool(emitter.wants_updates)


def state_before(conn: Connection, uuid: str) -> dict[str, Any] | None:
    """The server's state before a write (None when no update notification would be sent)."""
    emitter = _EMITTER
    if emitter is None or not emitter.wants_updates:
        return None
    row = conn.execute(select(*_STATE).where(INSTANCES.c.uuid == uuid)).mappings().first()
    return dict(row) if row is not None else None


def state_before_of(row: dict[str, Any]) -> dict[str, Any] | None:
    """``state_before`` from a row the caller read before its write."""
    emitter = _EMITTER
    if emitter is None or not emitter.wants_updates:
        return None
    return {"vm_state": row.get("vm_state"), "task_state": row.get("task_state"),
            "display_name": row.get("display_name")}


def state_saved(conn: Connection, uuid: str, before: dict[str, Any] | None, actor: Any = None, *,
                first: bool = False) -> None:
    """The write after ``state_before`` changed the row: ``instance.update`` after commit (``first``:
    before the server's other notifications of the transaction, as a delete's is before its end)."""
    emitter = _EMITTER
    if emitter is not None and before is not None:
        after_commit(conn, functools.partial(emitter.update, uuid, before, actor), key=uuid, first=first)
