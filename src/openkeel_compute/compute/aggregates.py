"""Host aggregates (tables aggregates, aggregate_hosts, aggregate_metadata) with Nova's rules on their
availability zones (nova/compute/api.py AggregateAPI): the API's os-aggregates writes them, the
controller mirrors them into Placement and onto the nodes' zone labels (controller/compute_services.py).
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from openkeel_compute.db.models import AGGREGATE_HOSTS, AGGREGATE_METADATA, AGGREGATES, INSTANCES, utcnow

AZ = "availability_zone"


class Refused(Exception):
    """Nova's InvalidAggregateAction family (``status`` 400 or 409) and its other aggregate errors."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message, self.status = message, status


def not_found(aggregate_id) -> Refused:
    return Refused(f"Aggregate {aggregate_id} could not be found.", 404)


def _action_refused(action: str, aggregate_id: int, reason: str, status: int = 400) -> Refused:
    text = {"add": "Cannot add host to aggregate", "delete": "Cannot remove host from aggregate",
            "update": "Cannot update aggregate", "meta": "Cannot update metadata of aggregate"}[action]
    return Refused(f"{text} {aggregate_id}. Reason: {reason}.", status)


def get(conn, aggregate_id: int) -> dict[str, Any]:
    row = conn.execute(select(AGGREGATES).where(AGGREGATES.c.id == aggregate_id)).mappings().first()
    if row is None:
        raise not_found(aggregate_id)
    aggregate = dict(row)
    aggregate["hosts"] = list(conn.execute(select(AGGREGATE_HOSTS.c.host).where(
        AGGREGATE_HOSTS.c.aggregate_id == aggregate_id).order_by(AGGREGATE_HOSTS.c.id)).scalars())
    aggregate["metadata"] = {r.key: r.value for r in conn.execute(select(AGGREGATE_METADATA).where(
        AGGREGATE_METADATA.c.aggregate_id == aggregate_id).order_by(AGGREGATE_METADATA.c.id))}
    return aggregate


def listed(conn) -> list[dict[str, Any]]:
    return [get(conn, i) for i in conn.execute(select(AGGREGATES.c.id).order_by(AGGREGATES.c.id)).scalars()]


def _name_taken(conn, name: str, other_than: int | None = None) -> bool:
    query = select(AGGREGATES.c.id).where(AGGREGATES.c.name == name)
    if other_than is not None:
        query = query.where(AGGREGATES.c.id != other_than)
    return conn.execute(query).first() is not None


def create(conn, name: str, zone: str | None) -> dict[str, Any]:
    if _name_taken(conn, name):
        raise Refused(f"Aggregate {name} already exists.", 409)
    now = utcnow()
    new_id = conn.execute(insert(AGGREGATES).values(uuid=str(uuidlib.uuid4()), name=name, created_at=now)
                          ).inserted_primary_key[0]
    if zone:
        conn.execute(insert(AGGREGATE_METADATA).values(aggregate_id=new_id, key=AZ, value=zone, created_at=now))
    return get(conn, new_id)


def host_zones(conn, hosts: list[str], other_than: int | None = None) -> list[tuple[int, str]]:
    """(aggregate id, zone) of the aggregates with a zone that hold any of ``hosts``."""
    query = (select(AGGREGATE_METADATA.c.aggregate_id, AGGREGATE_METADATA.c.value)
             .select_from(AGGREGATE_METADATA.join(AGGREGATE_HOSTS, AGGREGATE_HOSTS.c.aggregate_id
                                                  == AGGREGATE_METADATA.c.aggregate_id))
             .where(AGGREGATE_METADATA.c.key == AZ, AGGREGATE_HOSTS.c.host.in_(hosts)).distinct())
    rows = [(r[0], r[1]) for r in conn.execute(query)]
    return [r for r in rows if r[0] != other_than]


