"""One system metadata item of a server (what the controller keeps to finish a task).

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from openkeel_compute.db.models import INSTANCE_SYSTEM_METADATA, utcnow


def system_metadata_item(conn: Connection, instance_uuid: str, key: str) -> str | None:
    table = INSTANCE_SYSTEM_METADATA
    return conn.execute(select(table.c.value).where(table.c.instance_uuid == instance_uuid, table.c.key == key,
                                                    table.c.deleted == 0)).scalar()


def set_system_metadata_item(conn: Connection, instance_uuid: str, key: str, value: str | None) -> None:
    """Set (or, with None, soft-delete) one system metadata item of a server."""
    table = INSTANCE_SYSTEM_METADATA
    live = (table.c.instance_uuid == instance_uuid, table.c.key == key, table.c.deleted == 0)
    now = utcnow()
    if value is None:
        conn.execute(update(table).where(*live).values(deleted=table.c.id, deleted_at=now))
    elif conn.execute(update(table).where(*live).values(value=value, updated_at=now)).rowcount == 0:
        conn.execute(insert(table).values(instance_uuid=instance_uuid, key=key, value=value, created_at=now,
                                          deleted=0))
