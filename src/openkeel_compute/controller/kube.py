"""Kubernetes through lightkube: the four instancetype/preference kinds, namespaces, retries, relists.

Every write carries field manager ``openkeel`` and ``fieldValidation=Strict``. Requests are retried with
exponential backoff (and jitter) on 429, 5xx and transport errors (refused or dropped connections); a
list that answers 410 Gone (expired continue token) starts again from the beginning.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Collection
from typing import Any, TypeVar

import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.core.generic_client import ALL_NS
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from openkeel_compute import __version__
from openkeel_compute.controller.desired import NAMESPACE, ObjectKey, key_of
from openkeel_compute.kubevirt import mapping

LOG = logging.getLogger(__name__)

FIELD_MANAGER = mapping.MANAGER
USER_AGENT = f"openkeel-compute-controller/{__version__}"
_GROUP, _VERSION = mapping.INSTANCETYPE_API.split("/")
RESOURCES: dict[str, Any] = {
    mapping.CLUSTER_INSTANCETYPE: create_global_resource(
        _GROUP, _VERSION, mapping.CLUSTER_INSTANCETYPE, "virtualmachineclusterinstancetypes"),
    mapping.CLUSTER_PREFERENCE: create_global_resource(
        _GROUP, _VERSION, mapping.CLUSTER_PREFERENCE, "virtualmachineclusterpreferences"),
    mapping.INSTANCETYPE: create_namespaced_resource(
        _GROUP, _VERSION, mapping.INSTANCETYPE, "virtualmachineinstancetypes"),
    mapping.PREFERENCE: create_namespaced_resource(
        _GROUP, _VERSION, mapping.PREFERENCE, "virtualmachinepreferences"),
    NAMESPACE: Namespace,
}
MANAGED_KINDS = (mapping.CLUSTER_INSTANCETYPE, mapping.CLUSTER_PREFERENCE, mapping.INSTANCETYPE, mapping.PREFERENCE)
NAMESPACED_KINDS = frozenset({mapping.INSTANCETYPE, mapping.PREFERENCE})
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
LIST_CHUNK = 500
# Per-name lookups cost 4 requests a name; above this many names one full list is cheaper.
PER_NAME_LIMIT = 16

T = TypeVar("T")


class Transient(Exception):
    """The cluster did not take the change now (retries exhausted, stale read, lost leadership): try later."""


class Refused(Exception):
    """The cluster refused this object for good (validation, permissions): retrying the same bytes won't help."""


@dataclasses.dataclass
class Observed:
    objects: dict[ObjectKey, dict[str, Any]]
    namespaces: set[str] | None  # None: unknown (the render backend cannot tell)


def status_code(exc: BaseException) -> int | None:
    if isinstance(exc, ApiError):
        return exc.status.code
    if isinstance(exc, httpx2.HTTPStatusError):
        return exc.response.status_code
    return None


class Retry:
    """Call a request again on 429/5xx/transport errors: delay base·2^n (±50 % jitter, ≤ 10 s)."""

    def __init__(self, max_retries: int = 5, base_delay: float = 0.2, sleep: Callable[[float], None] = time.sleep,
                 on_retry: Callable[[str], None] | None = None) -> None:
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.sleep = sleep
        self.on_retry = on_retry

    def __call__(self, what: str, func: Callable[[], T]) -> T:
        attempt = 0
        while True:
            try:
                return func()
            except httpx2.HTTPStatusError as exc:  # an ApiError, or a proxy's non-Status error page
                code = status_code(exc)
                if code not in RETRYABLE_STATUS or attempt >= self.max_retries:
                    raise
                reason = f"HTTP {code}"
                retry_after = _retry_after(exc)
            except httpx2.TransportError as exc:
                if attempt >= self.max_retries:
                    raise
                reason, retry_after = type(exc).__name__, None
            delay = retry_after if retry_after is not None else min(10.0, self.base_delay * 2 ** attempt)
            delay *= random.uniform(0.5, 1.5)
            LOG.info("%s: %s, retry %d/%d in %.2fs", what, reason, attempt + 1, self.max_retries, delay)
            if self.on_retry is not None:
                self.on_retry(reason)
            self.sleep(delay)
            attempt += 1


