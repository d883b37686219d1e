"""A server task's instance-action event, as the controller records it across passes and restarts.

An outbox row's event (``compute_stop_instance``, ...) is started once, before the cluster is asked, and
kept in the server's system metadata (``model.sysmeta.TASK_EVENT``, "<row id>:<event id>"): a controller
restarted at any point finishes it rather than losing or repeating it. The observation finishes it when
it sees the task end; a delete ends the task it overrides as "Error"; a step whose task ends in a Nova
fault finishes it with the fault (``end_in_fault``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from openkeel_compute.compute.instances import cas, instance_actions, instance_faults, instance_sysmeta
from openkeel_compute.db.models import INSTANCE_SYSTEM_METADATA, INSTANCES
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import sysmeta
from openkeel_compute.notifications import server_events


def start(conn: Connection, row_id: int, uuid: str, request_id: str, event: str) -> None:
    """Start ``event`` in the instance action of request ``request_id``, once per outbox row."""
    start_all(conn, [(row_id, uuid, request_id, event)])


def start_all(conn: Connection, rows: list[tuple[int, str, str, str]]) -> None:
    """``start`` for each (row id, server uuid, request id, event) in turn, with what every row reads first
    (whether its server ever existed, the server's running task event) read for all of them at once."""
    uuids = list(dict.fromkeys(uuid for _row_id, uuid, request_id, _event in rows if request_id))
    if not uuids:
        return
    existed = {r[0] for r in conn.execute(select(INSTANCES.c.uuid).where(INSTANCES.c.uuid.in_(uuids)))}
    table = INSTANCE_SYSTEM_METADATA
    current_of: dict[str, str | None] = dict.fromkeys(existed)
    current_of.update(conn.execute(select(table.c.instance_uuid, table.c.value).where(
        table.c.instance_uuid.in_(list(existed)), table.c.key == sysmeta.TASK_EVENT, table.c.deleted == 0)).all())
    for row_id, uuid, request_id, event in rows:
        if not request_id or uuid not in existed:
            continue
        current = current_of[uuid]
        if current and current.split(":", 1)[0] == str(row_id):
            continue  # started by an earlier attempt at this row
        if current:  # a delete overrides the task that ran: its event ends, unfinished
            instance_actions.finish_event(conn, int(current.split(":", 1)[1]), "Error")
        action_id = instance_actions.action_for_request(conn, uuid, request_id)
        if action_id is not None:
            event_id = instance_actions.start_event(conn, action_id, event)
            current_of[uuid] = f"{row_id}:{event_id}"
            instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.TASK_EVENT, current_of[uuid])


def notify_start(conn: Connection, uuid: str, request_id: str, event: str, host: str | None, *,
                 before_update: bool = False) -> None:
    """The ``.start`` notification of the request's ``event`` (one its step sends at its own stage, as
    Nova's compute does: a build's once its node is chosen, a reboot's once it is pending), after commit;
    ``before_update``: before the transaction's update of the server (Nova's reboot sends it, then saves)."""
    action_id = instance_actions.action_for_request(conn, uuid, request_id) if request_id else None
    if action_id is not None:
        server_events.step_started(conn, action_id, event, host, key=uuid if before_update else None)


def keep(conn: Connection, row_id: int, uuid: str, event_id: int) -> None:
    """Remember an event a step started itself (a rebuild's) as the task's."""
    instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.TASK_EVENT, f"{row_id}:{event_id}")


def of(conn: Connection, uuid: str) -> dict[str, Any]:
    """The server's open event as ``finish`` reads it, from the database as it is now."""
    return {"uuid": uuid, "system_metadata": {sysmeta.TASK_EVENT: instance_sysmeta.system_metadata_item(
        conn, uuid, sysmeta.TASK_EVENT)}}


def finish(conn: Connection, server: dict[str, Any], fault: Fault | None, host: str | None = None) -> None:
    """Finish the task's event (``server``: its row with its system metadata), on the server's host as
    Nova's compute service records it; "Error" with the fault's message when there is one."""
    value = server["system_metadata"].get(sysmeta.TASK_EVENT)
    if not value:
        return
    event_id = int(value.split(":", 1)[1])
    if fault is None:
        instance_actions.finish_event(conn, event_id, "Success", host=host)
    else:
        instance_actions.finish_event(conn, event_id, "Error", traceback=fault.details or fault.message,
                                      details=fault.message, host=host)
    instance_sysmeta.set_system_metadata_item(conn, server["uuid"], sysmeta.TASK_EVENT, None)


def end_in_fault(conn: Connection, server: dict[str, Any], fault: Fault, *, expected: Any,
                 vm_state: str | None = None, host: str | None = None) -> bool:
    """End the task ``expected`` (compare-and-swap) with Nova's ``fault``: the task cleared (and the
    server in ``vm_state`` when given), the fault recorded, the task's event finished as "Error". False
    when another task took over meanwhile (nothing written)."""
    changes: dict[str, Any] = {"task_state": None}
    if vm_state is not None:
        changes["vm_state"] = vm_state
    if not cas.save_state(conn, server["uuid"], expected_task_state=expected, **changes):
        return False
    instance_faults.add_fault(conn, server["uuid"], code=fault.code, message=fault.message, details=fault.details,
                              host=host)
    finish(conn, server, fault, host)
    return True


def end_started(conn: Connection, uuid: str, expected: str, **changes: Any) -> bool:
    """End the task ``expected`` with ``changes``, then finish its event (started with its row: its
    ``.start`` notification showed the server before the step, its ``.end`` shows it after). False when
    another task (a delete) took over."""
    if not cas.save_state(conn, uuid, expected_task_state=expected, **changes):
        return False
    finish(conn, of(conn, uuid), None)
    return True


def end(conn: Connection, uuid: str, request_id: str, event: str, expected: str, **changes: Any) -> bool:
    """End the task ``expected`` with ``changes`` and record ``event``, done, in the request's action.
    False when another task (a delete) took over."""
    if not cas.save_state(conn, uuid, expected_task_state=expected, **changes):
        return False
    action_id = instance_actions.action_for_request(conn, uuid, request_id)
    if action_id is not None:
        instance_actions.finish_event(conn, instance_actions.start_event(conn, action_id, event), "Success")
    return True
