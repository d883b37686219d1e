"""A Placement client over keystoneauth, with Nova's ``[placement]`` options.

Where Placement is and who we are, as Nova's ``[placement]`` group says it: keystoneauth's auth plugin
options (``auth_type``, ``auth_url``, ``username``, ``password``, ``project_name``, ``user_domain_name``,
``project_domain_name``, ...; ``auth_type = admin_token`` with ``endpoint`` and ``token`` for a Placement
without Keystone), its session options (``cafile``, ``insecure``, ``timeout``, ...) and its adapter
options (``service_type`` placement, ``valid_interfaces`` internal then public, ``region_name``,
``endpoint_override``). Nothing else is read.

The calls and the microversions they use (those of Nova's report client for the same call):

==============================================  ======  ==================================================
call                                            version  Placement request
==============================================  ======  ==================================================
``get_allocations(consumer)``                   1.28    GET /allocations/{consumer}
``put_allocations(consumer, ...)``              1.28    PUT /allocations/{consumer} (consumer generation)
``claim_new(claims)``                           1.28    POST /allocations (new consumers, all or nothing)
``delete_allocations(consumer)``                1.28    GET, then PUT with no allocations (generation
                                                        checked) or, with ``force``, DELETE
``move_allocations(source, target)``            1.28    POST /allocations (both consumers, one request)
``allocation_candidates(query, limit)``         1.39    GET /allocation_candidates
``usages(project_id, user_id)``                 1.9     GET /usages
providers, inventories, traits, aggregates      1.26    /resource_providers/..., /traits (error codes
                                                        from 1.23, reserved may equal total from 1.26)
==============================================  ======  ==================================================

Errors become domain errors (``placement.errors``): unreachable or 5xx → PlacementUnavailable; 409 →
PlacementConflict (``concurrent_update`` tells a generation conflict from a capacity one); anything
else unexpected → PlacementError. A 404 of a consumer's allocations is not an error (no allocations).

One client per process: it is thread-safe (one keystoneauth session, its connection pool shared).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from openkeel_compute.conf.keystoneauth import client_opts, register_client_opts
from openkeel_compute.placement import errors
from openkeel_compute.service_session import ConfSession

LOG = logging.getLogger(__name__)
GROUP = "placement"
SERVICE_TYPE = "placement"
DEFAULT_VALID_INTERFACES = ["internal", "public"]

CONSUMER_GENERATION_VERSION = "1.28"
ALLOCATION_CANDIDATES_VERSION = "1.39"
USAGES_VERSION = "1.9"
PROVIDER_VERSION = "1.26"  # error codes (1.23+), reserved may equal total (1.26)
AGGREGATES_VERSION = "1.26"
TRAITS_VERSION = "1.26"


def register_opts(conf: cfg.ConfigOpts) -> None:
    if GROUP in conf and "service_type" in conf[GROUP]:
        return  # already registered
    # microversions: per call
    register_client_opts(conf, GROUP, [], adapter=(SERVICE_TYPE, DEFAULT_VALID_INTERFACES))


def list_opts():
    return [(GROUP, client_opts([], adapter=(SERVICE_TYPE, DEFAULT_VALID_INTERFACES)))]


def configured(conf: cfg.ConfigOpts) -> bool:
    """True when ``[placement]`` names credentials (``auth_type``)."""
    register_opts(conf)
    return bool(conf.placement.auth_type)


@dataclasses.dataclass(frozen=True)
class ConsumerAllocations:
    """A consumer's allocations: {provider uuid: {resource class: amount}}, its generation (None: the
    consumer does not exist), and its project and user (None when it does not exist)."""

    allocations: dict[str, dict[str, int]]
    generation: int | None
    project_id: str | None = None
    user_id: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ConsumerAllocations:
        return cls({rp: dict(alloc.get("resources") or {}) for rp, alloc in (body.get("allocations") or {}).items()},
                   body.get("consumer_generation"), body.get("project_id"), body.get("user_id"))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One allocation request of GET /allocation_candidates: ``allocations`` ({provider uuid:
    {resource class: amount}}) is what PUT /allocations claims; ``mappings`` maps request groups to
    providers (1.34+)."""

    allocations: dict[str, dict[str, int]]
    mappings: dict[str, list[str]]

    @property
    def providers(self) -> list[str]:
        return list(self.allocations)


