"""Create and read one server's row: the frozen flavor copy, its metadata, tags and status.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""

from __future__ import annotations

import uuid as uuidlib

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors, flavor_copy, names
from openkeel_compute.compute.instances.base import Actor, I, first_row
from openkeel_compute.compute.instances.instance_actions import start_action
from openkeel_compute.db.models import INSTANCE_METADATA, INSTANCE_SYSTEM_METADATA, INSTANCES, TAGS, utcnow
from openkeel_compute.model import states


def create(conn: Connection, *, actor: Actor, flavor: dict, extra_specs: dict[str, str],
           display_name: str, uuid: str | None = None, metadata: dict[str, str] | None = None,
           system_metadata: dict[str, str] | None = None, tags: list[str] | None = None,
           **columns) -> dict:
    """Insert a server in BUILD (vm_state building, task_state scheduling, power_state
    NOSTATE) with its frozen flavor copy, metadata and tags, and record the "create" action.

    ``columns`` are further instance columns (image_ref, key_name, user_data, ...). Without a
    ``hostname`` the server gets Nova's from its display name, without a ``reservation_id`` a
    new one. Returns the row as read back.
    """
    instance_uuid = uuid or str(uuidlib.uuid4())
    if not columns.get("hostname"):
        columns["hostname"] = names.hostname_for(display_name, instance_uuid)
    if not columns.get("reservation_id"):
        columns["reservation_id"] = names.new_reservation_id()
    copy = flavor_copy.primitive(flavor, extra_specs)
    now = utcnow()
    values = {
        "uuid": instance_uuid,
        "user_id": actor.user_id,
        "project_id": actor.project_id,
        "display_name": display_name,
        "vm_state": states.BUILDING,
        "task_state": states.task_states.SCHEDULING,
        "power_state": states.power_state.NOSTATE,
        "progress": 0,
        "locked": False,
        "launch_index": 0,
        "memory_mb": flavor["memory_mb"],
        "vcpus": flavor["vcpus"],
        "root_gb": flavor["root_gb"],
        "ephemeral_gb": flavor["ephemeral_gb"],
        "instance_type_id": flavor["id"],
        "flavor": flavor_copy.dumps(copy),
        "created_at": now,
        "updated_at": None,
        "deleted": 0,
        **columns,
    }
    conn.execute(insert(INSTANCES), values)
    for table, pairs in ((INSTANCE_METADATA, metadata), (INSTANCE_SYSTEM_METADATA, system_metadata)):
        if pairs:
            conn.execute(insert(table), [{"instance_uuid": instance_uuid, "key": k, "value": v,
                                          "created_at": now, "deleted": 0} for k, v in pairs.items()])
    if tags:
        conn.execute(insert(TAGS), [{"resource_id": instance_uuid, "tag": t} for t in dict.fromkeys(tags)])
    start_action(conn, instance_uuid, "create", actor)
    return get(conn, instance_uuid, read_deleted="yes")


def get(conn: Connection, instance_uuid: str, *, read_deleted: str = "no", for_update: bool = False) -> dict:
    """One server by uuid; ``read_deleted`` "no" (the default), "yes" or "only", as in Nova."""
    query = select(INSTANCES).where(I.uuid == instance_uuid)
    if read_deleted == "no":
        query = query.where(I.deleted == 0)
    elif read_deleted == "only":
        query = query.where(I.deleted != 0)
    if for_update:
        query = query.with_for_update()
    row = first_row(conn.execute(query))
    if row is None:
        raise errors.InstanceNotFound(instance_uuid)
    return row


def ever_existed(conn: Connection, instance_uuid: str) -> bool:
    """Whether a server of this uuid was ever created (deleted ones included)."""
    return conn.execute(select(I.id).where(I.uuid == instance_uuid).limit(1)).first() is not None


def flavors_of(row: dict) -> flavor_copy.FlavorCopy:
    return flavor_copy.FlavorCopy.loads(row["flavor"])


def metadata_of(conn: Connection, instance_uuid: str, *, system: bool = False) -> dict[str, str]:
    table = INSTANCE_SYSTEM_METADATA if system else INSTANCE_METADATA
    # in the order the items were added, as Nova lists them
    query = (select(table.c.key, table.c.value)
             .where(table.c.instance_uuid == instance_uuid, table.c.deleted == 0).order_by(table.c.id))
    return dict(conn.execute(query).all())


def tags_of(conn: Connection, instance_uuid: str) -> list[str]:
    query = select(TAGS.c.tag).where(TAGS.c.resource_id == instance_uuid).order_by(TAGS.c.tag)
    return [r[0] for r in conn.execute(query)]


def status(row: dict) -> str:
    return states.status_from_state(row["vm_state"], row["task_state"], deleted=bool(row["deleted"]))
