"""POST /servers/{server_id}/action: the actions KubeVirt servers cannot do yet.

changePassword and trigger_crash_dump (resize: server_resize.py, migrate and os-migrateLive: server_migrate.py,
rescue: server_rescue.py, createImage and createBackup: server_images.py, shelve: server_shelve.py). Each is checked as Nova checks it (body
schema per microversion, policy, lock, vm_state and task_state, with Nova's 409s) and answered
as Nova's API answers it; the action then ends at once as Nova's compute service ends it when its
virt driver raises NotImplementedError (compute/unsupported.py). docs/servers.md lists, for
each, what the server shows afterwards.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    locked_as_invalid_state,
    policy_target,
    read_server,
)
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import preconditions, unsupported
from openkeel_compute.compute.unsupported import Ending
from openkeel_compute.model import states
from openkeel_compute.policies import server_actions as rules


def _fail(req, server_id: str, rule: str, action: str, ending: Ending, *, user: bool, values=None) -> dict:
    """Read the server, check the rule, then start the action and end it as ``ending`` says."""
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rule, policy_target(row, user=user))
        return unsupported.fail(conn, row, preconditions.precondition(action), actor, ending, values=values)


# --- password and crash dump ---------------------------------------------------------------------------

_PASSWORD_MESSAGE = "set_admin_password is not implemented by this driver or guest instance."


@operation(body={"2.0-": schema.change_password}, success=202, expected=(404, 409, 501))
@wsgi_path_params
def change_password(req, server_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.ADMIN_PASSWORD, policy_target(row, user=True))
        pre = preconditions.precondition("changePassword")
        with locked_as_invalid_state(row["uuid"], "changePassword"):
            pre.check(row, is_admin=actor.is_admin)
        running = row["power_state"] == states.power_state.RUNNING
        stopped = f"Failed to set admin password on {row['uuid']} because instance {row['uuid']} is not running"
        if running:
            ending = Ending("compute_set_admin_password", fault=(500, _PASSWORD_MESSAGE), message=_PASSWORD_MESSAGE)
        else:  # the compute service refuses before it asks the driver
            ending = Ending("compute_set_admin_password", fault=(409, stopped), message=stopped,
                            details="InstancePasswordSetFailed")
        with locked_as_invalid_state(row["uuid"], "changePassword"):
            unsupported.fail(conn, row, pre, actor, ending)
    if not running:
        raise faults.Conflict(stopped)
    # Nova's API answers the driver's NotImplementedError itself, after the compute service
    # recorded it (the action is kept)
    raise faults.Fault("Unable to set password on instance", 501)


@operation(versions="2.17-", body={"2.17-": schema.trigger_crash_dump}, success=202, expected=(400, 404, 409))
@wsgi_path_params
def trigger_crash_dump(req, server_id):
    _fail(req, server_id, rules.SERVERS % "trigger_crash_dump", "trigger_crash_dump",
          Ending("compute_trigger_crash_dump"), user=False)
    return Response(None)


