"""The block devices of each server (block_device_mapping, as Nova's table): written by the API at
boot and attach, read by os-volume_attachments and the controller, soft-deleted with the server."""

from __future__ import annotations

import json
import uuid as uuidlib
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, insert, select, update

from openkeel_compute.db.models import BLOCK_DEVICE_MAPPING, utcnow

_T = BLOCK_DEVICE_MAPPING
FIELDS = ("uuid", "source_type", "destination_type", "guest_format", "device_type", "disk_bus", "boot_index",
          "device_name", "delete_on_termination", "snapshot_id", "volume_id", "volume_size", "image_id",
          "no_device", "connection_info", "tag", "attachment_id", "volume_type")


def _row(instance_uuid: str, bdm: Mapping[str, Any], now) -> dict[str, Any]:
    row: dict[str, Any] = {name: bdm.get(name) for name in FIELDS}
    row.update(uuid=bdm.get("uuid") or str(uuidlib.uuid4()), instance_uuid=instance_uuid,
               delete_on_termination=bool(bdm.get("delete_on_termination")), created_at=now, deleted=0)
    if isinstance(row["connection_info"], dict):
        row["connection_info"] = json.dumps(row["connection_info"])
    return row


def record(conn: Connection, instance_uuid: str, bdms: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows written (each with its new uuid)."""
    now = utcnow()
    rows = [_row(instance_uuid, bdm, now) for bdm in bdms]
    if rows:
        conn.execute(insert(_T), rows)
    return rows


def of(conn: Connection, instance_uuid: str) -> list[dict[str, Any]]:
    """The server's live block devices, in the order written."""
    query = select(_T.c.id, _T.c.instance_uuid, _T.c.created_at, *(_T.c[name] for name in FIELDS)).where(
        _T.c.instance_uuid == instance_uuid, _T.c.deleted == 0).order_by(_T.c.id)
    return [dict(row._mapping) for row in conn.execute(query)]


def volumes_of(conn: Connection, instance_uuid: str) -> list[dict[str, Any]]:
    """The server's volumes (destination volume with a volume id), as os-volume_attachments lists them."""
    return [row for row in of(conn, instance_uuid) if row["destination_type"] == "volume" and row["volume_id"]]


def attached_by_instance(conn: Connection, instance_uuids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Server uuid -> its live block devices that name a volume (volume id, delete_on_termination), in the
    order written: what a server's body lists as ``volumes_attached``, for a page of servers in one query."""
    found: dict[str, list[dict[str, Any]]] = {}
    if not instance_uuids:
        return found
    query = select(_T.c.instance_uuid, _T.c.volume_id, _T.c.delete_on_termination).where(
        _T.c.instance_uuid.in_(instance_uuids), _T.c.deleted == 0, _T.c.volume_id.is_not(None),
        _T.c.volume_id != "").order_by(_T.c.id)
    for row in conn.execute(query):
        found.setdefault(row.instance_uuid, []).append(
            {"volume_id": row.volume_id, "delete_on_termination": row.delete_on_termination})
    return found


def delete_all(conn: Connection, instance_uuid: str) -> None:
    """Soft-delete the server's rows (``deleted`` takes each row's id, as Nova's soft delete)."""
    conn.execute(update(_T).where(_T.c.instance_uuid == instance_uuid, _T.c.deleted == 0)
                 .values(deleted=_T.c.id, deleted_at=utcnow()))


def save_connection(conn: Connection, bdm_uuid: str, connection_info: Mapping[str, Any] | None) -> None:
    """What Cinder answered once the attachment had the node's connector (None: forgotten)."""
    conn.execute(update(_T).where(_T.c.uuid == bdm_uuid, _T.c.deleted == 0).values(
        connection_info=json.dumps(connection_info) if connection_info is not None else None, updated_at=utcnow()))


def by_volume(conn: Connection, volume_id: str) -> list[dict[str, Any]]:
    """The live rows naming the volume, of any server (Nova's ``BlockDeviceMapping.get_by_volume``
    reads them to find the volume's server; more than one is a multiattach volume)."""
    query = select(_T.c.id, _T.c.instance_uuid, *(_T.c[name] for name in FIELDS)).where(
        _T.c.volume_id == volume_id, _T.c.deleted == 0).order_by(_T.c.id)
    return [dict(row._mapping) for row in conn.execute(query)]


def save_volume(conn: Connection, bdm_uuid: str, **values: Any) -> None:
    """A build's own volume recorded as it goes (``volume_id``, ``volume_size``, ``attachment_id``; None
    forgets one): a restarted controller carries on from it, a delete gives back what it names."""
    unknown = set(values) - {"volume_id", "volume_size", "attachment_id", "connection_info", "delete_on_termination"}
    if unknown:
        raise ValueError(f"not a volume field: {sorted(unknown)}")
    conn.execute(update(_T).where(_T.c.uuid == bdm_uuid, _T.c.deleted == 0).values(**values, updated_at=utcnow()))


def of_volume(conn: Connection, instance_uuid: str, volume_id: str) -> dict[str, Any] | None:
    """The server's row of a volume (Nova's get_by_volume_and_instance), None when it has none."""
    return next((row for row in of(conn, instance_uuid) if row["volume_id"] == volume_id), None)


def delete_one(conn: Connection, bdm_uuid: str) -> None:
    """Soft-delete one row (a detached volume's, an attach that failed)."""
    conn.execute(update(_T).where(_T.c.uuid == bdm_uuid, _T.c.deleted == 0)
                 .values(deleted=_T.c.id, deleted_at=utcnow()))


def set_fields(conn: Connection, bdm_uuid: str, **values: Any) -> None:
    """Columns of one live row (``attachment_id``, ``delete_on_termination``, ...)."""
    conn.execute(update(_T).where(_T.c.uuid == bdm_uuid, _T.c.deleted == 0).values(updated_at=utcnow(), **values))

