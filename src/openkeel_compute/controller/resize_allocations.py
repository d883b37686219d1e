"""Nova's resize accounting in Placement: what a resize, a confirm and a revert do to the allocations."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from openkeel_compute.controller.claims import NoValidHost, node_provider
from openkeel_compute.controller.providers import provider_uuid, zone_aggregate
from openkeel_compute.placement.errors import PlacementConflict, PlacementError
from openkeel_compute.placement.request import resource_request

LOG = logging.getLogger(__name__)


class Allocations:
    """Nova's resize accounting in Placement (``placement``: the Placement client, or None without one).

    At the start, in one POST /allocations, the server's allocation (the old flavor) moves to the
    migration's uuid and the server claims the new flavor on a node Placement offers for it: another
    node than its own unless ``same_host`` ([DEFAULT] allow_resize_to_same_host), its own first when it
    may stay. The server is never without an allocation, so the allocations audit never sees it holding
    nothing. Confirm gives the migration's allocation back; revert moves it back onto the server
    (replacing the new flavor's)."""

    def __init__(self, placement: Any, *, same_host: bool = True, max_results: int = 1000) -> None:
        self.placement = placement
        self.same_host = same_host
        self.max_results = max_results

    def resize(self, server_uuid: str, migration: str, new_flavor: dict, *,
               image_properties: dict | None = None, zone: str | None = None, cold: bool = False,
               node: str | None = None, usable: Callable[[str], bool] | None = None) -> str | None:
        """Claim ``new_flavor`` for the server; the provider holding it (None: no Placement, or nothing
        claimed for the server before). NoValidHost when no node may take it: nothing changed then,
        the old flavor's allocation is still the server's. ``cold``: a cold migration, which never stays
        on its node (as Nova's, for a driver without COMPUTE_SAME_HOST_COLD_MIGRATE); ``node``: only
        that node (a migration's named host); ``usable``: whether a node may take the server (its group's
        policy; None: any)."""
        if self.placement is None:
            return None
        try:
            return self._resize(server_uuid, migration, new_flavor, image_properties, zone, cold, node, usable)
        except PlacementError as exc:  # Placement away: as Nova's scheduler, no valid host
            LOG.warning("server %s: resize not claimed, Placement failed: %s", server_uuid, exc.message)
            raise NoValidHost(f"Placement could not be asked for resources: {exc.message}") from None

    def _resize(self, server_uuid: str, migration: str, new_flavor: dict, image_properties: dict | None,
                zone: str | None, cold: bool = False, node: str | None = None,
                usable: Callable[[str], bool] | None = None) -> str | None:
        moved = self.placement.get_allocations(migration)
        held = self.placement.get_allocations(server_uuid)
        if moved.allocations:
            if held.allocations:
                return node_provider(held.allocations)  # moved and claimed already (a step tried again)
            # moved by an earlier version in a request of its own, not claimed: the move is undone and
            # made again together with the claim
            self.placement.move_allocations(migration, server_uuid)
            held = self.placement.get_allocations(server_uuid)
        if not held.allocations:
            return None  # nothing claimed for the server (a server from before Placement): nothing to move
        return self._move_and_claim(server_uuid, migration, held, new_flavor, image_properties, zone, cold, node,
                                    usable)

    def _move_and_claim(self, server_uuid: str, migration: str, held: Any, new_flavor: dict,
                        image_properties: dict | None, zone: str | None, cold: bool = False,
                        node: str | None = None, usable: Callable[[str], bool] | None = None) -> str:
        source = node_provider(held.allocations)
        query = resource_request(new_flavor, image_properties).query([zone_aggregate(zone)] if zone else None)
        found = self.placement.allocation_candidates(query, self.max_results)
        candidates = [c for c in found.candidates if node_provider(c.allocations) != source]
        if node is not None:
            candidates = [c for c in candidates if node_provider(c.allocations) == provider_uuid(node)]
        elif self.same_host and not cold:  # the server may stay where it is: its own node first (its VM need not move)
            candidates = [c for c in found.candidates if node_provider(c.allocations) == source] + candidates
        asked = "&".join(f"{k}={v}" for k, v in query)
        if usable is not None and candidates:  # the group's policy, as Nova's scheduler filters
            candidates = [c for c in candidates if node_provider(c.allocations) == source
                          or usable(self.node_of(node_provider(c.allocations)))]
            if not candidates:
                raise NoValidHost(f"No node the server's group allows has room for {asked}", filtered=True)
        if not candidates:
            where = (f" on {node}" if node is not None else " on another node" if cold
                     else "" if self.same_host else " on another node (allow_resize_to_same_host is false)")
            raise NoValidHost(f"No allocation candidates for {asked}{where}")
        for candidate in candidates:
            try:
                self.placement.move_and_claim(server_uuid, migration, held, candidate.allocations)
            except PlacementConflict as exc:
                if exc.concurrent_update:  # the server's allocation changed meanwhile (the audit): read again
                    held = self.placement.get_allocations(server_uuid)
                    if not held.allocations:
                        raise NoValidHost("The server's allocation went away meanwhile") from None
                continue
            return node_provider(candidate.allocations)
        raise NoValidHost(f"Every allocation candidate for {asked} was taken meanwhile")

    def node_of(self, provider: str) -> str:
        """The node a resource provider stands for (its name)."""
        found = self.placement.provider(provider)
        if found is None:
            raise PlacementError(f"resource provider {provider} is gone")
        return str(found["name"])

    def confirm(self, migration: str) -> None:
        if self.placement is not None:
            self.placement.delete_allocations(migration)

    def revert(self, server_uuid: str, migration: str, *, in_place: bool = False) -> None:
        """The migration's allocation (the old flavor) back onto the server, replacing the new flavor's;
        ``in_place``: onto the node the server holds now (its old node is gone)."""
        if self.placement is None:
            return
        relocate = None
        if in_place:
            held = self.placement.get_allocations(server_uuid).allocations
            moved = self.placement.get_allocations(migration).allocations
            if held and moved:
                relocate = {node_provider(moved): node_provider(held)}
        self.placement.move_allocations(migration, server_uuid, relocate)
