"""A server's metadata record from the database (all the metadata service reads, but for the security groups
from Neutron when it is the network service: service.PortGroups).

``by_uuid`` reads one live server; ``uuid_by_address`` finds the live server a fixed IP address belongs to
(Nova asks Neutron for the port of the address; here the server's addresses, Nova's network info cache,
are in its row).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from openkeel_compute.compute import errors, flavor_copy, keypairs, networks
from openkeel_compute.compute.instances import store
from openkeel_compute.db.models import INSTANCES
from openkeel_compute.metadata.documents import Record, network_data
from openkeel_compute.model import sysmeta


def _addresses(row: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    try:
        value = json.loads(row.get("network_info") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def by_uuid(conn: Connection, uuid: str) -> Record | None:
    try:
        row = store.get(conn, uuid)
    except errors.InstanceNotFound:
        return None
    system = store.metadata_of(conn, uuid, system=True)
    addresses = _addresses(row)
    fixed = tuple(a["addr"] for entries in addresses.values() for a in entries
                  if a.get("OS-EXT-IPS:type", "fixed") == "fixed")
    floating = tuple(a["addr"] for entries in addresses.values() for a in entries
                     if a.get("OS-EXT-IPS:type") == "floating")
    try:  # the names asked for at boot: what a server on the pod network has (service.PortGroups with Neutron)
        groups = tuple(json.loads(system.get(sysmeta.SECURITY_GROUPS) or "[]") or ())
    except ValueError:
        groups = ()
    key_type = "ssh"
    if row.get("key_name"):
        try:
            key_type = str(keypairs.get(conn, row["user_id"], row["key_name"]).get("type") or "ssh")
        except keypairs.KeypairNotFound:
            pass
    image = str(row.get("image_ref") or "").replace("-", "")
    return Record(
        uuid=row["uuid"], project_id=row["project_id"], hostname=row.get("hostname") or "",
        display_name=row.get("display_name") or "", launch_index=int(row.get("launch_index") or 0),
        availability_zone=row.get("availability_zone"), reservation_id=row.get("reservation_id") or "",
        ec2_id=int(row["id"]), image_ec2_id=int(image[:8], 16) if len(image) >= 8 else 0,
        flavor_name=str(flavor_copy.FlavorCopy.loads(row["flavor"]).cur.get("name") or ""),
        user_data=row.get("user_data"), metadata=store.metadata_of(conn, uuid),
        key_name=row.get("key_name"), key_data=row.get("key_data"), key_type=key_type,
        security_groups=tuple(str(g) for g in groups), fixed_ips=fixed, floating_ips=floating,
        network_data=network_data(addresses), password=networks.password_of(conn, uuid),
        root_device_name=row.get("root_device_name") or "/dev/vda")


def uuid_by_address(conn: Connection, address: str) -> str | None:
    """The live server with fixed IP ``address``, or None (several: none, as Nova's lookup finds no single
    port)."""
    if not address:
        return None
    quoted = json.dumps(address)
    query = select(INSTANCES.c.uuid, INSTANCES.c.network_info).where(
        INSTANCES.c.deleted == 0, INSTANCES.c.network_info.contains(quoted))
    found = [uuid for uuid, info in conn.execute(query)
             if any(a.get("addr") == address and a.get("OS-EXT-IPS:type", "fixed") == "fixed"
                    for entries in _addresses({"network_info": info}).values() for a in entries)]
    return found[0] if len(found) == 1 else None
