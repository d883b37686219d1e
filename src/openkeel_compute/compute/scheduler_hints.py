"""The ``different_host`` and ``same_host`` scheduler hints of a server, as Nova's DifferentHostFilter and
SameHostFilter read them when ``[filter_scheduler] enabled_filters`` names them (neither does by default).

The hints are kept with the server (its ``scheduler_hints`` column, each value a list of strings) and act at
its build and at every move, as Nova's request spec keeps them. Their values are server uuids; a node
passes ``different_host`` when none of those servers is on it and ``same_host`` when one of them is. The
servers are looked for in every project, as Nova's filters look at every instance on a host; a deleted
server, or one on no node (shelved offloaded, not placed yet), is on none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from sqlalchemy import select

from openkeel_compute.db.models import INSTANCES

DIFFERENT_HOST = "DifferentHostFilter"
SAME_HOST = "SameHostFilter"


def _values(value: object) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def host_filter(conn, instance_uuid: str, enabled: Iterable[str]) -> Callable[[str], bool] | None:
    """Whether a node may take the server under its hints and the filters enabled; None: no hint acts."""
    enabled = set(enabled)
    if DIFFERENT_HOST not in enabled and SAME_HOST not in enabled:
        return None
    raw = conn.execute(select(INSTANCES.c.scheduler_hints).where(INSTANCES.c.uuid == instance_uuid)).scalar()
    hints = json.loads(raw) if raw else {}
    different = _values(hints.get("different_host")) if DIFFERENT_HOST in enabled else []
    same = _values(hints.get("same_host")) if SAME_HOST in enabled else []
    if not different and not same:
        return None
    rows = conn.execute(select(INSTANCES.c.uuid, INSTANCES.c.node).where(
        INSTANCES.c.uuid.in_(set(different) | set(same)), INSTANCES.c.uuid != instance_uuid,
        INSTANCES.c.deleted == 0, INSTANCES.c.node.is_not(None)))
    node_of = {row.uuid: row.node for row in rows}
    away = {node_of[u] for u in different if u in node_of}
    near = {node_of[u] for u in same if u in node_of}
    return lambda node: node not in away and (not same or node in near)
