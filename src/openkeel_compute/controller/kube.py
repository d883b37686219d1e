"""lightkube, as the controller uses it: the client, the kinds, the one retry policy, the errors.

This module and the gateway (controller/gateway.py) are the only code that knows lightkube; only
``http_of`` reaches into its internals (the subresources and the streams have no lightkube resource).
Every write carries field manager ``openkeel`` and ``fieldValidation=Strict``. Requests are retried with
exponential backoff (and jitter) on 429, 5xx and transport errors (refused or dropped connections).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.core.generic_client import transform_exception
from lightkube.core.resource import NamespacedResource, api_info
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.apps_v1 import ControllerRevision
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret

from openkeel_compute import __version__
from openkeel_compute.controller.desired import NAMESPACE, ObjectKey
from openkeel_compute.kubevirt import mapping

LOG = logging.getLogger(__name__)

FIELD_MANAGER = mapping.MANAGER
USER_AGENT = f"openkeel-compute-controller/{__version__}"
_GROUP, _VERSION = mapping.INSTANCETYPE_API.split("/")
VM = create_namespaced_resource("kubevirt.io", "v1", "VirtualMachine", "virtualmachines")
VMI = create_namespaced_resource("kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances")
DATA_VOLUME = create_namespaced_resource("cdi.kubevirt.io", "v1beta1", "DataVolume", "datavolumes")
NAD = create_namespaced_resource("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition",
                                 "network-attachment-definitions")
#: every kind the controller reads or writes, by kind name
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
    "VirtualMachine": VM,
    "VirtualMachineInstance": VMI,
    "DataVolume": DATA_VOLUME,
    "NetworkAttachmentDefinition": NAD,
    "Secret": Secret,
    "PersistentVolume": PersistentVolume,
    "PersistentVolumeClaim": PersistentVolumeClaim,
    "ControllerRevision": ControllerRevision,
    "Node": Node,
    "Pod": Pod,
    "Lease": Lease,
    "VirtualMachineInstanceMigration": create_namespaced_resource(
        "kubevirt.io", "v1", "VirtualMachineInstanceMigration", "virtualmachineinstancemigrations"),
    "VirtualMachineSnapshot": create_namespaced_resource("snapshot.kubevirt.io", "v1beta1", "VirtualMachineSnapshot",
                                                         "virtualmachinesnapshots"),
    "VirtualMachineSnapshotContent": create_namespaced_resource(
        "snapshot.kubevirt.io", "v1beta1", "VirtualMachineSnapshotContent", "virtualmachinesnapshotcontents"),
    "VirtualMachineExport": create_namespaced_resource("export.kubevirt.io", "v1", "VirtualMachineExport",
                                                       "virtualmachineexports"),
}
MANAGED_KINDS = (mapping.CLUSTER_INSTANCETYPE, mapping.CLUSTER_PREFERENCE, mapping.INSTANCETYPE, mapping.PREFERENCE)
NAMESPACED_KINDS = frozenset({mapping.INSTANCETYPE, mapping.PREFERENCE})
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
#: what a failed cluster request raises (lightkube's ApiError is an httpx HTTPStatusError)
ClusterError = httpx2.HTTPError

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


def transient(exc: BaseException) -> bool:
    """Whether a cluster error says the cluster is away or busy (transport, 429, 5xx) rather than refusing."""
    return isinstance(exc, httpx2.TransportError) or status_code(exc) in RETRYABLE_STATUS


class Retry:
    """The retry policy of every cluster request: call again on 429/5xx/transport errors, delay base·2^n
    (±50 % jitter, ≤ 10 s, ``Retry-After`` honoured), at most ``max_retries`` times."""

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


NO_RETRY = Retry(0)


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


def http_of(client: Client) -> httpx2.Client:
    """The httpx client under a lightkube client: the one reach into lightkube's internals (pinned by
    tests/controller/test_gateway.py). KubeVirt's subresources, JSON patches, watches and pod logs go
    through it, with the same connection pool, credentials and request hooks."""
    return client._client._client


def make_client(kubeconfig: str | dict[str, Any], timeout: float = 10.0) -> Client:
    """A lightkube client on a kubeconfig file (or dict) whose writes all ask for strict field validation."""
    config = KubeConfig.from_dict(kubeconfig) if isinstance(kubeconfig, dict) else KubeConfig.from_file(kubeconfig)
    client = Client(config, field_manager=FIELD_MANAGER, timeout=httpx2.Timeout(timeout), trust_env=False)
    # lightkube has no fieldValidation parameter; its httpx client takes a request hook.
    http = http_of(client)
    http.event_hooks = {"request": [*http.event_hooks["request"], _strict_validation],
                        "response": http.event_hooks["response"]}
    # Names the controller in the cluster's audit log (and in the emulator's, tools/rbac_calls.py).
    http.headers["User-Agent"] = USER_AGENT
    return client


def _collection_path(kind: str) -> tuple[str, bool]:
    """The path of a kind's objects ("{ns}" in place of the namespace of a namespaced kind), and whether
    it is namespaced."""
    res = RESOURCES[kind]
    info = api_info(res)
    group, version = info.resource.group, info.resource.version
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    namespaced = issubclass(res, NamespacedResource)
    return (f"{base}/namespaces/{{ns}}/{info.plural}" if namespaced else f"{base}/{info.plural}"), namespaced


_COLLECTIONS = {kind: _collection_path(kind) for kind in RESOURCES}


def object_path(kind: str, namespace: str | None, name: str) -> str:
    """The API server's path of one object, as lightkube builds it (a namespaced kind with no namespace:
    "default", lightkube's default)."""
    path, namespaced = _COLLECTIONS[kind]
    return f"{path.format(ns=namespace or 'default') if namespaced else path}/{name}"


def raise_for_status(response: httpx2.Response) -> httpx2.Response:
    """The response when it is not an error; else the error as lightkube raises it (an ApiError with the
    API server's Status when the answer is JSON)."""
    try:
        response.raise_for_status()
    except httpx2.HTTPStatusError as exc:
        raise transform_exception(exc) from exc
    return response


def as_dict(obj: Any, kind: str | None = None) -> dict[str, Any]:
    """A lightkube object (or a generic resource's dict) as the API server's JSON."""
    data: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    if kind is not None:
        data.setdefault("kind", kind)
    return data
