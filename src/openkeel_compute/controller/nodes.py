"""The cluster's nodes and their availability zones, published into the database for the API.

The API never calls the cluster, so the controller writes each node's ``topology.kubernetes.io/zone``
label, its readiness and whether it is cordoned into ``node_zones`` (one row per node; nodes that left
are removed). The API's os-availability-zone and host_status read them, and boots into a zone are
checked against them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select, update

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models

if TYPE_CHECKING:
    from openkeel_compute.controller.gateway import Gateway

LOG = logging.getLogger(__name__)
ZONE_LABEL = "topology.kubernetes.io/zone"
TABLE = models.NODE_ZONES


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def observed(nodes: list[dict[str, Any]]) -> dict[str, tuple[str | None, bool, bool]]:
    """{node name: (zone label or None, ready, cordoned)} of the cluster's nodes."""
    result = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        result[meta["name"]] = (labels.get(ZONE_LABEL) or None, _ready(node), cordoned)
    return result


def publish(engine, seen: dict[str, tuple[str | None, bool, bool]]) -> int:
    """Make node_zones what the cluster shows ({name: (zone, ready, cordoned)}, as ``observed`` reads
    it); returns the number of rows changed."""
    changed = 0
    with db_api.transaction(engine) as conn:
        stored = {r.node: (r.zone, r.available, r.cordoned) for r in conn.execute(select(TABLE))}
        gone = [name for name in stored if name not in seen]
        if gone:
            changed += conn.execute(delete(TABLE).where(TABLE.c.node.in_(gone))).rowcount
        now = models.utcnow()
        for name, (zone, ready, cordoned) in seen.items():
            values = {"zone": zone, "available": ready, "cordoned": cordoned, "updated_at": now}
            if name not in stored:
                conn.execute(insert(TABLE).values(node=name, **values))
                changed += 1
            elif stored[name] != (zone, ready, cordoned):
                conn.execute(update(TABLE).where(TABLE.c.node == name).values(**values))
                changed += 1
    return changed


def sync(engine, cluster: Gateway) -> int:
    """One pass: read the nodes, publish them. Errors are logged and left for the next pass."""
    try:
        return publish(engine, observed(cluster.nodes()))
    except Exception as exc:  # noqa: BLE001 - a failed pass must not stop the controller
        LOG.warning("nodes not published: %s", exc)
        return 0
