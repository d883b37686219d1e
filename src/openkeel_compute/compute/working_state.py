"""The controller's working state of a server (table ``instance_controller_state``, migration 0009).

What a restarted controller needs to carry on, kept apart from Nova's system metadata: a value here is
text of any length (a resize's matchers and revisions as JSON, the nodes a build was tried on, whose
names may each take 253 characters), where system metadata's values stop at 255 characters on every
engine. The keys are ``model.sysmeta.WORKING_STATE``'s.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, insert, select, update

from openkeel_compute.db.models import INSTANCE_CONTROLLER_STATE, utcnow
from openkeel_compute.model.sysmeta import WORKING_STATE

T = INSTANCE_CONTROLLER_STATE


def _check(key: str) -> None:
    if key not in WORKING_STATE:
        raise ValueError(f"{key!r} is not a key of the controller's working state")


def get(conn: Connection, instance_uuid: str, key: str) -> str | None:
    _check(key)
    return conn.execute(select(T.c.value).where(T.c.instance_uuid == instance_uuid, T.c.key == key)).scalar()


def put(conn: Connection, instance_uuid: str, key: str, value: str | None) -> None:
    """Set one item (None: remove it)."""
    _check(key)
    where = (T.c.instance_uuid == instance_uuid, T.c.key == key)
    if value is None:
        conn.execute(delete(T).where(*where))
    elif conn.execute(update(T).where(*where).values(value=value, updated_at=utcnow())).rowcount == 0:
        conn.execute(insert(T).values(instance_uuid=instance_uuid, key=key, value=value, created_at=utcnow()))


def of(conn: Connection, instance_uuid: str) -> dict[str, str]:
    """Every item of the server."""
    return dict(conn.execute(select(T.c.key, T.c.value).where(T.c.instance_uuid == instance_uuid)).all())


def by_instance(conn: Connection, instance_uuids: list[str]) -> dict[str, dict[str, str]]:
    """Every item of several servers in one statement (servers without any are not in it)."""
    found: dict[str, dict[str, str]] = {}
    if instance_uuids:
        for uuid, key, value in conn.execute(select(T.c.instance_uuid, T.c.key, T.c.value)
                                             .where(T.c.instance_uuid.in_(instance_uuids))):
            found.setdefault(uuid, {})[key] = value
    return found


def forget(conn: Connection, instance_uuid: str) -> None:
    """Remove the server's working state (its delete completed)."""
    conn.execute(delete(T).where(T.c.instance_uuid == instance_uuid))
