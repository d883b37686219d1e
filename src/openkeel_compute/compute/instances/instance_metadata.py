"""A server's metadata, saved as Nova saves it.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import insert, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute.instances.base import I
from openkeel_compute.compute.instances.store import metadata_of
from openkeel_compute.db.models import INSTANCE_METADATA, INSTANCES, utcnow


def delete_metadata_item(conn: Connection, instance_uuid: str, key: str) -> bool:
    """Soft-delete one live metadata item; False when there was none (of parallel deletes, one wins)."""
    table = INSTANCE_METADATA
    live = [table.c.instance_uuid == instance_uuid, table.c.deleted == 0, table.c.key == key]
    return conn.execute(update(table).where(*live).values(deleted=table.c.id, deleted_at=utcnow())).rowcount == 1


def set_metadata(conn: Connection, instance_uuid: str, metadata: dict[str, str]) -> None:
    """Make the server's live metadata exactly ``metadata`` (changed values rewritten, missing keys
    soft-deleted), as Nova saves it."""
    current = metadata_of(conn, instance_uuid)
    now = utcnow()
    table = INSTANCE_METADATA
    live = [table.c.instance_uuid == instance_uuid, table.c.deleted == 0]
    gone = [k for k in current if k not in metadata]
    if gone:
        conn.execute(update(table).where(*live, table.c.key.in_(gone)).values(deleted=table.c.id, deleted_at=now))
    for key, value in metadata.items():
        if key in current and current[key] != value:  # changed in place: the item keeps its place
            conn.execute(update(table).where(*live, table.c.key == key).values(value=value, updated_at=now))
    new = [{"instance_uuid": instance_uuid, "key": k, "value": v, "created_at": now, "deleted": 0}
           for k, v in metadata.items() if k not in current]
    if new:
        conn.execute(insert(table), new)
    conn.execute(update(INSTANCES).where(I.uuid == instance_uuid).values(updated_at=now))
