"""An evacuation as Nova keeps it in the database (no HTTP, no Kubernetes).

Nova's evacuate rebuilds a server whose host's compute service is down on another host: the API moves the
server to task ``rebuilding``, records the instance action ``evacuate`` and a ``migrations`` row of type
``evacuation`` in status ``accepted`` (from the server's host; to the requested host, if one was named),
and asks the controller (outbox ``evacuate``). The controller claims the server's resources on the target
(``pre-migrating``), makes the server there and ends the migration ``done`` (or ``failed`` / ``error``).
When the source's service is up again, its evacuated servers' allocations on the source are given back
and the migration becomes ``completed``, as Nova's compute does when it starts
(``_destroy_evacuated_instances``).
"""

from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute.instances import cas, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.compute.preconditions import precondition
from openkeel_compute.db.models import COMPUTE_SERVICES, INSTANCES, MIGRATIONS, utcnow
from openkeel_compute.model import operations
from openkeel_compute.notifications import server_events

M = MIGRATIONS.c
TYPE = "evacuation"


def start(conn: Connection, row: dict, actor: Actor, *, host: str | None, force: bool,
          target_state: str | None, password: str | None) -> str:
    """Record an accepted evacuation of ``row``: task ``rebuilding`` (compare-and-swap: 409 when another
    action won), the action ``evacuate``, the migration ``accepted``, the outbox row. Returns the
    migration's uuid."""
    checked = cas.begin_action(conn, row, precondition("evacuate"), actor)
    migration = str(uuidlib.uuid4())
    conn.execute(insert(MIGRATIONS).values(
        uuid=migration, source_compute=checked["host"], source_node=checked["node"], dest_compute=host,
        dest_node=None, dest_host=None, old_instance_type_id=None, new_instance_type_id=None,
        instance_uuid=checked["uuid"], migration_type=TYPE, hidden=False, status="accepted",
        cross_cell_move=False, user_id=actor.user_id, project_id=actor.project_id, created_at=utcnow(),
        deleted=0))
    updates.outbox(conn, checked["uuid"], operations.EVACUATE, actor, migration=migration, host=host,
                   force=force, target_state=target_state, old_vm_state=checked["vm_state"],
                   admin_password_set=password is not None)
    server_events.api_action(conn, checked["uuid"], "evacuate", actor)
    return migration


def migration(conn: Connection, migration_uuid: str) -> dict | None:
    row = conn.execute(select(MIGRATIONS).where(M.uuid == migration_uuid, M.deleted == 0)).first()
    return dict(row._mapping) if row is not None else None


def move(conn: Connection, migration_uuid: str, status: str, *, expected: str | tuple[str, ...] | None = None,
         **values) -> bool:
    """Set the evacuation's status (compare-and-swap on ``expected``); whether it moved."""
    where = [M.uuid == migration_uuid, M.deleted == 0]
    if expected is not None:
        where.append(M.status.in_((expected,) if isinstance(expected, str) else expected))
    return conn.execute(update(MIGRATIONS).where(*where).values(status=status, updated_at=utcnow(),
                                                                **values)).rowcount == 1


def host_ip(conn: Connection, host: str) -> str | None:
    """The node's InternalIP, as Nova's migration ``dest_host`` is the destination's ``my_ip``."""
    return conn.execute(select(COMPUTE_SERVICES.c.host_ip).where(COMPUTE_SERVICES.c.host == host)).scalar()


def close_of_deleted(conn: Connection) -> int:
    """The evacuations still under way of servers deleted meanwhile become ``failed`` (as Nova's compute
    ends a rebuild whose instance went); returns how many. Left open, they would hold their hosts (a
    compute service with migrations in progress cannot be deleted)."""
    gone = select(INSTANCES.c.uuid).where(INSTANCES.c.deleted != 0).scalar_subquery()
    return conn.execute(update(MIGRATIONS).where(
        M.migration_type == TYPE, M.status.in_(("accepted", "pre-migrating")), M.deleted == 0,
        M.instance_uuid.in_(gone)).values(status="failed", updated_at=utcnow())).rowcount


def done(conn: Connection) -> list[dict]:
    """The evacuations that are over on their target (``done``) and still hold their source's part of the
    allocation: what a source back in the cluster gives back."""
    return [dict(r._mapping) for r in conn.execute(select(MIGRATIONS).where(
        M.migration_type == TYPE, M.status == "done", M.deleted == 0).order_by(M.id))]
