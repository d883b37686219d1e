"""A server's faults: recorded by the controller, the newest shown in the ERROR and DELETED views.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

from sqlalchemy import bindparam, insert, select
from sqlalchemy.engine import Connection

from openkeel_compute.db.models import INSTANCE_FAULTS, utcnow


def add_fault(conn: Connection, instance_uuid: str, *, code: int, message: str, details: str | None = None,
              host: str | None = None) -> None:
    """Record a fault; the message is cut to the column's 255 characters, as Nova does."""
    conn.execute(insert(INSTANCE_FAULTS), {
        "instance_uuid": instance_uuid, "code": code, "message": message[:255], "details": details,
        "host": host, "created_at": utcnow(), "deleted": 0})


_LATEST_FAULTS = (
    select(INSTANCE_FAULTS)
    .where(INSTANCE_FAULTS.c.instance_uuid.in_(bindparam("uuids", expanding=True)), INSTANCE_FAULTS.c.deleted == 0)
    .order_by(INSTANCE_FAULTS.c.instance_uuid, INSTANCE_FAULTS.c.id.desc())
)


def latest_faults(conn: Connection, instance_uuids: list[str]) -> dict[str, dict]:
    """The newest fault (highest id) of each server that has a live one, for the ERROR and
    DELETED views; a deleted server's faults went with it, as in Nova."""
    faults: dict[str, dict] = {}
    if not instance_uuids:
        return faults
    for row in conn.execute(_LATEST_FAULTS, {"uuids": list(instance_uuids)}).mappings():
        faults.setdefault(row["instance_uuid"], dict(row))
    return faults


def fault_view(fault: dict, *, is_admin: bool) -> dict:
    """The ``fault`` of a server body: details only when set, and for a 500 only to admins."""
    view = {"code": fault["code"], "created": fault["created_at"].strftime("%Y-%m-%dT%H:%M:%SZ"),
            "message": fault["message"]}
    if fault.get("details") and (is_admin or fault["code"] != 500):
        view["details"] = fault["details"]
    return view
