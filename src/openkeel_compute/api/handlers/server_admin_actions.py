"""POST /servers/{server_id}/action: os-resetState, injectNetworkInfo, restore and forceDelete, as
Nova 34.0.0 answers them (resetNetwork, removed from Nova, is api/handlers/removed.py's)."""

from __future__ import annotations

from sqlalchemy import update

from openkeel_compute.api import common
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    compute_down,
    locked_as_invalid_state,
    read_server,
)
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import preconditions
from openkeel_compute.compute.instances import cas, instance_actions, updates
from openkeel_compute.db.models import INSTANCE_ACTIONS, utcnow
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states
from openkeel_compute.policies import server_actions as rules


@operation(body={"2.0-": schema.reset_state}, success=202, expected=(404,))
@wsgi_path_params
def reset_state(req, server_id):
    """Set vm_state (active or error) and clear the task, whatever runs: no lock or state check.
    A controller still working on the old task finds it gone and leaves the row alone."""
    actor = actor_of(req)
    state = {"active": states.ACTIVE, "error": states.ERROR}[req.body["os-resetState"]["state"]]
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.ADMIN_ACTIONS % "reset_state", {"project_id": row["project_id"]})
        action_id = instance_actions.start_action(conn, row["uuid"], "resetState", actor)
        cas.save_state(conn, row["uuid"], vm_state=state, task_state=None)
        conn.execute(update(INSTANCE_ACTIONS).where(INSTANCE_ACTIONS.c.id == action_id)
                     .values(finish_time=utcnow(), updated_at=utcnow()))
    return Response(None)


@operation(body={"2.0-": schema.inject_network_info}, success=202, expected=(404, 409))
@wsgi_path_params
def inject_network_info(req, server_id):
    """Only the lock can refuse it. Nova records no action; the network of a KubeVirt server
    is given to the guest by the cluster, so there is nothing to inject (as with Nova's drivers
    that do nothing for it)."""
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.ADMIN_ACTIONS % "inject_network_info", {"project_id": row["project_id"]})
        preconditions.check("injectNetworkInfo", row, is_admin=bool(req.context.is_admin))
    return Response(None)


@operation(body={"2.0-": schema.restore}, success=202, expected=(403, 404, 409))
@wsgi_path_params
def restore(req, server_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.DEFERRED_DELETE % "restore", {"project_id": row["project_id"]})
        pre = preconditions.precondition("restore")
        with locked_as_invalid_state(row["uuid"], "restore"):
            cas.begin_action(conn, row, pre, actor, values={"deleted_at": None})
        if row["host"]:
            updates.outbox(conn, row["uuid"], "restore", actor, task_state=pre.next_task_state)
        else:  # never placed: nothing in the cluster to start
            cas.save_state(conn, row["uuid"], expected_task_state=pre.next_task_state,
                           vm_state=states.ACTIVE, task_state=None)
    return Response(None)


@operation(body={"2.0-": schema.force_delete}, success=202, expected=(404, 409))
@wsgi_path_params
def force_delete(req, server_id):
    """Delete now, a soft-deleted server too; refused by the lock and by a running task."""
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.DEFERRED_DELETE % "force", {"user_id": row["user_id"], "project_id": row["project_id"]})
        preconditions.check("forceDelete", row, is_admin=actor.is_admin)
        if compute_down(req, conn, row):  # Nova's local delete (docs/operators.md)
            if cas.delete_locally(conn, row, actor, kind="force_delete"):
                updates.outbox(conn, row["uuid"], ops.LOCAL_DELETE, actor)
        elif cas.begin_delete(conn, row, actor):
            updates.outbox(conn, row["uuid"], "delete", actor)
    return Response(None)
