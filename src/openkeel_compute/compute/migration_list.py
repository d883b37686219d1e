"""The ``migrations`` table as GET /os-migrations lists it: Nova's filters, order, paging and view.

Before 2.59 the rows come in the order they were written; from 2.59 newest first (created_at, then
id, both descending) with a marker (a migration uuid) and a limit. Hidden migrations are never shown.
The view is Nova's Migration object without its internal fields (deleted, deleted_at, hidden,
cross_cell_move, the memory/disk progress counters), with migration_type and links from 2.23 (links
only for a live migration in progress), uuid from 2.59, user_id and project_id from 2.80, and the
hosts (null for callers the ``index:host`` policy does not allow, as Nova nulls them).
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors
from openkeel_compute.db.models import MIGRATIONS

M = MIGRATIONS.c
_HOSTS = ("source_compute", "dest_compute", "dest_host", "source_node", "dest_node")
_FIELDS = ("created_at", "dest_compute", "dest_host", "dest_node", "id", "instance_uuid", "new_instance_type_id",
           "old_instance_type_id", "source_compute", "source_node", "status", "updated_at")


class MarkerNotFound(errors.Invalid):
    def __init__(self, marker: str) -> None:
        super().__init__(f"Marker {marker} could not be found.")


def _where(filters: dict) -> list:
    where = [M.deleted == 0, or_(M.hidden.is_(False), M.hidden.is_(None))]
    for name in ("instance_uuid", "source_compute", "migration_type", "user_id", "project_id"):
        if name in filters:
            where.append(getattr(M, name) == filters[name])
    if "status" in filters:
        where.append(M.status == filters["status"])
    if "host" in filters:
        where.append(or_(M.source_compute == filters["host"], M.dest_compute == filters["host"]))
    if "changes-since" in filters:
        where.append(M.updated_at >= filters["changes-since"])
    if "changes-before" in filters:
        where.append(M.updated_at <= filters["changes-before"])
    return where


def query(conn: Connection, filters: dict, *, paged: bool, limit: int | None = None,
          marker: str | None = None) -> list[dict]:
    """The migrations ``filters`` select (the query's names), as Nova orders and pages them."""
    where = _where(filters)
    if not paged:
        return [dict(r._mapping) for r in conn.execute(select(MIGRATIONS).where(*where).order_by(M.id))]
    if marker is not None:
        found = conn.execute(select(M.created_at, M.id).where(M.uuid == marker, M.deleted == 0)).first()
        if found is None:
            raise MarkerNotFound(marker)
        created, ident = found
        where.append(or_(M.created_at < created, and_(M.created_at == created, M.id < ident)))
    statement = select(MIGRATIONS).where(*where).order_by(M.created_at.desc(), M.id.desc())
    if limit is not None:
        statement = statement.limit(limit)
    return [dict(r._mapping) for r in conn.execute(statement)]


def _time(value):
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%S.%f")


_ORDER = ("id", "uuid", "source_compute", "dest_compute", "source_node", "dest_node", "dest_host",
          "old_instance_type_id", "new_instance_type_id", "instance_uuid", "status", "migration_type", "user_id",
          "project_id", "created_at", "updated_at")


def view(row: dict, *, links: bool, uuid: bool, user_project: bool, host: bool) -> dict:
    """One migration as Nova shows it at the caller's microversion, in Nova's key order."""
    shown = set(_FIELDS)
    if links:
        shown.add("migration_type")  # links: added by the API for a live migration in progress
    if uuid:
        shown.add("uuid")
    if user_project:
        shown.update(("user_id", "project_id"))
    times = {"created_at": _time(row["created_at"]), "updated_at": _time(row["updated_at"])}
    if not host:  # Nova keeps the keys and nulls them (a project manager's list; Tempest's schema wants them)
        times.update(dict.fromkeys(_HOSTS))
    return {name: times.get(name, row[name]) for name in _ORDER if name in shown}
iso = _time
