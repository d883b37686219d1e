"""Server groups (tables server_groups and server_group_members): the API's os-server-groups and the
``group`` scheduler hint, and the policy the controller honours where a member is placed.

Where a member may run (``allowed``), as Nova's scheduler filters and its compute's late check decide:

- affinity: on the node of the group's other members once one has a node;
- anti-affinity: on a node with fewer than ``max_server_per_host`` (1 unless the 2.64 rule says) of
  them;
- soft-affinity / soft-anti-affinity: the same, as a preference only (Nova's weighers): a member goes
  elsewhere when no node satisfies it.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from typing import Any

from sqlalchemy import delete, func, insert, select

from openkeel_compute.db.models import INSTANCES, SERVER_GROUP_MEMBERS, SERVER_GROUPS, utcnow

HARD = ("affinity", "anti-affinity")


class GroupNotFound(Exception):
    def __init__(self, group_uuid: str) -> None:
        super().__init__(f"Instance group {group_uuid} could not be found.")
        self.message = str(self)


def create(conn, *, name: str, project_id: str, user_id: str, policy: str, rules: dict | None) -> dict:
    group_uuid = str(uuidlib.uuid4())
    row = {"uuid": group_uuid, "name": name, "project_id": project_id, "user_id": user_id,
           "policy": policy, "rules": json.dumps(rules) if rules else None, "created_at": utcnow()}
    conn.execute(insert(SERVER_GROUPS).values(**row))
    return get(conn, group_uuid)


def get(conn, group_uuid: str) -> dict:
    row = conn.execute(select(SERVER_GROUPS).where(SERVER_GROUPS.c.uuid == group_uuid)).mappings().first()
    if row is None:
        raise GroupNotFound(group_uuid)
    return dict(row)


def listed(conn, project_id: str | None) -> list[dict]:
    query = select(SERVER_GROUPS).order_by(SERVER_GROUPS.c.id)
    if project_id is not None:
        query = query.where(SERVER_GROUPS.c.project_id == project_id)
    return [dict(r) for r in conn.execute(query).mappings()]


def destroy(conn, group_id: int) -> bool:
    conn.execute(delete(SERVER_GROUP_MEMBERS).where(SERVER_GROUP_MEMBERS.c.group_id == group_id))
    return bool(conn.execute(delete(SERVER_GROUPS).where(SERVER_GROUPS.c.id == group_id)).rowcount)


def count(conn, project_id: str, user_id: str | None = None) -> int:
    query = select(func.count()).select_from(SERVER_GROUPS).where(SERVER_GROUPS.c.project_id == project_id)
    if user_id is not None:
        query = query.where(SERVER_GROUPS.c.user_id == user_id)
    return int(conn.execute(query).scalar() or 0)


def members(conn, group_ids: list[int]) -> dict[int, list[str]]:
    """Per group: its members whose servers are not deleted, in the order they joined."""
    result: dict[int, list[str]] = {g: [] for g in group_ids}
    if not group_ids:
        return result
    live = select(INSTANCES.c.uuid).where(INSTANCES.c.deleted == 0).scalar_subquery()
    rows = conn.execute(select(SERVER_GROUP_MEMBERS.c.group_id, SERVER_GROUP_MEMBERS.c.instance_uuid)
                        .where(SERVER_GROUP_MEMBERS.c.group_id.in_(group_ids),
                               SERVER_GROUP_MEMBERS.c.instance_uuid.in_(live))
                        .order_by(SERVER_GROUP_MEMBERS.c.id))
    for row in rows:
        result[row.group_id].append(row.instance_uuid)
    return result


def user_members(conn, group_id: int, user_id: str) -> int:
    """The group's live members the user booted (Nova counts server_group_members per user)."""
    return int(conn.execute(select(func.count()).select_from(SERVER_GROUP_MEMBERS.join(
        INSTANCES, INSTANCES.c.uuid == SERVER_GROUP_MEMBERS.c.instance_uuid)).where(
        SERVER_GROUP_MEMBERS.c.group_id == group_id, INSTANCES.c.deleted == 0,
        INSTANCES.c.user_id == user_id)).scalar() or 0)


def add_member(conn, group_id: int, instance_uuid: str) -> None:
    conn.execute(insert(SERVER_GROUP_MEMBERS).values(group_id=group_id, instance_uuid=instance_uuid,
                                                     created_at=utcnow()))


def groups_of(conn, instance_uuid: str) -> list[str]:
    """The uuids of the groups the server is a member of (2.71's server_groups)."""
    return list(conn.execute(select(SERVER_GROUPS.c.uuid).select_from(SERVER_GROUPS.join(
        SERVER_GROUP_MEMBERS, SERVER_GROUP_MEMBERS.c.group_id == SERVER_GROUPS.c.id)).where(
        SERVER_GROUP_MEMBERS.c.instance_uuid == instance_uuid).order_by(SERVER_GROUPS.c.id)).scalars())


def placement_rule(conn, instance_uuid: str) -> tuple[str, dict[str, int], int] | None:
    """(policy, {node: members on it}, max_server_per_host) of the server's group, its other live members'
    nodes counted; None when it is in no group."""
    group = conn.execute(select(SERVER_GROUPS).select_from(SERVER_GROUPS.join(
        SERVER_GROUP_MEMBERS, SERVER_GROUP_MEMBERS.c.group_id == SERVER_GROUPS.c.id)).where(
        SERVER_GROUP_MEMBERS.c.instance_uuid == instance_uuid)).mappings().first()
    if group is None:
        return None
    rows = conn.execute(select(INSTANCES.c.node).select_from(SERVER_GROUP_MEMBERS.join(
        INSTANCES, INSTANCES.c.uuid == SERVER_GROUP_MEMBERS.c.instance_uuid)).where(
        SERVER_GROUP_MEMBERS.c.group_id == group["id"], INSTANCES.c.deleted == 0,
        INSTANCES.c.uuid != instance_uuid, INSTANCES.c.node.is_not(None)))
    nodes: dict[str, int] = {}
    for row in rows:
        nodes[row.node] = nodes.get(row.node, 0) + 1
    rules = json.loads(group["rules"]) if group["rules"] else {}
    return group["policy"], nodes, int(rules.get("max_server_per_host", 1))


def allowed(policy: str, nodes: dict[str, int], max_per_host: int, node: str) -> bool:
    """Whether ``node`` satisfies the policy, the other members being on ``nodes``."""
    if policy.endswith("anti-affinity"):
        return nodes.get(node, 0) < max_per_host
    return not nodes or node in nodes


def view(group: dict[str, Any], live_members: list[str], version) -> dict:
    body: dict[str, Any] = {"id": group["uuid"], "name": group["name"]}
    if version >= (2, 64):
        body["policy"] = group["policy"]
        body["rules"] = json.loads(group["rules"]) if group["rules"] else {}
    else:
        body["policies"] = [group["policy"]]
        body["metadata"] = {}
    body["members"] = live_members
    if version >= (2, 13):
        body["project_id"] = group["project_id"]
        body["user_id"] = group["user_id"]
    return body