def _instances_on(conn, hosts: list[str]) -> int:
    if not hosts:
        return 0
    return int(conn.execute(select(func.count()).select_from(INSTANCES).where(
        INSTANCES.c.host.in_(hosts), INSTANCES.c.deleted == 0)).scalar() or 0)


def _safe_zone_change(conn, aggregate: dict, metadata: dict, action: str, hosts: list[str] | None = None,
                      check_instances: bool = False) -> None:
    """Nova's is_safe_to_update_az."""
    if AZ not in metadata:
        return
    if not metadata[AZ]:
        raise _action_refused(action, aggregate["id"],
                              f"Aggregate {aggregate['name']} does not support empty named availability zone")
    hosts = hosts if hosts is not None else aggregate["hosts"]
    conflicting = [zone for agg_id, zone in host_zones(conn, hosts, aggregate["id"]) if zone != metadata[AZ]]
    if conflicting:
        raise _action_refused(action, aggregate["id"], f"One or more hosts already in availability zone(s) "
                                                       f"{conflicting!r}")
    if check_instances and aggregate["metadata"].get(AZ) != metadata[AZ] and _instances_on(conn, hosts):
        raise _action_refused(action, aggregate["id"], "One or more hosts contain instances in this zone")


def _set_metadata(conn, aggregate_id: int, metadata: dict[str, str | None]) -> None:
    now = utcnow()
    for key, value in metadata.items():
        conn.execute(delete(AGGREGATE_METADATA).where(AGGREGATE_METADATA.c.aggregate_id == aggregate_id,
                                                      AGGREGATE_METADATA.c.key == key))
        if value is not None:
            conn.execute(insert(AGGREGATE_METADATA).values(aggregate_id=aggregate_id, key=key, value=value,
                                                           created_at=now))
    conn.execute(update(AGGREGATES).where(AGGREGATES.c.id == aggregate_id).values(updated_at=now))


def update_aggregate(conn, aggregate_id: int, values: dict[str, Any]) -> dict[str, Any]:
    aggregate = get(conn, aggregate_id)
    values = dict(values)
    if "name" in values:
        name = values.pop("name")
        if _name_taken(conn, name, aggregate_id):
            raise Refused(f"Aggregate {name} already exists.", 409)
        conn.execute(update(AGGREGATES).where(AGGREGATES.c.id == aggregate_id).values(name=name, updated_at=utcnow()))
    _safe_zone_change(conn, aggregate, values, "update", check_instances=True)
    if values:
        _set_metadata(conn, aggregate_id, values)
    return get(conn, aggregate_id)


def update_metadata(conn, aggregate_id: int, metadata: dict[str, str | None]) -> dict[str, Any]:
    aggregate = get(conn, aggregate_id)
    _safe_zone_change(conn, aggregate, metadata, "meta", check_instances=True)
    _set_metadata(conn, aggregate_id, metadata)
    return get(conn, aggregate_id)


def destroy(conn, aggregate_id: int) -> None:
    aggregate = get(conn, aggregate_id)
    if aggregate["hosts"]:
        raise _action_refused("delete", aggregate_id, "Host aggregate is not empty")
    conn.execute(delete(AGGREGATE_METADATA).where(AGGREGATE_METADATA.c.aggregate_id == aggregate_id))
    conn.execute(delete(AGGREGATES).where(AGGREGATES.c.id == aggregate_id))


def _zone_of(conn, host: str, other_than: int | None = None) -> str | None:
    zones = {zone for _agg, zone in host_zones(conn, [host], other_than)}
    return next(iter(zones)) if zones else None


def _moving_instances(action: str, aggregate_id: int, old: str | None, new: str | None, count: int) -> Refused:
    verb = "added to" if action == "add" else "removed from"
    return _action_refused(action, aggregate_id, (
        f"The host cannot be {verb} the aggregate as the availability zone of the host would change from "
        f"'{old}' to '{new}' but the host already has {count} instance(s). Changing the AZ of an existing "
        "instance is not supported by this action. Move the instances away from this host then try again. If "
        "you need to move the instances between AZs then you can use shelve_offload and unshelve to achieve "
        "this."), 409)


