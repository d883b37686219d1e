"""The networks and ports a server was booted with on Neutron (instance_network_requests), in the
order asked: what the controller creates or binds ports for, and what it deletes or unbinds with
the server."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, func, insert, select, update

from openkeel_compute.db.models import INSTANCE_NETWORK_REQUESTS, utcnow

_T = INSTANCE_NETWORK_REQUESTS
FIELDS = ("position", "network_id", "port_id", "fixed_ip", "tag", "port_created")


def record(conn: Connection, instance_uuid: str, requests: Iterable[Mapping]) -> None:
    now = utcnow()
    rows = [{"instance_uuid": instance_uuid, "position": r["position"], "network_id": r.get("network_id"),
             "port_id": r.get("port_id"), "fixed_ip": r.get("fixed_ip"), "tag": r.get("tag"),
             "port_created": False, "created_at": now, "deleted": 0} for r in requests]
    if rows:
        conn.execute(insert(_T), rows)


def of(conn: Connection, instance_uuid: str) -> list[dict]:
    query = (select(*(_T.c[name] for name in FIELDS))
             .where(_T.c.instance_uuid == instance_uuid, _T.c.deleted == 0).order_by(_T.c.position))
    return [dict(row._mapping) for row in conn.execute(query)]


def set_port(conn: Connection, instance_uuid: str, position: int, port_id: str | None, created: bool) -> None:
    """The port a request became (``created``: OpenKeel made it, deleted with the server)."""
    conn.execute(update(_T).where(_T.c.instance_uuid == instance_uuid, _T.c.position == position, _T.c.deleted == 0)
                 .values(port_id=port_id, port_created=created))


def add(conn: Connection, instance_uuid: str, request: Mapping) -> int:
    """One more interface of the server (an attach), after its others; its position."""
    last = conn.execute(select(func.max(_T.c.position)).where(_T.c.instance_uuid == instance_uuid,
                                                              _T.c.deleted == 0)).scalar()
    position = 0 if last is None else int(last) + 1
    conn.execute(insert(_T), [{"instance_uuid": instance_uuid, "position": position,
                               "network_id": request.get("network_id"), "port_id": request.get("port_id"),
                               "fixed_ip": request.get("fixed_ip"), "tag": request.get("tag"),
                               "port_created": bool(request.get("port_created")), "created_at": utcnow(),
                               "deleted": 0}])
    return position


def forget(conn: Connection, instance_uuid: str, port_id: str) -> None:
    """The port is no longer the server's (detached, or an attach given up)."""
    conn.execute(update(_T).where(_T.c.instance_uuid == instance_uuid, _T.c.port_id == port_id, _T.c.deleted == 0)
                 .values(deleted=_T.c.id, deleted_at=utcnow()))
