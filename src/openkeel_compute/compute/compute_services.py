"""The compute services as the API reads and writes them (table compute_services; the controller keeps
the nodes' side, controller/compute_services.py).

A service is up while it is not forced down and its last heartbeat (the last time the controller saw its
node Ready) is at most ``service_down_time`` seconds old, as Nova's database servicegroup driver decides.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, func, select, update

from openkeel_compute.db.models import COMPUTE_SERVICES, INSTANCES, MIGRATIONS, NODE_ZONES, utcnow

TABLE = COMPUTE_SERVICES
# A migration in one of these states still holds its hosts (Nova's MigrationList.get_in_progress_by_host_and_node).
_FINISHED = ("confirmed", "reverted", "error", "failed", "completed", "cancelled", "done")


def _naive(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value


def is_up(row: Any, down_time: int, now: dt.datetime | None = None) -> bool:
    if row.forced_down or row.last_seen_up is None:
        return False
    return abs((_naive(now or utcnow()) - _naive(row.last_seen_up)).total_seconds()) <= down_time


def updated_time(row: Any) -> dt.datetime | None:
    """Nova's servicegroup updated time: the newer of the record's update and its last heartbeat."""
    times = [_naive(t) for t in (row.updated_at, row.last_seen_up) if t is not None]
    return max(times) if times else None


def listed(conn, host: str | None = None, binary: str | None = None) -> list[Any]:
    """The services with their node's zone (``zone`` None: not labelled, or the node left)."""
    query = (select(TABLE, NODE_ZONES.c.zone).select_from(TABLE.outerjoin(NODE_ZONES, NODE_ZONES.c.node == TABLE.c.host))
             .order_by(TABLE.c.id))
    if host:
        query = query.where(TABLE.c.host == host)
    if binary:
        query = query.where(TABLE.c.binary == binary)
    return list(conn.execute(query))


def by_id(conn, service_id: str, *, uuid: bool) -> Any | None:
    column = TABLE.c.uuid if uuid else TABLE.c.id
    value: Any = service_id if uuid else int(service_id)
    if not uuid and not -2**31 <= value < 2**31:
        return None
    query = select(TABLE, NODE_ZONES.c.zone).select_from(
        TABLE.outerjoin(NODE_ZONES, NODE_ZONES.c.node == TABLE.c.host)).where(column == value)
    return conn.execute(query).first()


def by_host(conn, host: str) -> Any | None:
    return conn.execute(select(TABLE.c.id).where(TABLE.c.host == host)).first()


def set_fields(conn, host: str, values: dict[str, Any]) -> None:
    """Write an update; disabling or enabling asks the controller to cordon or uncordon the node."""
    values = dict(values, updated_at=utcnow())
    if "disabled" in values:
        values["cordon_pending"] = True
    conn.execute(update(TABLE).where(TABLE.c.host == host).values(**values))


def instances_on(conn, host: str) -> int:
    return int(conn.execute(select(func.count()).select_from(INSTANCES).where(
        INSTANCES.c.host == host, INSTANCES.c.deleted == 0)).scalar() or 0)


def migrations_on(conn, host: str) -> int:
    return int(conn.execute(select(func.count()).select_from(MIGRATIONS).where(
        (MIGRATIONS.c.source_compute == host) | (MIGRATIONS.c.dest_compute == host),
        MIGRATIONS.c.status.not_in(_FINISHED), MIGRATIONS.c.deleted == 0)).scalar() or 0)


def done_evacuations(conn, host: str) -> int:
    return int(conn.execute(select(func.count()).select_from(MIGRATIONS).where(
        MIGRATIONS.c.source_compute == host, MIGRATIONS.c.status == "done",
        MIGRATIONS.c.migration_type == "evacuation", MIGRATIONS.c.deleted == 0)).scalar() or 0)


def destroy(conn, service_id: int) -> None:
    conn.execute(delete(TABLE).where(TABLE.c.id == service_id))


# Nova's compute stats: a server counts for a host's current workload while it is being built or has
# one of these tasks (nova/compute/stats.py).
_IO_TASKS = ("resize_migrating", "rebuilding", "resize_prep", "image_snapshot", "image_backup", "rescuing",
             "unshelving", "shelving")


def usage(conn, hosts: list[str]) -> dict[str, dict[str, int]]:
    """Per host: running_vms, vcpus_used, memory_mb_used and local_gb_used of its servers (without the
    reserved amounts), and current_workload."""
    result = {h: {"running_vms": 0, "vcpus": 0, "memory_mb": 0, "local_gb": 0, "current_workload": 0}
              for h in hosts}
    if not hosts:
        return result
    rows = conn.execute(select(INSTANCES.c.host, INSTANCES.c.vcpus, INSTANCES.c.memory_mb, INSTANCES.c.root_gb,
                               INSTANCES.c.ephemeral_gb, INSTANCES.c.vm_state, INSTANCES.c.task_state)
                        .where(INSTANCES.c.host.in_(hosts), INSTANCES.c.deleted == 0))
    for row in rows:
        used = result[row.host]
        used["running_vms"] += 1
        used["vcpus"] += row.vcpus or 0
        used["memory_mb"] += row.memory_mb or 0
        used["local_gb"] += (row.root_gb or 0) + (row.ephemeral_gb or 0)
        if row.vm_state == "building" or row.task_state in _IO_TASKS:
            used["current_workload"] += 1
    return result


def servers_on(conn, hosts: list[str]) -> dict[str, list[dict[str, str]]]:
    """Per host: its servers as Nova's hypervisor views list them (instance name and uuid), oldest first."""
    result: dict[str, list[dict[str, str]]] = {h: [] for h in hosts}
    if not hosts:
        return result
    rows = conn.execute(select(INSTANCES.c.host, INSTANCES.c.id, INSTANCES.c.uuid, INSTANCES.c.vm_name)
                        .where(INSTANCES.c.host.in_(hosts), INSTANCES.c.deleted == 0).order_by(INSTANCES.c.id))
    for row in rows:
        result[row.host].append({"name": row.vm_name or f"instance-{row.id:08x}", "uuid": row.uuid})
    return result


def hosts(conn) -> set[str]:
    """The nodes that have a compute service."""
    return set(conn.execute(select(TABLE.c.host)).scalars())
