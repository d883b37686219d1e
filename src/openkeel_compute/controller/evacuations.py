"""A source node back after its servers were evacuated: what Nova's compute does when it starts again.

Nova's ``_destroy_evacuated_instances``: the compute service of a host whose servers were evacuated
destroys the guests it still has of them, gives back their allocations on its node and marks the
evacuations ``completed``. Here, run after each heartbeat: for every node that is Ready again (forced down or not: Nova's compute cleans
up when it starts, and its service is forced up again only afterwards, once no ``done`` evacuation
remains) and every evacuation from it that is ``done``, the server's allocation on the
source's provider is taken out of its consumer and the migration becomes ``completed``. The cluster holds
nothing of the server on the source any more (its launcher pods were force-deleted when it was
evacuated, its VM is pinned to the target; a kubelet coming back kills the containers of pods the API no
longer has), so there is nothing to destroy there.

An evacuation still under way of a server deleted meanwhile is closed (``failed``). One still under way
(``accepted``, ``pre-migrating``) of a live server is left to its step, which ends it ``done``;
the next heartbeat completes it. (Nova completes those too, and lets the destination finish: the outcome,
the source's part given back once, is the same.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from openkeel_compute.compute import evacuation
from openkeel_compute.controller import compute_services
from openkeel_compute.db import api as db_api
from openkeel_compute.db.models import INSTANCES

if TYPE_CHECKING:
    from openkeel_compute.controller.gateway import Gateway

LOG = logging.getLogger(__name__)


def source_back(engine, claims: Any, cluster: Gateway) -> list[str]:
    """Complete the evacuations from the nodes that are Ready again; returns the migrations completed.
    ``claims``: controller/claims.py's (None without Placement: only the migrations move)."""
    with db_api.transaction(engine) as conn:
        if evacuation.close_of_deleted(conn):
            LOG.info("evacuations of deleted servers closed (failed)")
        done = evacuation.done(conn)
    if not done:
        return []
    ready = {(n.get("metadata") or {}).get("name") for n in cluster.nodes() if compute_services.ready(n)}
    done = [m for m in done if m["source_compute"] in ready]
    with db_api.reader(engine) as conn:
        live = set(conn.execute(select(INSTANCES.c.uuid).where(
            INSTANCES.c.uuid.in_([m["instance_uuid"] for m in done]), INSTANCES.c.deleted == 0)).scalars()) if done else set()
    completed = []
    for migration in done:
        uuid, source = migration["instance_uuid"], migration["source_node"] or migration["source_compute"]
        if claims is not None and uuid in live and source:  # a deleted server gave everything back
            claims.drop_node(uuid, source)
            LOG.info("server %s: its allocation on %s given back (evacuated to %s; %s is Ready again)", uuid, source,
                     migration["dest_compute"], source)
        with db_api.transaction(engine) as conn:
            if evacuation.move(conn, migration["uuid"], "completed", expected="done"):
                completed.append(migration["uuid"])
    return completed
