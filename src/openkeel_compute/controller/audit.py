"""Placement's allocations against the servers (what Nova's ``heal_allocations`` is for Nova).

One pass (``audit(engine, placement, dry_run=...)``) over the allocations against the controller's
providers (the nodes'):

- **leaked**: a consumer that is neither a live server (not deleted, SOFT_DELETED included: Nova keeps a
  soft-deleted server's resources until it is reclaimed) nor a migration still under way (a resize's
  migration record whose status is not final holds the old flavor's resources) — its allocations are
  given back;
- **missing**: a live server that holds a node (its ``node`` column: claimed, or running there) and is
  neither shelved-offloaded nor failed before it got one, but has no allocation — its flavor's resources
  are claimed again on its node's provider.

Each repair is logged; ``dry_run`` reports without changing anything. The controller runs a pass every
``[controller] resync_interval``; ``openkeel-compute placement audit [--dry-run]`` prints the same report.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from sqlalchemy import select

from openkeel_compute.compute.instances import store
from openkeel_compute.controller.claims import Claims
from openkeel_compute.controller.providers import MARKER_TRAIT, provider_uuid
from openkeel_compute.db import models
from openkeel_compute.db.api import reader
from openkeel_compute.placement import errors
from openkeel_compute.placement.client import PlacementClient

LOG = logging.getLogger(__name__)
I = models.INSTANCES
M = models.MIGRATIONS
# A migration in one of these holds nothing any more.
FINAL_MIGRATION_STATUSES = ("confirmed", "reverted", "error", "failed", "completed", "done", "cancelled")


@dataclasses.dataclass
class AuditReport:
    leaked: dict[str, dict[str, dict[str, int]]] = dataclasses.field(default_factory=dict)  # consumer -> allocations
    missing: dict[str, str] = dataclasses.field(default_factory=dict)  # server uuid -> node
    failed: dict[str, str] = dataclasses.field(default_factory=dict)  # consumer -> why it was not repaired
    dry_run: bool = False

    def lines(self) -> list[str]:
        verb = "would give back" if self.dry_run else "gave back"
        out = [f"leaked allocations of consumer {c} ({_flat(a)}): {verb}" for c, a in sorted(self.leaked.items())]
        verb = "would claim" if self.dry_run else "claimed"
        out += [f"server {s} on node {n} held no allocation: {verb} its flavor's resources there"
                for s, n in sorted(self.missing.items())]
        out += [f"consumer {c}: not repaired: {why}" for c, why in sorted(self.failed.items())]
        return out or ["Placement's allocations and the servers agree: nothing to repair"]


def _flat(allocations: dict[str, dict[str, int]]) -> str:
    return "; ".join(f"{rp}: " + ", ".join(f"{rc}={n}" for rc, n in sorted(r.items()))
                     for rp, r in sorted(allocations.items()))


def _live(engine) -> tuple[dict[str, dict[str, Any]], set[str]]:
    with reader(engine) as conn:
        servers = {r["uuid"]: dict(r) for r in conn.execute(
            select(I.c.uuid, I.c.node, I.c.vm_state, I.c.project_id, I.c.user_id).where(I.c.deleted == 0)).mappings()}
        migrations = {r[0] for r in conn.execute(
            select(M.c.uuid).where(M.c.deleted == 0, M.c.uuid.is_not(None),
                                   M.c.status.not_in(FINAL_MIGRATION_STATUSES)))}
    return servers, migrations


def _holds_resources(server: dict[str, Any]) -> bool:
    return bool(server["node"]) and server["vm_state"] not in ("shelved_offloaded", "deleted")


def audit(engine, placement: PlacementClient, *, dry_run: bool = False) -> AuditReport:
    report = AuditReport(dry_run=dry_run)
    servers, migrations = _live(engine)
    held: dict[str, dict[str, dict[str, int]]] = {}
    for provider in placement.providers(required=MARKER_TRAIT):
        for consumer, resources in placement.provider_allocations(provider["uuid"]).items():
            held.setdefault(consumer, {})[provider["uuid"]] = resources
    for consumer, allocations in held.items():
        if consumer in servers or consumer in migrations:
            continue
        report.leaked[consumer] = allocations
        if not dry_run:
            try:
                placement.delete_allocations(consumer, force=True)
            except errors.PlacementError as exc:
                report.failed[consumer] = exc.message
                continue
            LOG.warning("audit: gave back the leaked allocations of consumer %s (%s)", consumer, _flat(allocations))
    claims = Claims(placement)
    for uuid, server in servers.items():
        if uuid in held or not _holds_resources(server):
            continue
        report.missing[uuid] = server["node"]
        if dry_run:
            continue
        try:
            with reader(engine) as conn:
                row = store.get(conn, uuid)
                row["system_metadata"] = store.metadata_of(conn, uuid, system=True)
            wanted = claims.request_of(row).total()
            placement.put_allocations(uuid, {provider_uuid(server["node"]): wanted},
                                      project_id=str(server["project_id"]), user_id=str(server["user_id"]),
                                      consumer_generation=None)
        except errors.PlacementError as exc:
            report.failed[uuid] = exc.message
            continue
        except Exception as exc:  # noqa: BLE001 - gone meanwhile: nothing to heal
            report.failed[uuid] = str(exc)
            continue
        LOG.warning("audit: server %s on node %s held no allocation: claimed %s", uuid, server["node"], wanted)
    return report
