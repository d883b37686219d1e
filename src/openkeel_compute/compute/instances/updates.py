"""Plain updates (PUT /servers/{id}), the controller's outbox, and an action failed at once when
KubeVirt servers cannot do it.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import insert, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute.instances.base import Actor, I
from openkeel_compute.compute.instances.cas import begin_action, save_state
from openkeel_compute.compute.instances.instance_actions import (
    action_for_request,
    finish_event,
    start_action,
    start_event,
)
from openkeel_compute.compute.instances.instance_faults import add_fault
from openkeel_compute.compute.preconditions import Precondition
from openkeel_compute.db.models import INSTANCES, OUTBOX, utcnow
from openkeel_compute.model import operations
from openkeel_compute.notifications import server_events

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
