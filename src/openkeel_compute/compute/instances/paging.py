"""A page of a server list (sort keys, marker, limit) and its servers' metadata and tags in one statement.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors
from openkeel_compute.compute.instances.base import I, first_row, row_dicts
from openkeel_compute.db.models import INSTANCE_METADATA, INSTANCE_SYSTEM_METADATA, INSTANCES, TAGS


def list_page(conn: Connection, where, *, sort_keys: list[str], sort_dirs: list[str], limit: int | None = None,
              marker: str | None = None, columns: tuple | None = None) -> list[dict]:
    """One page of servers matching ``where``: ordered by ``sort_keys`` / ``sort_dirs`` (each an
    instances column, with created_at and id added last when missing, in the first direction, as
    Nova does), starting after the server ``marker`` (any server, deleted too; an unknown one is
    Nova's 400 "marker [...] not found"). ``columns``: only these (default: every column)."""
    if limit == 0:
        return []
    found = None
    if marker is not None:  # checked even when nothing can match, as Nova looks the marker up first
        found = first_row(conn.execute(select(INSTANCES).where(I.uuid == marker)))
        if found is None:
            raise errors.Invalid(f"marker [{marker}] not found")
    if where is None:
        return []
    keys, dirs = list(sort_keys), list(sort_dirs)
    for default in ("created_at", "id"):
        if default not in keys:
            keys.append(default)
            dirs.append(dirs[0] if dirs else "asc")
    while len(dirs) < len(keys):
        dirs.append(dirs[0])
    query = (select(*columns) if columns else select(INSTANCES)).where(where)
    if found is not None:
        query = query.where(_after(found, keys, dirs))
    order = []
    for key, direction in zip(keys, dirs, strict=True):
        column = INSTANCES.c[key]
        # NULL sorts lowest, on every engine (as on MySQL, Nova's engine, and SQLite; PostgreSQL
        # needs telling, and MariaDB has no NULLS FIRST)
        if conn.dialect.name == "postgresql":
            order.append(column.asc().nulls_first() if direction == "asc" else column.desc().nulls_last())
        else:
            order.append(column.asc() if direction == "asc" else column.desc())
    query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return row_dicts(conn.execute(query))


def _after(marker: dict, keys: list[str], dirs: list[str]):
    """Rows strictly after ``marker`` in the order of ``keys`` / ``dirs``, NULL the lowest value."""

    def beyond(column, value, direction):
        if direction == "asc":
            return column.is_not(None) if value is None else column > value
        return and_(False) if value is None else or_(column < value, column.is_(None))

    def same(column, value):
        return column.is_(None) if value is None else column == value

    either = []
    for i, (key, direction) in enumerate(zip(keys, dirs, strict=True)):
        equal = [same(INSTANCES.c[k], marker[k]) for k in keys[:i]]
        either.append(and_(*equal, beyond(INSTANCES.c[key], marker[key], direction)))
    return or_(*either)


def metadata_by_instance(conn: Connection, instance_uuids: list[str], *, system: bool = False
                         ) -> dict[str, dict[str, str]]:
    """The live metadata (or system metadata) of several servers in one statement."""
    table = INSTANCE_SYSTEM_METADATA if system else INSTANCE_METADATA
    result: dict[str, dict[str, str]] = {}
    if not instance_uuids:
        return result
    query = (select(table.c.instance_uuid, table.c.key, table.c.value)
             .where(table.c.instance_uuid.in_(instance_uuids), table.c.deleted == 0).order_by(table.c.id))
    for uuid, key, value in conn.execute(query):
        result.setdefault(uuid, {})[key] = value
    return result


def tags_by_instance(conn: Connection, instance_uuids: list[str]) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    if not instance_uuids:
        return result
    query = select(TAGS.c.resource_id, TAGS.c.tag).where(TAGS.c.resource_id.in_(instance_uuids)).order_by(TAGS.c.tag)
    for uuid, tag in conn.execute(query):
        result.setdefault(uuid, []).append(tag)
    return result
