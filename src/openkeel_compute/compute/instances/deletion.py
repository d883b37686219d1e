"""A server's row marked deleted, as Nova does, with its children.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import func, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute import console, remote_consoles
from openkeel_compute.compute.instances.base import I
from openkeel_compute.db.models import (
    INSTANCE_FAULTS,
    INSTANCE_METADATA,
    INSTANCE_SYSTEM_METADATA,
    INSTANCES,
    TAGS,
    utcnow,
)
from openkeel_compute.model import states
from openkeel_compute.notifications import server_events


def soft_delete(conn: Connection, instance_uuid: str, *, local: bool = False,
                vm_state: str = states.DELETED) -> bool:
    """Mark a server deleted as Nova does: ``deleted`` = its id, ``deleted_at`` and
    ``terminated_at`` now, vm_state deleted, task_state none, power_state NOSTATE. Its metadata,
    system metadata and faults are soft-deleted with it, its tags, console log and console authorisations removed; its instance
    actions and events stay (os-instance-actions lists them for deleted servers). Returns False when
    there was nothing left to delete. ``local``: the API's own delete (Nova's local delete), which leaves
    power_state and progress as they were (no compute saw the guest go); ``vm_state`` what the deleted row
    keeps (Nova's local soft delete destroys a row it set ``soft-delete``)."""
    now = utcnow()
    guest = {} if local else {"power_state": states.power_state.NOSTATE, "progress": 0}
    before = server_events.state_before(conn, instance_uuid)
    result = conn.execute(
        update(INSTANCES).where(I.uuid == instance_uuid, I.deleted == 0)
        .values(deleted=I.id, deleted_at=now, updated_at=now, terminated_at=func.coalesce(I.terminated_at, now),
                vm_state=vm_state, task_state=None, **guest))
    if result.rowcount != 1:
        return False
    server_events.state_saved(conn, instance_uuid, before and {**before, "deleting": True}, first=True)
    for table in (INSTANCE_METADATA, INSTANCE_SYSTEM_METADATA, INSTANCE_FAULTS):
        conn.execute(update(table).where(table.c.instance_uuid == instance_uuid, table.c.deleted == 0)
                     .values(deleted=table.c.id, deleted_at=now, updated_at=now))
    conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid))
    console.forget(conn, instance_uuid)
    remote_consoles.forget(conn, instance_uuid)
    return True