def add_host(conn, aggregate_id: int, host: str) -> dict[str, Any]:
    aggregate = get(conn, aggregate_id)
    try:
        _safe_zone_change(conn, aggregate, aggregate["metadata"], "add", hosts=[host])
    except Refused as exc:
        raise Refused(exc.message, 409) from None
    count = _instances_on(conn, [host])
    new = aggregate["metadata"].get(AZ)
    if count and new:
        old = _zone_of(conn, host)
        if old != new:
            raise _moving_instances("add", aggregate_id, old, new, count)
    if host in aggregate["hosts"]:
        raise Refused(f"Aggregate {aggregate_id} already has host {host}.", 409)
    conn.execute(insert(AGGREGATE_HOSTS).values(aggregate_id=aggregate_id, host=host, created_at=utcnow()))
    return get(conn, aggregate_id)


def remove_host(conn, aggregate_id: int, host: str) -> dict[str, Any]:
    aggregate = get(conn, aggregate_id)
    if host not in aggregate["hosts"]:
        raise Refused(f"Cannot remove host {host} in aggregate {aggregate_id}", 404)
    count = _instances_on(conn, [host])
    current = aggregate["metadata"].get(AZ)
    if count and current:
        new = _zone_of(conn, host, aggregate_id)
        if current != new:
            raise _moving_instances("delete", aggregate_id, current, new, count)
    conn.execute(delete(AGGREGATE_HOSTS).where(AGGREGATE_HOSTS.c.aggregate_id == aggregate_id,
                                               AGGREGATE_HOSTS.c.host == host))
    return get(conn, aggregate_id)


def remove_host_everywhere(conn, host: str) -> None:
    """A deleted compute service leaves its aggregates (Nova's service delete)."""
    conn.execute(delete(AGGREGATE_HOSTS).where(AGGREGATE_HOSTS.c.host == host))


def of_hosts(conn) -> tuple[dict[str, set[str]], dict[str, tuple[str, str]]]:
    """({host: uuids of its aggregates}, {host: (zone, aggregate uuid) of its zone}) for the controller."""
    members: dict[str, set[str]] = {}
    for row in conn.execute(select(AGGREGATE_HOSTS.c.host, AGGREGATES.c.uuid).select_from(
            AGGREGATE_HOSTS.join(AGGREGATES, AGGREGATES.c.id == AGGREGATE_HOSTS.c.aggregate_id))):
        members.setdefault(row.host, set()).add(row.uuid)
    zones: dict[str, tuple[str, str]] = {}
    for row in conn.execute(select(AGGREGATE_HOSTS.c.host, AGGREGATES.c.uuid, AGGREGATE_METADATA.c.value)
                            .select_from(AGGREGATE_HOSTS.join(AGGREGATES, AGGREGATES.c.id
                                                              == AGGREGATE_HOSTS.c.aggregate_id)
                                         .join(AGGREGATE_METADATA, AGGREGATE_METADATA.c.aggregate_id
                                               == AGGREGATES.c.id))
                            .where(AGGREGATE_METADATA.c.key == AZ).order_by(AGGREGATES.c.id)):
        zones.setdefault(row.host, (row.value, row.uuid))
    return members, zones


def view(aggregate: dict[str, Any], version, *, full: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"id": aggregate["id"]}
    if version >= (2, 41):
        body["uuid"] = aggregate["uuid"]
    body["name"] = aggregate["name"]
    if full:
        body["hosts"] = aggregate["hosts"]
        body["metadata"] = aggregate["metadata"]
    body.update(created_at=aggregate["created_at"].isoformat(),
                updated_at=aggregate["updated_at"].isoformat() if aggregate["updated_at"] else None,
                deleted_at=None, deleted=False, availability_zone=aggregate["metadata"].get(AZ))
    return body
