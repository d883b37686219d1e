"""DELETE /servers/{server_id}/migrations/{migration_id} (abort, 2.24; queued and preparing ones from 2.65)
and POST .../{migration_id}/action force_complete (2.22), as Nova 34.0.0 answers them.

Abort: the migration is marked for the controller (compute/live_migration.py ``request_abort``); its
live_migrate step deletes the VirtualMachineInstanceMigration (KubeVirt's cancel: before the handoff the
migration just fails, after it virt-handler aborts the transfer), or never creates it when still queued,
and rolls back to the source with the migration ``cancelled`` (as Nova's libvirt driver ends a cancelled
job). A migration that completed first stays completed.

force_complete: KubeVirt has no call that forces a running migration to converge (post-copy is chosen
before it starts, by a MigrationPolicy); Nova's answer with a driver that lacks it is 202, the action
``live_migration_force_complete`` recorded with its compute event failed (NotImplementedError), and the
migration goes on.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import actor_of, read_server
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import live_migration, preconditions, unsupported
from openkeel_compute.compute.instances import instance_actions
from openkeel_compute.model.states import ACTIVE, task_states
from openkeel_compute.policies import server_subresources as rules

ABORT = preconditions.Precondition("abort live migration", None, frozenset({task_states.MIGRATING}))
FORCE = preconditions.Precondition("force_complete", frozenset({ACTIVE}), frozenset({task_states.MIGRATING}))

force_complete_body = {
    "type": "object", "properties": {"force_complete": {"type": "null"}},
    "required": ["force_complete"], "additionalProperties": False}


def _migration(conn, row: dict, migration_id: str, *, missing) -> dict:
    found = live_migration.by_id(conn, row["uuid"], migration_id)
    if found is None:
        raise missing(f"Migration {migration_id} not found for instance {row['uuid']}")
    return found


def _invalid(row: dict, migration_id: str, state: str, method: str) -> faults.BadRequest:
    return faults.BadRequest(f"Migration {migration_id} state of instance {row['uuid']} is {state}. Cannot "
                             f"{method} while the migration is in this state.")


@operation(versions="2.24-", success=202, expected=(400, 404, 409))
@wsgi_path_params
def abort(req, server_id, migration_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVER_MIGRATIONS % "delete", {"project_id": row["project_id"]})
        ABORT.check(row, is_admin=actor.is_admin)
        migration = _migration(conn, row, migration_id, missing=faults.NotFound)
        allowed = ("running", "queued", "preparing") if req.version >= (2, 65) else ("running",)
        if migration["status"] not in allowed:
            raise _invalid(row, migration_id, migration["status"], "abort live migration")
        instance_actions.start_action(conn, row["uuid"], "live_migration_cancel", actor)
        live_migration.request_abort(conn, row["uuid"], migration["uuid"])
    return Response(None)


@operation(versions="2.22-", body={"2.22-": force_complete_body}, success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def force_complete(req, server_id, migration_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVER_MIGRATIONS % "force_complete", {"project_id": row["project_id"]})
        FORCE.check(row, is_admin=actor.is_admin)
        migration = _migration(conn, row, migration_id, missing=faults.BadRequest)
        if migration["status"] != "running":
            raise _invalid(row, migration_id, migration["status"], "force complete")
        action_id = instance_actions.start_action(conn, row["uuid"], "live_migration_force_complete", actor)
        event = instance_actions.start_event(conn, action_id, "compute_live_migration_force_complete",
                                             host=row["host"])
        trace = unsupported.traceback_for(
            "force complete", "KubeVirt cannot force a running migration to complete (post-copy is chosen by a "
            "MigrationPolicy before it starts)")
        instance_actions.finish_event(conn, event, "Error", traceback=trace, details="NotImplementedError",
                                      host=row["host"])
    return Response(None)
