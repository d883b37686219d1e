"""Actions a KubeVirt server cannot do yet, ended as Nova's compute service ends them when its
virt driver raises NotImplementedError.

The API still starts the action exactly as Nova's does (the lock and state checks, the
compare-and-swap on task_state, the instance action), and answers what Nova's API answers; then,
in the same transaction, the action ends the way Nova's compute service leaves it after its
driver refused: the action's events (the last one failed, with the traceback for admins and the
details "NotImplementedError"), a fault, and the server's vm_state and task_state as Nova sets
them. No outbox row is written: the cluster is never asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Connection

from openkeel_compute.compute.instances import cas, instance_actions, instance_faults
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.compute.preconditions import Precondition
from openkeel_compute.db.models import INSTANCES


@dataclass(frozen=True, slots=True)
class Ending:
    """How Nova's compute service ends the action after the driver's NotImplementedError.

    ``events``: the events recorded before the failing one, which succeeded (for example the
    conductor's and ``compute_prep_resize`` of a resize). ``event``: the one that fails.
    ``vm_state``: the vm_state the server is left in (None: the one it had). ``fault``: (code,
    message) of the fault recorded (None: no fault, as for a synchronous call whose error the API
    answers itself)."""

    event: str
    events: tuple[str, ...] = ()
    vm_state: str | None = None
    fault: tuple[int, str] | None = (500, "NotImplementedError")
    message: str = ""
    details: str = "NotImplementedError"


def traceback_for(action: str, message: str = "", kind: str = "NotImplementedError") -> str:
    """The event's traceback: what an operator reads to learn why the action failed."""
    reason = message or f"KubeVirt servers cannot {action} (not supported by OpenKeel yet)"
    return f"{kind}: {reason}\n"


def fail(conn: Connection, row: dict, pre: Precondition, actor: Actor, ending: Ending, *,
         values: dict | None = None, instance_action: str | None = None) -> dict:
    """Start ``pre``'s action on ``row`` (409 if it may not) and end it as ``ending`` says.
    ``values`` are further columns the API sets when it starts the action. Returns the row as
    the check saw it."""
    checked = cas.begin_action(conn, row, pre, actor, values=values, instance_action=instance_action)
    uuid = row["uuid"]
    action_id = instance_actions.action_for_request(conn, uuid, actor.request_id) if actor.request_id else None
    if action_id is None:  # pragma: no cover - every API request has a request id
        action_id = instance_actions.start_action(conn, uuid, instance_action or pre.name, actor)
    for name in ending.events:
        instance_actions.finish_event(conn, instance_actions.start_event(conn, action_id, name, host=row["host"]), "Success")
    trace = traceback_for(pre.name, ending.message, ending.details)
    event_id = instance_actions.start_event(conn, action_id, ending.event, host=row["host"])
    instance_actions.finish_event(conn, event_id, "Error", traceback=trace, details=ending.details)
    if ending.fault is not None:
        code, message = ending.fault
        instance_faults.add_fault(conn, uuid, code=code, message=message, details=trace, host=row["host"])
    expected = pre.next_task_state if pre.next_task_state is not None else checked["task_state"]
    cas.save_state(conn, uuid, expected_task_state=expected,
                   vm_state=ending.vm_state or checked["vm_state"], task_state=None)
    return checked



def host_in_use(conn: Connection, host: str) -> bool:
    """Whether a live server runs on ``host``: the hosts the API knows of."""
    query = select(INSTANCES.c.id).where(INSTANCES.c.host == host, INSTANCES.c.deleted == 0).limit(1)
    return conn.execute(query).first() is not None
