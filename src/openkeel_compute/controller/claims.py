"""A server's resources claimed in Placement before its VM exists, and given back when it is gone.

``Claims.claim(server)`` (the create path of the server loop, before any object is applied):

1. GET /allocation_candidates with the request its flavor and image make (``placement.request``), in
   its availability zone's aggregate when it has a zone, at most ``[scheduler] max_placement_results``;
   the servers of one pass with the same request share one answer (``begin_pass`` starts a pass);
2. PUT /allocations/{server uuid} with consumer generation null (a new consumer) for each candidate in
   Placement's order until one is taken; a conflict (capacity taken meanwhile) drops that candidate
   from the shared answer and goes on to the next; a shared answer used up is asked for again;
3. the server's own allocations, when it has some, are its claim (a controller restarted between the
   claim and the VM uses the claim it made): Placement refuses the PUT for a new consumer then, and
   they are read;
4. the node of the taken candidate (the provider holding its MEMORY_MB, else its first) is the server's
   host and node, and the VM is pinned there (required node affinity on kubernetes.io/hostname);
   when the node cannot run it (its pod stays unschedulable past ``[controller] unschedulable_grace``),
   ``move`` claims on another node Placement offers, up to ``[scheduler] max_attempts`` nodes in all.

None left, no candidate at all, or Placement unreachable: NoValidHost, whose fault is Nova's
(500, "No valid host was found. "); the build ends in ERROR with nothing claimed and no VM.

``release(uuid)`` gives everything back (a deleted server, a build that failed).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from openkeel_compute.compute import flavor_copy
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.controller.providers import provider_uuid, zone_aggregate
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import sysmeta
from openkeel_compute.model.sysmeta import requested_nodes
from openkeel_compute.placement import errors
from openkeel_compute.placement.client import Candidate, PlacementClient
from openkeel_compute.placement.request import resource_request

LOG = logging.getLogger(__name__)
NO_VALID_HOST = "No valid host was found. "


NOT_ENOUGH_HOSTS = "There are not enough hosts available."


class NoValidHost(Exception):
    """``filtered``: Placement offered nodes the scheduler's filters refused (Nova's message then says
    there are not enough hosts)."""

    def __init__(self, details: str, *, filtered: bool = False) -> None:
        super().__init__(NO_VALID_HOST + details)
        self.fault = Fault(500, NO_VALID_HOST + (NOT_ENOUGH_HOSTS if filtered else ""), details)


def node_provider(allocations: Mapping[str, Mapping[str, int]]) -> str:
    for rp, resources in allocations.items():
        if "MEMORY_MB" in resources:
            return rp
    return next(iter(allocations))


class Claims:
    def __init__(self, placement: PlacementClient, *, max_attempts: int = 3, max_results: int = 1000) -> None:
        self.placement = placement
        self.max_attempts = max_attempts
        self.max_results = max_results
        self._names: dict[str, str] = {}  # provider uuid -> name (a provider's name never changes)
        self._shared: dict[tuple, list[Candidate]] = {}  # query -> candidates left, for one pass
        self._summaries: dict[tuple, dict[str, dict[str, Any]]] = {}  # query -> its answer's provider summaries
        self._made: dict[str, tuple[str, list[Candidate]]] = {}  # uuid -> (node, alternates) claimed together

    @classmethod
    def from_conf(cls, placement: PlacementClient, conf: Any) -> Claims:
        return cls(placement, max_attempts=conf.scheduler.max_attempts,
                   max_results=conf.scheduler.max_placement_results)

    def node_of(self, provider: str) -> str:
        if provider not in self._names:
            found = self.placement.provider(provider)
            if found is None:
                raise errors.PlacementError(f"resource provider {provider} is gone")
            self._names[provider] = found["name"]
        return self._names[provider]

    def request_of(self, server: Mapping[str, Any]):
        flavor = flavor_copy.FlavorCopy.loads(server["flavor"]).cur
        image = image_from_system_metadata({k: v for k, v in (server.get("system_metadata") or {}).items()
                                            if k.startswith("image_")})
        if (server.get("system_metadata") or {}).get(sysmeta.BOOT_FROM_VOLUME) == "True":
            flavor = dict(flavor, root_gb=0)  # the root disk is a volume: no local disk for it (Nova's is_bfv)
        return resource_request(flavor, image.get("properties"))

    def query_of(self, server: Mapping[str, Any]) -> list[tuple[str, str]]:
        """GET /allocation_candidates' query for the server: its resources and traits, its zone's aggregate,
        and the provider of the node it was forced or asked to go to (Nova's ``in_tree``), if any."""
        zone = server.get("availability_zone")
        query = self.request_of(server).query([zone_aggregate(str(zone))] if zone else None)
        nodes = requested_nodes(server.get("system_metadata"))
        if len(nodes) > 1:
            raise NoValidHost(f"The requested host and node differ: {', '.join(nodes)}")
        if nodes:
            query.append(("in_tree", provider_uuid(nodes[0])))
        return query

    def begin_pass(self) -> None:
        """Forget the candidates shared by the claims of the last pass (see ``claim``)."""
        self._shared.clear()
        self._summaries.clear()
        self._made.clear()

    def _candidates(self, query: list[tuple[str, str]]) -> list[Candidate]:
        found = self.placement.allocation_candidates(query, self.max_results)
        self._shared[tuple(query)] = list(found.candidates)
        self._summaries[tuple(query)] = found.summaries
        return self._shared[tuple(query)]

    def claim_many(self, servers: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        """Claim for the new servers of a pass in one POST /allocations; returns {uuid: node} of those
        claimed, whose ``claim`` then answers without asking Placement again.

        Each server gets the candidate its own ``claim`` would take: the shared answer in Placement's
        order, a candidate whose providers lack the room (by the answer's provider summaries, less what
        the servers before it took) dropped as a refused PUT drops it. Placement checks the whole request
        and takes it all or nothing; when it refuses, or cannot be asked, nothing is claimed here and
        every server is claimed one by one as before (its own conflicts, next candidates and faults).
        Servers already holding a node (a claim made before a restart), those whose request has no
        usable summaries and those no candidate of the answer can take are left to ``claim``."""
        plans: dict[tuple, tuple[list[Candidate], dict[str, dict[str, list[int]]]] | None] = {}
        chosen: dict[str, tuple[Mapping[str, Any], tuple, Candidate, list[Candidate]]] = {}
        try:
            for server in servers:
                if server.get("node") or str(server["uuid"]) in self._made:
                    continue
                try:
                    query = tuple(self.query_of(server))
                except NoValidHost:
                    continue  # claim() says so with the server's fault
                if query not in plans:
                    candidates = self._shared.get(query)
                    if candidates is None:
                        candidates = self._candidates(list(query))
                    room = {rp: {rc: [int(r["capacity"]), int(r["used"])]
                                 for rc, r in (summary.get("resources") or {}).items()}
                            for rp, summary in self._summaries.get(query, {}).items()}
                    known = all(rc in room.get(rp, {}) for c in candidates
                                for rp, resources in c.allocations.items() for rc in resources)
                    plans[query] = (list(candidates), room) if known else None
                plan = plans[query]
                if plan is None:
                    continue  # an answer whose summaries do not show every class asked for: one by one
                left, room = plan
                while left and not _fits(left[0].allocations, room):
                    left.pop(0)  # as a refused PUT drops it from the shared answer
                if not left:
                    continue
                taken = left[0]
                for rp, resources in taken.allocations.items():
                    for rc, amount in resources.items():
                        room[rp][rc][1] += amount
                chosen[str(server["uuid"])] = (server, query, taken, left[1:self.max_attempts])
            if len(chosen) < 2:
                return {}
            self.placement.claim_new({uuid: (taken.allocations, str(server["project_id"]), str(server["user_id"]))
                                      for uuid, (server, _query, taken, _alternates) in chosen.items()})
            made = {uuid: (self.node_of(node_provider(taken.allocations)), alternates)
                    for uuid, (_server, _query, taken, alternates) in chosen.items()}
        except errors.PlacementError as exc:
            LOG.info("%d claims together refused (%s): claimed one by one", len(chosen), exc.message)
            return {}
        for query, plan in plans.items():
            if plan is not None:
                self._shared[query][:] = plan[0]  # the candidates found full are gone for the rest of the pass
        self._made.update(made)
        return {uuid: node for uuid, (node, _alternates) in made.items()}

    def _existing(self, uuid: str) -> str | None:
        """The node of the server's own allocations, if it has some."""
        existing = self.placement.get_allocations(uuid)
        return self.node_of(node_provider(existing.allocations)) if existing.allocations else None

    def claim(self, server: Mapping[str, Any]) -> tuple[str, list[Candidate]]:
        """(node name, alternates) of the server's claim, made now or found; NoValidHost when none can be.

        The servers of one pass asking for the same resources share one GET /allocation_candidates, as
        Nova's scheduler serves a multi-create from one answer: each PUT is still checked by Placement,
        a candidate found full is dropped from the shared list, and only a fresh answer with nothing left
        is "no valid host". A consumer that exists already (a claim made before the controller restarted)
        refuses the PUT for a new consumer; its allocations are then the claim."""
        uuid = str(server["uuid"])
        if uuid in self._made:
            return self._made.pop(uuid)
        query = self.query_of(server)
        asked = "&".join(f"{k}={v}" for k, v in query)
        try:
            candidates = self._shared.get(tuple(query))
            fresh = candidates is None
            if candidates is None:
                candidates = self._candidates(query)
            offered = len(candidates)
            while True:
                for candidate in list(candidates):
                    try:
                        self.placement.put_allocations(uuid, candidate.allocations,
                                                       project_id=str(server["project_id"]),
                                                       user_id=str(server["user_id"]), consumer_generation=None)
                    except errors.PlacementConflict as exc:
                        if exc.concurrent_update and (found := self._existing(uuid)):
                            return found, []
                        LOG.info("server %s: candidate %s taken meanwhile (%s), trying the next", uuid,
                                 candidate.providers, exc.message)
                        candidates.remove(candidate)
                        continue
                    except errors.PlacementError as exc:
                        LOG.warning("server %s: claim failed: %s", uuid, exc.message)
                        raise NoValidHost(f"Placement could not claim the resources: {exc.message}") from None
                    index = candidates.index(candidate)
                    return (self.node_of(node_provider(candidate.allocations)),
                            candidates[index + 1:index + self.max_attempts])
                if not fresh:  # the shared answer ran out: ask again before saying no
                    candidates, fresh = self._candidates(query), True
                    offered = len(candidates)
                    continue
                if found := self._existing(uuid):  # its own earlier claim may hold the last room
                    return found, []
                if offered:
                    raise NoValidHost(f"Every allocation candidate for {asked} was taken meanwhile")
                LOG.info("server %s: Placement has no allocation candidates for %s", uuid, asked)
                raise NoValidHost(f"No allocation candidates for {asked}")
        except errors.PlacementError as exc:
            LOG.warning("server %s: no claim, Placement failed: %s", uuid, exc.message)
            raise NoValidHost(f"Placement could not be asked for resources: {exc.message}") from None

    def move(self, server: Mapping[str, Any], exclude: set[str],
             usable: Callable[[str], bool] | None = None) -> str | None:
        """Claim the server's resources on another node than those in ``exclude`` (the alternates of a
        build whose node could not run it), one ``usable`` accepts when given (the scheduler's filters):
        the first candidate on such a node replaces the server's
        allocations in one PUT at its consumer generation. The new node, or None when no other has room
        (the old claim is then left as it was)."""
        uuid = str(server["uuid"])
        try:
            current = self.placement.get_allocations(uuid)
            query = self.query_of(server)
            found = self.placement.allocation_candidates(query, self.max_results)
            for candidate in found.candidates:
                node = self.node_of(node_provider(candidate.allocations))
                if node in exclude or (usable is not None and not usable(node)):
                    continue
                try:
                    self.placement.put_allocations(uuid, candidate.allocations, project_id=str(server["project_id"]),
                                                   user_id=str(server["user_id"]),
                                                   consumer_generation=current.generation)
                except errors.PlacementConflict as exc:
                    if exc.concurrent_update:
                        return None  # the server's allocations changed meanwhile: its build ends as it is
                    continue
                return node
        except errors.PlacementError as exc:
            LOG.warning("server %s: no alternate node, Placement failed: %s", uuid, exc.message)
        return None

    def add_on(self, server: Mapping[str, Any], usable: Callable[[str], bool]) -> tuple[str | None, bool]:
        """Claim the server's resources on a further node ``usable`` accepts, beside what it holds (an
        evacuation: Nova's scheduler claims the target in the same consumer, the source's part staying
        until the source comes back). One PUT at the consumer's generation; the node, or None when no
        such node has room (nothing changed). Placement away raises NoValidHost."""
        uuid = str(server["uuid"])
        zone = server.get("availability_zone")
        query = self.request_of(server).query([zone_aggregate(str(zone))] if zone else None)
        try:
            current = self.placement.get_allocations(uuid)
            held = {rp: dict(resources) for rp, resources in (current.allocations or {}).items()}
            found = self.placement.allocation_candidates(query, self.max_results)
            refused = False
            for candidate in found.candidates:
                node = self.node_of(node_provider(candidate.allocations))
                if not usable(node) or set(candidate.allocations) & set(held):
                    refused = True
                    continue
                try:
                    self.placement.put_allocations(uuid, {**held, **candidate.allocations},
                                                   project_id=str(server["project_id"]),
                                                   user_id=str(server["user_id"]),
                                                   consumer_generation=current.generation)
                except errors.PlacementConflict as exc:
                    if exc.concurrent_update:
                        current = self.placement.get_allocations(uuid)
                        held = {rp: dict(r) for rp, r in (current.allocations or {}).items()}
                    continue
                return node, refused
        except errors.PlacementError as exc:
            raise NoValidHost(f"Placement could not be asked for resources: {exc.message}") from None
        return None, refused

    def drop_node(self, uuid: str, node: str) -> bool:
        """Take the node's part out of the server's allocations (Nova's
        ``remove_provider_tree_from_instance_allocation``); False when it held nothing there."""
        provider = provider_uuid(node)
        current = self.placement.get_allocations(uuid)
        if provider not in (current.allocations or {}):
            return False
        rest = {rp: r for rp, r in current.allocations.items() if rp != provider}
        if not rest:
            return self.placement.delete_allocations(uuid)
        self.placement.put_allocations(uuid, rest, project_id=str(current.project_id), user_id=str(current.user_id),
                                       consumer_generation=current.generation)
        return True

    def release(self, uuid: str) -> bool:
        """Give back what the server holds (False: it held nothing). Errors propagate: the caller tries
        again on its next pass."""
        released = self.placement.delete_allocations(uuid)
        if released:
            LOG.info("server %s: allocations given back", uuid)
        return released


def _fits(allocations: Mapping[str, Mapping[str, int]], room: Mapping[str, Mapping[str, list[int]]]) -> bool:
    """Whether every provider of a candidate still has the room it asks for ([capacity, used] per class)."""
    for rp, resources in allocations.items():
        for rc, amount in resources.items():
            capacity, used = room[rp][rc]
            if used + amount > capacity:
                return False
    return True


def alternates_json(alternates: list[Candidate]) -> str | None:
    """The alternates as the server's system metadata keeps them (None: none)."""
    if not alternates:
        return None
    return json.dumps([c.allocations for c in alternates], sort_keys=True, separators=(",", ":"))
