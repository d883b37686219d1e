"""POST /servers/{server_id}/action evacuate, as Nova 34.0.0 answers it (docs/operators.md, "Evacuate").

Nova's checks in its order: the server (404), the policy ``os_compute_api:os-evacuate`` (admin), before 2.14
``onSharedStorage`` (an ``adminPass`` with shared storage is 400), from 2.29 ``force`` without a ``host``
(400), the named host's compute service (404 "Compute host ... not found."), the server's own host (400),
the server's vm_state (ACTIVE, SHUTOFF or ERROR) and task (none; Nova's 500 on a task answered 409 as its
own state check words it), then the server's host's compute service: still up (not forced down and its
heartbeat recent) is 400 "Compute service of ... is still in use.". A locked server may be evacuated
(Nova does not check the lock). The answer is 200: before 2.14 ``{"adminPass": ...}`` (the one given,
or a generated one unless the disk is on shared storage), from 2.14 no body. From 2.95 the server ends
SHUTOFF on its new node (an ERROR one ACTIVE), as Nova's target state ``stopped``.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import actor_of, generated_password, read_server
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import compute_services, evacuation, preconditions
from openkeel_compute.model import states
from openkeel_compute.policies import server_actions as rules

_TRUE = {"1", "t", "true", "on", "y", "yes"}


def _flag(value) -> bool:
    """oslo's bool_from_string of a value the schema let through."""
    return value if isinstance(value, bool) else str(value).strip().lower() in _TRUE


def _password(req, body: dict) -> str | None:
    """The password the rebuilt server gets, as Nova's API decides it (None: none, the disk is kept)."""
    if req.version >= (2, 14):
        return body["adminPass"] if "adminPass" in body else generated_password()
    shared = _flag(body["onSharedStorage"])
    if "adminPass" in body:
        if shared:
            raise faults.BadRequest("admin password can't be changed on existing disk")
        return str(body["adminPass"])
    return None if shared else generated_password()


@operation(body={"2.0-2.13": schema.evacuate, "2.14-2.28": schema.evacuate_v214,
                 "2.29-2.67": schema.evacuate_v229, "2.68-": schema.evacuate_v214},
           expected=(400, 403, 404, 409))
@wsgi_path_params
def evacuate(req, server_id):
    body = req.body["evacuate"]
    host = body.get("host")
    actor = actor_of(req)
    conf = common.services(req).conf
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.EVACUATE, {"user_id": row["user_id"], "project_id": row["project_id"]})
        target_state = states.STOPPED if req.version >= (2, 95) else None
        force = False
        if req.version >= (2, 29):
            force = _flag(body.get("force", False))
            if force and not host:
                raise faults.BadRequest("Can't force to a non-provided destination")
        password = _password(req, body)
        if host is not None and not compute_services.listed(conn, host=host, binary="nova-compute"):
            raise faults.NotFound(f"Compute host {host} not found.")
        if row["host"] == host:
            raise faults.BadRequest("The target host can't be the same one.")
        with common.domain_errors():
            preconditions.check("evacuate", row, is_admin=actor.is_admin)
        source = compute_services.listed(conn, host=row["host"], binary="nova-compute") if row["host"] else []
        if not source:  # Nova's ComputeHostNotFound, which its API lets through as a 500
            raise faults.NotFound(f"Compute host {row['host']} could not be found.")
        if compute_services.is_up(source[0], conf.service_down_time):
            raise faults.BadRequest(f"Compute service of {row['host']} is still in use.")
        with common.domain_errors():
            evacuation.start(conn, row, actor, host=host, force=force, target_state=target_state,
                             password=password)
    if req.version < (2, 14):
        return {"adminPass": password}
    return Response(None, status=200)