def _retry_after(exc: httpx2.HTTPStatusError) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("Retry-After") if response is not None else None
    try:
        return min(10.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _strict_validation(request: httpx2.Request) -> None:
    if request.method in ("POST", "PUT", "PATCH") and "fieldValidation" not in request.url.params:
        request.url = request.url.copy_merge_params({"fieldValidation": "Strict"})


def make_client(kubeconfig: str | dict[str, Any], timeout: float = 10.0) -> Client:
    """A lightkube client on a kubeconfig file (or dict) whose writes all ask for strict field validation."""
    config = KubeConfig.from_dict(kubeconfig) if isinstance(kubeconfig, dict) else KubeConfig.from_file(kubeconfig)
    client = Client(config, field_manager=FIELD_MANAGER, timeout=httpx2.Timeout(timeout), trust_env=False)
    # lightkube has no fieldValidation parameter; its httpx client takes a request hook (the only private
    # attribute we touch, pinned by tests/controller/test_kube_client.py).
    http = client._client._client
    http.event_hooks = {"request": [*http.event_hooks["request"], _strict_validation],
                        "response": http.event_hooks["response"]}
    # Names the controller in the cluster's audit log (and in the emulator's, tools/rbac_calls.py).
    http.headers["User-Agent"] = USER_AGENT
    return client


def _as_dict(obj: Any, kind: str) -> dict[str, Any]:
    data = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    data.setdefault("kind", kind)
    return data


class KubeBackend:
    """Observe and change instancetypes, preferences and namespaces in a real cluster."""

    def __init__(self, client: Client, retry: Retry | None = None) -> None:
        self.client = client
        self.retry = retry or Retry()

    # -- reading -------------------------------------------------------------------------------------

    def _list(self, kind: str, name: str | None = None) -> list[dict[str, Any]]:
        res = RESOURCES[kind]
        kwargs: dict[str, Any] = {"chunk_size": LIST_CHUNK}
        if kind in NAMESPACED_KINDS:
            kwargs["namespace"] = ALL_NS
        if name is not None:
            kwargs["fields"] = {"metadata.name": name}
        for attempt in range(5):
            try:
                return self.retry(f"list {kind}", lambda: [_as_dict(o, kind) for o in self.client.list(res, **kwargs)])
            except ApiError as exc:
                if exc.status.code != 410 or attempt == 4:
                    raise
                LOG.info("list %s: 410 Gone (continue token expired), listing again", kind)
        raise AssertionError("unreachable")

    def namespaces(self) -> set[str]:
        return {o["metadata"]["name"] for o in self._list(NAMESPACE)}

    def observe(self, names: Collection[str] | None = None) -> Observed:
        """Objects of the four kinds (ours and anyone's) named ``names``, or all of them; plus the namespaces."""
        objects: dict[ObjectKey, dict[str, Any]] = {}
        if names is not None and len(names) <= PER_NAME_LIMIT:
            for name in names:
                for kind in MANAGED_KINDS:
                    objects.update((key_of(o), o) for o in self._list(kind, name))
        else:
            wanted = None if names is None else set(names)
            for kind in MANAGED_KINDS:
                objects.update((key_of(o), o) for o in self._list(kind)
                               if wanted is None or o["metadata"]["name"] in wanted)
        return Observed(objects, self.namespaces())

    # -- writing -------------------------------------------------------------------------------------

    def create(self, body: dict[str, Any]) -> None:
        key = key_of(body)
        obj = RESOURCES[key.kind].from_dict(body)
        self.retry(f"create {key}", lambda: self.client.create(obj, field_manager=FIELD_MANAGER))

    def apply(self, body: dict[str, Any]) -> None:
        key = key_of(body)
        self.retry(f"apply {key}", lambda: self.client.patch(
            RESOURCES[key.kind], key.name, body, namespace=key.namespace, patch_type=PatchType.APPLY,
            field_manager=FIELD_MANAGER, force=True))

    def replace(self, body: dict[str, Any]) -> None:
        key = key_of(body)
        obj = RESOURCES[key.kind].from_dict(body)
        self.retry(f"replace {key}", lambda: self.client.replace(obj, field_manager=FIELD_MANAGER))

    def delete(self, key: ObjectKey) -> None:
        try:
            self.retry(f"delete {key}", lambda: self.client.delete(RESOURCES[key.kind], key.name,
                                                                    namespace=key.namespace))
        except ApiError as exc:
            if exc.status.code != 404:  # already gone is what we wanted
                raise

    def close(self) -> None:
        self.client.close()
