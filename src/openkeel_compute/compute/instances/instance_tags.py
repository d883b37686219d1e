"""A server's tags.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors
from openkeel_compute.compute.instances.store import tags_of
from openkeel_compute.db.models import TAGS

MAX_TAGS = 50


def add_tag(conn: Connection, instance_uuid: str, tag: str) -> bool:
    """Add one tag; False when the server already has it."""
    if tag in tags_of(conn, instance_uuid):
        return False
    conn.execute(insert(TAGS), {"resource_id": instance_uuid, "tag": tag})
    return True


def set_tags(conn: Connection, instance_uuid: str, tags: list[str]) -> list[str]:
    """Replace all tags (duplicates kept once); returns them as Nova lists them."""
    conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid))
    unique = list(dict.fromkeys(tags))
    if unique:
        conn.execute(insert(TAGS), [{"resource_id": instance_uuid, "tag": t} for t in unique])
    return tags_of(conn, instance_uuid)


def delete_tag(conn: Connection, instance_uuid: str, tag: str) -> None:
    result = conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid, TAGS.c.tag == tag))
    if result.rowcount != 1:
        raise errors.NotFound(f"Instance {instance_uuid} has no tag '{tag}'")


def delete_tags(conn: Connection, instance_uuid: str) -> None:
    conn.execute(TAGS.delete().where(TAGS.c.resource_id == instance_uuid))
