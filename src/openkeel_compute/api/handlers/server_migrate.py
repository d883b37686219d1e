"""POST /servers/{server_id}/action: migrate (a cold migration), as Nova 34.0.0 answers it.

migrate (202; 2.56 ``host``): policy ``os_compute_api:os-migrate-server:migrate`` (``migrate:host`` with a
host) on the server's project; the lock, vm_state active or stopped with no task, a host, its compute
service up (409 "Service is unavailable at this time."); a named host not the server's own (400 "Cannot
migrate to the host where the server exists.") and a known compute service (400 "Compute host <host> could
not be found."); then one transaction records it (compute/resize.py ``start_migration``) and asks the
controller. As in Nova the answer comes before a destination is chosen: a migration no node can take ends
later (the server back in its state, the migration in ``error``, the events' "No valid host was found.").
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import actor_of, policy_target, read_server
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import compute_services, live_migration, preconditions, resize, unsupported
from openkeel_compute.compute.unsupported import Ending
from openkeel_compute.model import events
from openkeel_compute.policies import server_actions as rules


def check_source_up(req, conn, row: dict) -> None:
    """Nova's check_instance_host(check_is_up=True): the server's compute service must be up (or only
    disabled); the hostname is not told to the caller."""
    service = compute_services.listed(conn, host=row["host"], binary="nova-compute") if row["host"] else []
    if service and not compute_services.is_up(service[0], common.services(req).conf.service_down_time):
        raise faults.Conflict("Service is unavailable at this time.")


def check_destination(conn, row: dict, host: str | None) -> None:
    """A named destination: not the server's own host, and a compute service of that name."""
    if host is None:
        return
    if host == row["host"]:
        raise faults.BadRequest("Cannot migrate to the host where the server exists.")
    if not compute_services.listed(conn, host=host, binary="nova-compute"):
        raise faults.BadRequest(f"Compute host {host} could not be found.")


@operation(body={"2.56-": schema.migrate}, success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def migrate(req, server_id):
    options = req.body.get("migrate") if req.version >= (2, 56) and isinstance(req.body, dict) else None
    host = (options or {}).get("host")
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.MIGRATE % ("migrate:host" if host else "migrate"), policy_target(row, user=False))
        preconditions.check("migrate", row, is_admin=actor.is_admin)
        check_source_up(req, conn, row)
        check_destination(conn, row, host)
        resize.start_migration(conn, row, actor, host=host)
    return Response(None)


def _flag(value) -> bool:
    """oslo's bool_from_string(strict=True) on a value the schema let through."""
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "t", "true", "on", "y", "yes")


@operation(body={"2.0-2.24": schema.migrate_live, "2.25-2.29": schema.migrate_live_v225,
                 "2.30-2.67": schema.migrate_live_v230, "2.68-": schema.migrate_live_v225},
           success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def migrate_live(req, server_id):
    """os-migrateLive: Nova's checks in Nova's order (policy, force without host, lock and state, the source's
    service, the named host); before 2.34 the API waits for the conductor, so a named host that is the
    server's own is refused here (the action's conductor event failed, the server as it was); from 2.34 it
    is accepted and the controller ends it (migration ``error``). The controller's live_migrate step moves
    the guest with a VirtualMachineInstanceMigration toward the claimed node."""
    options = req.body["os-migrateLive"]
    host = options["host"]
    actor = actor_of(req)
    synchronous = req.version < (2, 34)
    block = options.get("block_migration")
    block_migration = None if block == "auto" else _flag(block)
    force = _flag(options.get("force", False)) if (2, 30) <= req.version < (2, 68) else False
    refusal = None
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.MIGRATE % ("migrate_live:host" if host else "migrate_live"),
                   policy_target(row, user=False))
        if force and not host:
            raise faults.BadRequest("Can't force to a non-provided destination")
        pre = preconditions.precondition("os-migrateLive")
        pre.check(row, is_admin=actor.is_admin)
        check_source_up(req, conn, row)
        if host and not compute_services.listed(conn, host=host, binary="nova-compute"):
            raise faults.BadRequest(f"Compute host {host} could not be found.")
        conductor = events.CONDUCTOR_MIGRATE if synchronous else events.LIVE_MIGRATE
        if synchronous and host and host == row["host"]:
            refusal = (f"Unable to migrate instance ({row['uuid']}) to current host ({host})." if force
                       else "No valid host was found. There are not enough hosts available.")
            ending = Ending(conductor, fault=(400 if force else 500, refusal), message=refusal, details=refusal)
            unsupported.fail(conn, row, pre, actor, ending, instance_action="live-migration")
            live_migration.record(conn, row, actor, "error", dest=host if force else None)
        else:
            live_migration.start(conn, row, actor, host=host, block_migration=block_migration,
                                 conductor_event=conductor, force=force)
    if refusal is not None:
        raise faults.BadRequest(refusal)
    return Response(None)
