"""Events other services send about servers (POST /os-server-external-events): Neutron's
network-changed and network-vif-plugged/-unplugged/-deleted, Cinder's volume-extended and
volume-reimaged, Ironic's power-update, Cyborg's accelerator-request-bound. The API records the
ones it accepts (instance_external_events); the controller consumes them (``pending``, then
``handled``): a plugged port releases a build's wait, a deleted port's interface is dropped, a
changed port's addresses are read again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, insert, select, update

from openkeel_compute.db.models import INSTANCE_EXTERNAL_EVENTS, INSTANCES, utcnow

_E = INSTANCE_EXTERNAL_EVENTS


def servers(conn: Connection, uuids: Iterable[str]) -> dict[str, str | None]:
    """{uuid: host} of the live servers among ``uuids`` (a deleted server is unknown, as in Nova)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return {}
    query = select(INSTANCES.c.uuid, INSTANCES.c.host).where(INSTANCES.c.uuid.in_(wanted), INSTANCES.c.deleted == 0)
    return {row.uuid: row.host for row in conn.execute(query)}


def record(conn: Connection, events: Iterable[Mapping]) -> None:
    """Keep accepted events: each has instance_uuid, name, status, tag (or None) and host."""
    now = utcnow()
    rows = [{"instance_uuid": e["instance_uuid"], "name": e["name"], "status": e["status"], "tag": e.get("tag"),
             "host": e.get("host"), "created_at": now} for e in events]
    if rows:
        conn.execute(insert(_E), rows)


def pending(conn: Connection, instance_uuid: str | None = None, limit: int = 500,
            names: Iterable[str] | None = None) -> list[dict]:
    """Events not handled yet, oldest first (of one server, or of all; of the ``names`` given, or all)."""
    query = select(_E.c.id, _E.c.instance_uuid, _E.c.name, _E.c.status, _E.c.tag, _E.c.host, _E.c.created_at).where(
        _E.c.handled_at.is_(None))
    if names is not None:
        query = query.where(_E.c.name.in_(sorted(set(names))))
    if instance_uuid is not None:
        query = query.where(_E.c.instance_uuid == instance_uuid)
    return [dict(row._mapping) for row in conn.execute(query.order_by(_E.c.id).limit(limit))]


def handled(conn: Connection, event_ids: Iterable[int]) -> None:
    ids = list(event_ids)
    if ids:
        conn.execute(update(_E).where(_E.c.id.in_(ids)).values(handled_at=utcnow()))
