"""POST /servers/{server_id}/action: os-start, os-stop, reboot, pause, unpause, lock, unlock,
os-getConsoleOutput, and suspend and resume, which KubeVirt servers cannot do yet.

The API only starts an action: it moves task_state with the compare-and-swap, records the
instance action and writes an outbox row (kind "server") that the controller acts on; see
docs/servers.md for the operations. os-getConsoleOutput asks the controller for the console log
through the database and waits for its answer (compute/console.py).
"""

from __future__ import annotations

import time

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import actor_of, read_server
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import console, errors, preconditions
from openkeel_compute.compute.instances import cas, locks, store, updates
from openkeel_compute.policies import server_actions as rules


def _read_mapped(conn, req, server_id: str) -> dict:
    """The look-up of os-start and os-stop: a server that never existed "has no mapping to a
    cell" (a deleted one still has its mapping, so it is "not found"), as Nova answers."""
    try:
        return read_server(conn, req, server_id)
    except errors.InstanceNotFound:
        if not store.ever_existed(conn, server_id):
            raise faults.NotFound(f"Instance {server_id} has no mapping to a cell.") from None
        raise


def _start_task(req, server_id: str, rule: str, action: str, operation_name: str, *,
                precondition=None, mapped: bool = False, target_user: bool = True) -> Response:
    actor = actor_of(req)
    with common.write(req) as conn:
        row = _read_mapped(conn, req, server_id) if mapped else read_server(conn, req, server_id)
        target = {"project_id": row["project_id"]}
        if target_user:
            target["user_id"] = row["user_id"]
        common.can(req, rule, target)
        pre = precondition or preconditions.precondition(action)
        cas.begin_action(conn, row, pre, actor)
        updates.outbox(conn, row["uuid"], operation_name, actor, task_state=pre.next_task_state)
    return Response(None)


@operation(body={"2.0-": schema.start}, success=202, expected=(404, 409))
@wsgi_path_params
def start(req, server_id):
    return _start_task(req, server_id, rules.SERVERS % "start", "start", "start", mapped=True)


@operation(body={"2.0-": schema.stop}, success=202, expected=(404, 409))
@wsgi_path_params
def stop(req, server_id):
    return _start_task(req, server_id, rules.SERVERS % "stop", "stop", "stop", mapped=True)


@operation(body={"2.0-": schema.reboot}, success=202, expected=(404, 409))
@wsgi_path_params
def reboot(req, server_id):
    kind = req.body["reboot"]["type"].upper()
    pre = preconditions.precondition("reboot", reboot_type=kind)
    return _start_task(req, server_id, rules.SERVERS % "reboot", "reboot", f"reboot-{kind.lower()}",
                       precondition=pre, target_user=False)


@operation(body={"2.0-": schema.pause}, success=202, expected=(404, 409, 501))
@wsgi_path_params
def pause(req, server_id):
    return _start_task(req, server_id, rules.PAUSE % "pause", "pause", "pause")


@operation(body={"2.0-": schema.unpause}, success=202, expected=(404, 409, 501))
@wsgi_path_params
def unpause(req, server_id):
    return _start_task(req, server_id, rules.PAUSE % "unpause", "unpause", "unpause")


@operation(body={"2.0-2.72": schema.lock, "2.73-": schema.lock_v273}, success=202, expected=(404,))
@wsgi_path_params
def lock(req, server_id):
    actor = actor_of(req)
    reason = None
    if req.version >= (2, 73) and req.body["lock"] is not None:
        reason = req.body["lock"].get("locked_reason")
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.LOCK % "lock", {"user_id": row["user_id"], "project_id": row["project_id"]})
        locks.lock(conn, row["uuid"], actor, reason, host=common.services(req).conf.host)
    return Response(None)


@operation(body={"2.0-2.72": schema.unlock, "2.73-": schema.unlock}, success=202, expected=(404,))
@wsgi_path_params
def unlock(req, server_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        target = {"project_id": row["project_id"]}
        common.can(req, rules.LOCK % "unlock", target)
        if not locks.is_expected_locked_by(row, actor):
            common.can(req, rules.LOCK % "unlock:unlock_override", target)
        locks.unlock(conn, row["uuid"], actor, host=common.services(req).conf.host)
    return Response(None)


# What Nova's API answers when its compute service does not answer in time, or fails unexpectedly.
_NO_ANSWER = "Unexpected API Error. Please contact the administrator\n<class 'oslo_messaging.exceptions.MessagingTimeout'>"
_FAILED = "Unexpected API Error. Please contact the administrator\n<class 'oslo_messaging.rpc.client.RemoteError'>"


@operation(body={"2.0-": schema.get_console_output}, expected=(404, 409, 500))
@wsgi_path_params
def get_console_output(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.CONSOLE_OUTPUT, {"project_id": row["project_id"]})
        preconditions.check("get_console_output", row, is_admin=bool(req.context.is_admin))
    wanted = console.normal_length(req.body["os-getConsoleOutput"].get("length"))
    with common.domain_errors():
        answer = _ask_console(req, row["uuid"], wanted, common.services(req).conf.api.console_output_timeout)
    if answer.error == console.NOT_AVAILABLE:
        raise faults.NotFound(console.ConsoleNotAvailable().message)
    if answer.error is not None:
        raise faults.Fault(_FAILED, 500)
    return {"output": console.printable(console.cut(answer, wanted))}


def _ask_console(req, uuid: str, wanted: int | None, timeout: float) -> console.Answer:
    """Request the console log and wait for the controller's answer (one that covers ``wanted``); a
    request answered for another length (a concurrent one) is asked again."""
    actor = actor_of(req)
    deadline = time.monotonic() + timeout
    pause = 0.02
    asked = None
    while time.monotonic() < deadline:
        if asked is None:
            with common.write(req) as conn:
                asked = console.request(conn, uuid, wanted)
                updates.outbox(conn, uuid, "console-output", actor)
        time.sleep(pause)
        pause = min(pause * 2, 0.25)
        with common.read(req) as conn:
            answer = console.answered(conn, asked)
        if answer is not None:
            if console.covers(answer.length, wanted) or answer.error is not None:
                return answer
            asked = None
    raise faults.Fault(_NO_ANSWER, 500)


def _unsupported(req, server_id: str, rule: str, action: str, event: str, *, target_user: bool) -> Response:
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        target = {"project_id": row["project_id"]}
        if target_user:
            target["user_id"] = row["user_id"]
        common.can(req, rule, target)
        updates.fail_unsupported(conn, row, preconditions.precondition(action), actor, event)
    return Response(None)


@operation(body={"2.0-": schema.suspend}, success=202, expected=(400, 404, 409))
@wsgi_path_params
def suspend(req, server_id):
    return _unsupported(req, server_id, rules.SUSPEND % "suspend", "suspend", "compute_suspend_instance",
                        target_user=True)


@operation(body={"2.0-": schema.resume}, success=202, expected=(404, 409))
@wsgi_path_params
def resume(req, server_id):
    return _unsupported(req, server_id, rules.SUSPEND % "resume", "resume", "compute_resume_instance",
                        target_user=False)