@dataclasses.dataclass(frozen=True)
class Candidates:
    """What GET /allocation_candidates answered: the candidates in Placement's order and the summaries
    of the providers involved ({uuid: summary body with ``resources``, ``traits``, ...})."""

    candidates: list[Candidate]
    summaries: dict[str, dict[str, Any]]


def _error_of(resp) -> tuple[str, str | None]:
    """(detail, code) of a Placement error body (its JSON errors list), else the body's text."""
    try:
        first = (resp.json().get("errors") or [{}])[0]
    except (ValueError, AttributeError):
        return resp.text[:300], None
    return str(first.get("detail") or first.get("title") or resp.text[:300]).strip(), first.get("code")


def _relocated(allocations: Mapping[str, Mapping[str, int]], relocate: Mapping[str, str]) -> dict:
    """``allocations`` with each provider in ``relocate`` replaced by its counterpart (amounts added up)."""
    out: dict[str, dict[str, int]] = {}
    for rp, resources in allocations.items():
        into = out.setdefault(relocate.get(rp, rp), {})
        for rc, amount in resources.items():
            into[rc] = into.get(rc, 0) + amount
    return out


def _payload(allocations: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    return {rp: {"resources": dict(resources)} for rp, resources in allocations.items()}


class PlacementClient:
    """Placement for one OpenKeel process. Build with ``from_conf(conf)``."""

    def __init__(self, adapter) -> None:
        self.adapter = adapter

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> PlacementClient:
        """The client ``[placement]`` describes; PlacementNotConfigured when it names no auth_type."""
        register_opts(conf)
        if not conf.placement.auth_type:
            raise errors.PlacementNotConfigured(
                "[placement] is not configured: set auth_type and its credentials (e.g. auth_type = password, "
                "auth_url, username, password, project_name, user_domain_name, project_domain_name)")
        keystone = ConfSession(conf, GROUP, authenticated=True)
        return cls(keystone.adapter(keystone.credential()))

    @classmethod
    def for_endpoint(cls, url: str, token: str, timeout: float | None = 30.0) -> PlacementClient:
        """A client of the Placement at ``url`` that sends ``token`` (the embedded Placement's noauth2)."""
        from keystoneauth1 import adapter, session, token_endpoint

        auth = token_endpoint.Token(url, token)
        return cls(adapter.Adapter(session.Session(auth=auth, timeout=timeout), service_type=SERVICE_TYPE,
                                   endpoint_override=url, raise_exc=False))

    # -- the HTTP layer ------------------------------------------------------------------------------
    def _request(self, method: str, path: str, version: str, body: Any = None, params: Any = None):
        headers = {"OpenStack-API-Version": f"placement {version}", "Accept": "application/json"}
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        if params is not None:
            kwargs["params"] = params
        try:
            resp = self.adapter.request(path, method, **kwargs)
        except ks_exc.EndpointNotFound as exc:
            raise errors.PlacementUnavailable(f"Placement has no endpoint: {exc}", transport=exc) from None
        except (ks_exc.ConnectFailure, ks_exc.ConnectTimeout, ks_exc.RetriableConnectionFailure,
                ks_exc.UnknownConnectionError, ks_exc.SSLError, ks_exc.DiscoveryFailure) as exc:
            raise errors.PlacementUnavailable(f"Placement is unreachable: {exc}", transport=exc) from None
        except ks_exc.ClientException as exc:  # authentication failed, bad catalog, ...
            raise errors.PlacementUnavailable(f"Placement cannot be used: {exc}", transport=exc) from None
        if resp.status_code >= 500:
            detail, code = _error_of(resp)
            raise errors.PlacementUnavailable(f"Placement answered {resp.status_code} to {method} {path}: {detail}",
                                              resp.status_code, code)
        return resp

    def _fail(self, resp, method: str, path: str, conflict=errors.PlacementConflict):
        detail, code = _error_of(resp)
        message = f"Placement answered {resp.status_code} to {method} {path}: {detail}"
        if resp.status_code == 409:
            raise conflict(message, 409, code)
        raise errors.PlacementError(message, resp.status_code, code)

    def _json(self, method: str, path: str, version: str, ok: Iterable[int] = (200,), **kwargs) -> Any:
        resp = self._request(method, path, version, **kwargs)
        if resp.status_code not in ok:
            self._fail(resp, method, path)
        return resp.json() if resp.status_code == 200 else None

    # -- allocations -----------------------------------------------------------------------------------
    def get_allocations(self, consumer: str) -> ConsumerAllocations:
        """The consumer's allocations (empty, generation None, when it has none)."""
        resp = self._request("GET", f"/allocations/{consumer}", CONSUMER_GENERATION_VERSION)
        if resp.status_code == 404:
            return ConsumerAllocations({}, None)
        if resp.status_code != 200:
            self._fail(resp, "GET", f"/allocations/{consumer}")
        return ConsumerAllocations.from_body(resp.json())

    def put_allocations(self, consumer: str, allocations: Mapping[str, Mapping[str, int]], *, project_id: str,
                        user_id: str, consumer_generation: int | None) -> None:
        """Replace the consumer's allocations. ``consumer_generation`` None claims for a new consumer.
        PlacementConflict: the generation moved on (``concurrent_update``) or capacity is short."""
        body = {"allocations": _payload(allocations), "project_id": project_id, "user_id": user_id,
                "consumer_generation": consumer_generation}
        resp = self._request("PUT", f"/allocations/{consumer}", CONSUMER_GENERATION_VERSION, body=body)
        if resp.status_code != 204:
            self._fail(resp, "PUT", f"/allocations/{consumer}")

    def claim_new(self, claims: Mapping[str, tuple[Mapping[str, Mapping[str, int]], str, str]]) -> None:
        """Claim for several new consumers in one POST /allocations: {consumer: (allocations, project_id,
        user_id)}, each with consumer generation null. All or nothing: PlacementConflict when one
        consumer exists already or a provider lacks the capacity, and then none is claimed."""
        body = {consumer: {"allocations": _payload(allocations), "project_id": project_id, "user_id": user_id,
                           "consumer_generation": None}
                for consumer, (allocations, project_id, user_id) in claims.items()}
        resp = self._request("POST", "/allocations", CONSUMER_GENERATION_VERSION, body=body)
        if resp.status_code != 204:
            self._fail(resp, "POST", "/allocations")

    def delete_allocations(self, consumer: str, *, force: bool = False) -> bool:
        """Give back everything the consumer holds; False when it held nothing.

        As Nova: without ``force``, read the allocations and PUT them empty at that generation (a
        concurrent change is a PlacementConflict rather than lost); with ``force``, DELETE.
        """
        if force:
            resp = self._request("DELETE", f"/allocations/{consumer}", CONSUMER_GENERATION_VERSION)
            if resp.status_code == 404:
                return False
            if resp.status_code != 204:
                self._fail(resp, "DELETE", f"/allocations/{consumer}")
            return True
        current = self.get_allocations(consumer)
        if not current.allocations:
            return False
        # allocations always carry their consumer's project and user
        self.put_allocations(consumer, {}, project_id=current.project_id, user_id=current.user_id,  # type: ignore[arg-type]
                             consumer_generation=current.generation)
        return True

    def move_allocations(self, source_consumer: str, target_consumer: str,
                         relocate: Mapping[str, str] | None = None) -> bool:
        """Move every allocation of ``source_consumer`` to ``target_consumer`` in one POST /allocations
        (both consumers' generations checked; the target's own allocations are replaced, as Nova does
        when a resize hands the server's allocation to its migration). ``relocate`` ({provider: another})
        puts what the source held against a provider onto another one. False when the source held
        nothing (nothing moved). PlacementConflict when either consumer changed meanwhile."""
        source = self.get_allocations(source_consumer)
        if not source.allocations:
            LOG.info("no allocations of consumer %s to move to %s", source_consumer, target_consumer)
            return False
        target = self.get_allocations(target_consumer)
        if target.allocations:
            LOG.warning("consumer %s already has allocations %s: replaced by those of %s", target_consumer,
                        target.allocations, source_consumer)
        body = {
            source_consumer: {"allocations": {}, "project_id": source.project_id, "user_id": source.user_id,
                              "consumer_generation": source.generation},
            target_consumer: {"allocations": _payload(_relocated(source.allocations, relocate or {})),
                              "project_id": source.project_id,
                              "user_id": source.user_id, "consumer_generation": target.generation},
        }
        resp = self._request("POST", "/allocations", CONSUMER_GENERATION_VERSION, body=body)
        if resp.status_code != 204:
            self._fail(resp, "POST", "/allocations")
        return True

    def move_and_claim(self, consumer: str, migration: str, held: ConsumerAllocations,
                       allocations: Mapping[str, Mapping[str, int]]) -> None:
        """A move's start in one POST /allocations, as Nova's conductor hands a server's allocation to
        its migration: ``migration`` takes what ``consumer`` holds (``held``, read with its generation)
        and ``consumer`` takes ``allocations`` (the new flavor's) in the same request. All or nothing,
        so the server is never seen holding nothing: PlacementConflict when a provider lacks the room
        or either consumer changed meanwhile, and then nothing changed."""
        migration_now = self.get_allocations(migration)
        body = {
            migration: {"allocations": _payload(held.allocations), "project_id": held.project_id,
                        "user_id": held.user_id, "consumer_generation": migration_now.generation},
            consumer: {"allocations": _payload(allocations), "project_id": held.project_id,
                       "user_id": held.user_id, "consumer_generation": held.generation},
        }
        resp = self._request("POST", "/allocations", CONSUMER_GENERATION_VERSION, body=body)
        if resp.status_code != 204:
            self._fail(resp, "POST", "/allocations")

    def allocation_candidates(self, query: Mapping[str, Any] | Iterable[tuple[str, str]],
                              limit: int | None = None) -> Candidates:
        """GET /allocation_candidates with ``query`` (e.g. ``ResourceRequest.query()``: resources,
        required, member_of, granular groups, group_policy), at most ``limit`` candidates."""
        params = list(query.items()) if isinstance(query, Mapping) else list(query)
        if limit:
            params.append(("limit", str(limit)))
        body = self._json("GET", "/allocation_candidates", ALLOCATION_CANDIDATES_VERSION, params=params)
        candidates = [Candidate({rp: dict(a.get("resources") or {}) for rp, a in req["allocations"].items()},
                                dict(req.get("mappings") or {}))
                      for req in body.get("allocation_requests") or []]
        return Candidates(candidates, dict(body.get("provider_summaries") or {}))

    def usages(self, project_id: str, user_id: str | None = None) -> dict[str, int]:
        """{resource class: amount} the project (and, given, the user in it) holds (quota counting)."""
        params = {"project_id": project_id}
        if user_id:
            params["user_id"] = user_id
        return dict(self._json("GET", "/usages", USAGES_VERSION, params=params).get("usages") or {})

    # -- resource providers --------------------------------------------------------------------------------
    def providers(self, **filters: str) -> list[dict[str, Any]]:
        """Resource providers (uuid, name, generation, ...), filtered as GET /resource_providers filters."""
        body = self._json("GET", "/resource_providers", PROVIDER_VERSION, params=filters or None)
        return list(body.get("resource_providers") or [])

    def provider(self, uuid: str) -> dict[str, Any] | None:
        resp = self._request("GET", f"/resource_providers/{uuid}", PROVIDER_VERSION)
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            self._fail(resp, "GET", f"/resource_providers/{uuid}")
        return resp.json()

    def create_provider(self, uuid: str, name: str) -> dict[str, Any]:
        """Create the provider (its generation 0); PlacementConflict when the uuid or name is taken."""
        resp = self._request("POST", "/resource_providers", PROVIDER_VERSION, body={"uuid": uuid, "name": name})
        if resp.status_code != 200:
            self._fail(resp, "POST", "/resource_providers")
        return resp.json()

    def delete_provider(self, uuid: str) -> bool:
        """Delete the provider; False when it did not exist; ProviderInUse while it has allocations."""
        resp = self._request("DELETE", f"/resource_providers/{uuid}", PROVIDER_VERSION)
        if resp.status_code == 404:
            return False
        if resp.status_code != 204:
            self._fail(resp, "DELETE", f"/resource_providers/{uuid}", conflict=errors.ProviderInUse)
        return True

    def inventories(self, uuid: str) -> tuple[int, dict[str, dict[str, Any]]]:
        """(provider generation, {resource class: inventory record})."""
        body = self._json("GET", f"/resource_providers/{uuid}/inventories", PROVIDER_VERSION)
        return body["resource_provider_generation"], dict(body.get("inventories") or {})

    def set_inventories(self, uuid: str, generation: int, inventories: Mapping[str, Mapping[str, Any]]) -> int:
        """Replace the provider's inventories at ``generation``; returns the new generation.
        ProviderInUse when an inventory in use would go (placement.inventory.inuse)."""
        body = {"resource_provider_generation": generation,
                "inventories": {rc: dict(inv) for rc, inv in inventories.items()}}
        resp = self._request("PUT", f"/resource_providers/{uuid}/inventories", PROVIDER_VERSION, body=body)
        if resp.status_code != 200:
            detail, code = _error_of(resp)
            # PUT answers an inventory in use without its error code (DELETE has it): the detail says it.
            in_use = code == "placement.inventory.inuse" or " in use" in detail
            conflict = errors.ProviderInUse if in_use else errors.PlacementConflict
            self._fail(resp, "PUT", f"/resource_providers/{uuid}/inventories", conflict=conflict)
        return resp.json()["resource_provider_generation"]

    def traits(self, uuid: str) -> tuple[int, set[str]]:
        body = self._json("GET", f"/resource_providers/{uuid}/traits", TRAITS_VERSION)
        return body["resource_provider_generation"], set(body.get("traits") or [])

    def ensure_traits(self, names: Iterable[str]) -> None:
        """Create the custom traits (CUSTOM_*) Placement does not know yet (standard ones always exist)."""
        for name in sorted(set(names)):
            if name.startswith("CUSTOM_"):
                self._json("PUT", f"/traits/{name}", TRAITS_VERSION, ok=(201, 204))

    def set_traits(self, uuid: str, generation: int, traits: Iterable[str]) -> int:
        """Replace the provider's traits at ``generation`` (creating custom ones); the new generation."""
        traits = sorted(set(traits))
        self.ensure_traits(traits)
        body = self._json("PUT", f"/resource_providers/{uuid}/traits", TRAITS_VERSION,
                          body={"resource_provider_generation": generation, "traits": traits})
        return body["resource_provider_generation"]

    def aggregates(self, uuid: str) -> tuple[int, set[str]]:
        body = self._json("GET", f"/resource_providers/{uuid}/aggregates", AGGREGATES_VERSION)
        return body["resource_provider_generation"], set(body.get("aggregates") or [])

    def set_aggregates(self, uuid: str, generation: int, aggregates: Iterable[str]) -> int:
        body = self._json("PUT", f"/resource_providers/{uuid}/aggregates", AGGREGATES_VERSION,
                          body={"resource_provider_generation": generation, "aggregates": sorted(set(aggregates))})
        return body["resource_provider_generation"]

    def provider_allocations(self, uuid: str) -> dict[str, dict[str, int]]:
        """{consumer uuid: {resource class: amount}} held against the provider."""
        body = self._json("GET", f"/resource_providers/{uuid}/allocations", PROVIDER_VERSION)
        return {c: dict(a.get("resources") or {}) for c, a in (body.get("allocations") or {}).items()}

    def provider_usages(self, uuid: str) -> dict[str, int]:
        body = self._json("GET", f"/resource_providers/{uuid}/usages", PROVIDER_VERSION)
        return dict(body.get("usages") or {})
