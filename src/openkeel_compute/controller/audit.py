"""Placement's allocations against the servers (what Nova's ``heal_allocations`` is for Nova).

One pass (``audit(engine, placement, dry_run=...)``) over the allocations against the controller's
providers (the nodes'):

- **leaked**: a consumer that is neither a live server (not deleted, SOFT_DELETED included: Nova keeps a
  soft-deleted server's resources until it is reclaimed) nor a migration still under way (a resize's
  migration record whose status is not final holds the old flavor's resources) — its allocations are
  given back;
- **missing**: a live server that holds a node (its ``node`` column: claimed, or running there) and is
  neither shelved-offloaded nor failed before it got one, but has no allocation — its flavor's resources
  are claimed again on its node's provider;
- **mismatched**: such a server whose allocation does not hold its flavor's amounts (summed over the
  providers, class by class) — its allocation is replaced by its flavor's on its node's provider.

A server with a move under way (a migration whose status is not final: a resize from its start until
it is confirmed or reverted) is left alone: its allocations are the move's business (the new flavor's
on the server, the old one's on the migration). Each repair is made at the consumer generation read
after the server was checked again (no move begun meanwhile), so a move starting at the same time wins
and the repair is dropped. Each repair is logged; ``dry_run`` reports without changing anything. The
controller's leader runs a pass every ``[controller] resync_interval`` (never a replica without the
Lease); ``openkeel-compute placement audit [--dry-run]`` prints the same report.
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
# "done" is not final here: an evacuation that is done holds the source's part of the server's allocation
# until the source's service is up again (controller/evacuations.py), as Nova's does
FINAL_MIGRATION_STATUSES = ("confirmed", "reverted", "error", "failed", "completed", "cancelled")


@dataclasses.dataclass
class AuditReport:
    leaked: dict[str, dict[str, dict[str, int]]] = dataclasses.field(default_factory=dict)  # consumer -> allocations
    missing: dict[str, str] = dataclasses.field(default_factory=dict)  # server uuid -> node
    # server uuid -> (held, its flavor's), summed over providers
    mismatched: dict[str, tuple[dict[str, int], dict[str, int]]] = dataclasses.field(default_factory=dict)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)  # consumer -> why it was not repaired
    dry_run: bool = False

    def lines(self) -> list[str]:
        verb = "would give back" if self.dry_run else "gave back"
        out = [f"leaked allocations of consumer {c} ({_flat(a)}): {verb}" for c, a in sorted(self.leaked.items())]
        verb = "would claim" if self.dry_run else "claimed"
        out += [f"server {s} on node {n} held no allocation: {verb} its flavor's resources there"
                for s, n in sorted(self.missing.items())]
        verb = "would replace" if self.dry_run else "replaced"
        out += [f"server {s} held {_classes(h)} instead of its flavor's {_classes(w)}: {verb} them"
                for s, (h, w) in sorted(self.mismatched.items())]
        out += [f"consumer {c}: not repaired: {why}" for c, why in sorted(self.failed.items())]
        return out or ["Placement's allocations and the servers agree: nothing to repair"]


def _flat(allocations: dict[str, dict[str, int]]) -> str:
    return "; ".join(f"{rp}: " + ", ".join(f"{rc}={n}" for rc, n in sorted(r.items()))
                     for rp, r in sorted(allocations.items()))


def _classes(resources: dict[str, int]) -> str:
    return ", ".join(f"{rc}={n}" for rc, n in sorted(resources.items())) or "nothing"


def _summed(allocations: dict[str, dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for resources in allocations.values():
        for rc, n in resources.items():
            if n:
                total[rc] = total.get(rc, 0) + n
    return total


def _open_moves(conn) -> list[tuple[str, str]]:
    """(migration uuid, server uuid) of the migrations still under way."""
    return [(r[0], r[1]) for r in conn.execute(
        select(M.c.uuid, M.c.instance_uuid).where(M.c.deleted == 0, M.c.uuid.is_not(None),
                                                  M.c.status.not_in(FINAL_MIGRATION_STATUSES)))]


def _live(engine) -> tuple[dict[str, dict[str, Any]], set[str], set[str]]:
    """(live servers by uuid, migrations under way, servers with a move under way)."""
    with reader(engine) as conn:
        servers = {r["uuid"]: dict(r) for r in conn.execute(
            select(I.c.uuid, I.c.node, I.c.vm_state, I.c.project_id, I.c.user_id).where(I.c.deleted == 0)).mappings()}
        moves = _open_moves(conn)
    return servers, {m for m, _s in moves}, {s for _m, s in moves if s}


def _moving(engine, uuid: str) -> bool:
    with reader(engine) as conn:
        return conn.execute(select(M.c.id).where(M.c.instance_uuid == uuid, M.c.deleted == 0,
                                                 M.c.status.not_in(FINAL_MIGRATION_STATUSES)).limit(1)).first() is not None


def _holds_resources(server: dict[str, Any]) -> bool:
    return bool(server["node"]) and server["vm_state"] not in ("shelved_offloaded", "deleted")


def audit(engine, placement: PlacementClient, *, dry_run: bool = False) -> AuditReport:
    report = AuditReport(dry_run=dry_run)
    servers, migrations, moving = _live(engine)
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
        if uuid in moving or not _holds_resources(server):
            continue
        try:
            wanted = _wanted(engine, claims, uuid)
        except Exception as exc:  # noqa: BLE001 - gone meanwhile, or its flavor unreadable: nothing to heal
            report.failed[uuid] = str(exc)
            continue
        if uuid not in held:
            report.missing[uuid] = server["node"]
        elif _summed(held[uuid]) != wanted:
            report.mismatched[uuid] = (_summed(held[uuid]), wanted)
        else:
            continue
        if not dry_run:
            _repair(engine, placement, report, uuid, server, wanted)
    return report


def _wanted(engine, claims: Claims, uuid: str) -> dict[str, int]:
    """What the server's flavor (and image) ask of Placement."""
    with reader(engine) as conn:
        row = store.get(conn, uuid)
        row["system_metadata"] = store.metadata_of(conn, uuid, system=True)
    return claims.request_of(row).total()


def _repair(engine, placement: PlacementClient, report: AuditReport, uuid: str, server: dict[str, Any],
            wanted: dict[str, int]) -> None:
    """The server's allocation made its flavor's on its node's provider, at the consumer generation read
    *before* checking again that no move began (a move's POST after that read makes this PUT conflict)."""
    missing = uuid in report.missing
    try:
        current = placement.get_allocations(uuid)
        if _moving(engine, uuid) or _summed(current.allocations) == wanted:
            report.missing.pop(uuid, None)
            report.mismatched.pop(uuid, None)
            return  # a move began meanwhile, or the allocation is right now: nothing to repair
        placement.put_allocations(uuid, {provider_uuid(server["node"]): wanted},
                                  project_id=str(server["project_id"]), user_id=str(server["user_id"]),
                                  consumer_generation=current.generation)
    except errors.PlacementError as exc:
        report.failed[uuid] = exc.message
        return
    if missing:
        LOG.warning("audit: server %s on node %s held no allocation: claimed %s", uuid, server["node"], wanted)
    else:
        LOG.warning("audit: server %s held %s instead of its flavor's %s: replaced", uuid,
                    _classes(_summed(current.allocations)), _classes(wanted))
