"""Rebuild in the database: what the API changes when it starts a rebuild, in one transaction.

As Nova does: the server's task becomes ``rebuilding`` (compare-and-swap on the precondition:
ACTIVE, SHUTOFF or ERROR, no task, not locked), the new image and the request's fields are
written, the image's ``image_*`` system metadata is replaced by the new image's (with
``image_base_image_ref``), and the "rebuild" action is recorded. An outbox row ``rebuild`` asks
the controller to replace the root disk; its ``old_vm_state`` says whether the server is started
again afterwards (ACTIVE or ERROR before) or left stopped (SHUTOFF before), as Nova does.
"""

from __future__ import annotations

import json

from sqlalchemy import insert, update
from sqlalchemy.engine import Connection

from openkeel_compute.compute import image_meta
from openkeel_compute.compute.instances import cas, instance_metadata, store, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.compute.preconditions import precondition
from openkeel_compute.db.models import INSTANCE_SYSTEM_METADATA, utcnow
from openkeel_compute.model import operations, sysmeta

BASE_IMAGE_REF = sysmeta.BASE_IMAGE_REF

# request field -> instance column, for the fields a rebuild may change
COLUMNS = {
    "display_name": "display_name", "display_description": "display_description",
    "access_ip_v4": "access_ip_v4", "access_ip_v6": "access_ip_v6", "auto_disk_config": "auto_disk_config",
    "user_data": "user_data", "key_name": "key_name", "key_data": "key_data", "hostname": "hostname",
    "trusted_certs": "trusted_certs",
}


def _replace_image_metadata(conn: Connection, instance_uuid: str, new: dict[str, str]) -> None:
    """Soft-delete the server's ``image_*`` system metadata and write ``new`` in its place; other
    keys stay."""
    now = utcnow()
    table = INSTANCE_SYSTEM_METADATA
    live = [table.c.instance_uuid == instance_uuid, table.c.deleted == 0]
    current = store.metadata_of(conn, instance_uuid, system=True)
    gone = [k for k in current if k.startswith(image_meta.PREFIX) or k in new]
    if gone:
        conn.execute(update(table).where(*live, table.c.key.in_(gone)).values(deleted=table.c.id, deleted_at=now))
    if new:
        conn.execute(insert(table), [{"instance_uuid": instance_uuid, "key": k, "value": v, "created_at": now,
                                      "deleted": 0} for k, v in new.items()])


def begin_rebuild(conn: Connection, row: dict, actor: Actor, *, image: dict, flavor: dict,
                  changes: dict, metadata: dict[str, str] | None, volume_backed: bool = False,
                  reimage_volume: str | None = None) -> dict:
    """Start the rebuild of ``row`` with ``image`` (Glance's fields; the server keeps ``flavor``).

    ``changes``: instance columns from the request (keys of COLUMNS); ``metadata``: the server's new
    metadata, replacing the old (None: unchanged). ``volume_backed``: the server keeps its empty
    ``image_ref`` (Nova's sign of a server booted from a volume). ``reimage_volume``: the root volume
    Cinder writes the image into (2.93's ``reimage_boot_volume``), None: the guest is recreated on its
    disk as it is. Raises the precondition's 409 when the server
    may not be rebuilt. Returns the row as the check saw it."""
    unknown = set(changes) - set(COLUMNS)
    if unknown:
        raise ValueError(f"not changed by a rebuild: {sorted(unknown)}")
    pre = precondition("rebuild")
    values = {COLUMNS[k]: v for k, v in changes.items()}
    if "trusted_certs" in values and values["trusted_certs"] is not None:
        values["trusted_certs"] = json.dumps(values["trusted_certs"])
    values.update(progress=0, kernel_id="", ramdisk_id="")
    if not volume_backed:
        values["image_ref"] = image["id"]
    checked = cas.begin_action(conn, row, pre, actor, values=values)
    uuid = row["uuid"]
    if metadata is not None:
        instance_metadata.set_metadata(conn, uuid, metadata)
    system = image_meta.system_metadata(image, flavor)
    system[BASE_IMAGE_REF] = image["id"]
    system.update(image_meta.name_metadata(image))
    _replace_image_metadata(conn, uuid, system)
    updates.outbox(conn, uuid, operations.REBUILD, actor, task_state=pre.next_task_state, image_ref=image["id"],
                   old_vm_state=checked["vm_state"], **({"reimage_volume": reimage_volume} if reimage_volume else {}))
    return checked
