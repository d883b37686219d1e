"""The cluster gateway: every Kubernetes request the controller makes goes through ``Gateway``.

One retry policy (kube.Retry: 429, 5xx and transport errors, backoff with jitter) for every request but
two kinds: watches (the watch cache lists again instead) and the Lease (the elector's renewal loop is its
retry; a retried renewal could outlive the renew deadline). Answers are the API server's JSON; a 404 on a
read is None, on a delete nothing. Only objects labelled ``app.kubernetes.io/managed-by=openkeel`` are
ever a server's (``ours``): a foreign object under the same name is left alone.

It serves the flavor engine (``observe``/``create``/``apply``/``replace``/``delete``, the engine's
Backend), the server loop and its steps, the nodes' publication and the leader election.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Collection, Iterator
from typing import Any

import orjson
from lightkube import ApiError, Client
from lightkube.core.generic_client import ALL_NS
from lightkube.resources.coordination_v1 import Lease

from openkeel_compute.controller.desired import NAMESPACE, ObjectKey, key_of, namespace_object
from openkeel_compute.controller.kube import (
    FIELD_MANAGER,
    MANAGED_KINDS,
    NAMESPACED_KINDS,
    NO_RETRY,
    RESOURCES,
    Observed,
    Retry,
    as_dict,
    http_of,
    object_path,
    raise_for_status,
)
from openkeel_compute.controller.watch import SELECTOR, WATCHED, ObjectView, Snapshot
from openkeel_compute.kubevirt import mapping
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import SERVER_ID

LIST_CHUNK = 500
# Per-name lookups cost 4 requests a name; above this many names one full list is cheaper.
PER_NAME_LIMIT = 16
#: KubeVirt's subresource verbs: the plural they act on, and the 409 text that says the verb's end state
#: is already there (the request is then done)
SUBRESOURCES: dict[str, tuple[str, str | None]] = {
    "start": ("virtualmachines", "already running"),
    "stop": ("virtualmachines", "not running"),
    "restart": ("virtualmachines", None),
    "softreboot": ("virtualmachineinstances", None),
    "pause": ("virtualmachineinstances", "already paused"),
    "unpause": ("virtualmachineinstances", "not paused"),
}
#: the query of a server-side apply (lightkube's, with the strict field validation of kube.make_client's hook)
_APPLY_QUERY = f"?force=true&fieldManager={FIELD_MANAGER}&fieldValidation=Strict"
_APPLY_HEADERS = {"Content-Type": "application/apply-patch+yaml"}
_PATCH_TYPES = {"json": "application/json-patch+json", "merge": "application/merge-patch+json"}
_MANAGED = {mapping.MANAGED_BY: FIELD_MANAGER}
#: the kinds of a server's own instancetype and preference (labelled with the server, owned by its VM)
SERVER_SIZING_KINDS = (mapping.INSTANCETYPE, mapping.PREFERENCE)
#: KubeVirt's label on a ControllerRevision: the instancetype or preference it is a copy of
REVISION_OF = "instancetype.kubevirt.io/object-name"


def server_labels(uuid: str) -> dict[str, str]:
    """The labels that select a server's Secrets and DataVolumes."""
    return {SERVER_ID: server_vm_name(uuid), **_MANAGED}


def _is_ours(obj: dict[str, Any] | None) -> bool:
    return (((obj or {}).get("metadata") or {}).get("labels") or {}).get(mapping.MANAGED_BY) == FIELD_MANAGER


class Gateway:
    def __init__(self, client: Client, retry: Retry | None = None) -> None:
        self.client = client
        self.retry = retry or Retry()
        self._http = http_of(client)

    def close(self) -> None:
        self.client.close()

    # -- generic requests --------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when there is none."""
        try:
            obj = self.retry(f"get {kind}/{name}", lambda: self.client.get(RESOURCES[kind], name, namespace=namespace))
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        return as_dict(obj, kind)

    def ours(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object if it is there and labelled managed-by openkeel; anyone else's is never ours."""
        obj = self.get(kind, name, namespace)
        return obj if _is_ours(obj) else None

    def list_of(self, kind: str, namespace: str | None = None, labels: dict[str, str] | None = None,
             name: str | None = None) -> list[dict[str, Any]]:
        """Objects of a kind (``namespace`` "*": every namespace), paged; a 410 Gone (expired continue
        token) lists again from the start."""
        kwargs: dict[str, Any] = {"chunk_size": LIST_CHUNK}
        if namespace is not None:
            kwargs["namespace"] = ALL_NS if namespace == "*" else namespace
        if labels:
            kwargs["labels"] = labels
        if name is not None:
            kwargs["fields"] = {"metadata.name": name}
        for attempt in range(5):
            try:
                return self.retry(f"list {kind}", lambda: [as_dict(o, kind) for o in
                                                           self.client.list(RESOURCES[kind], **kwargs)])
            except ApiError as exc:
                if exc.status.code != 410 or attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def list_json(self, path: str, selector: str) -> tuple[list[dict[str, Any]], str]:
        """(items, resourceVersion) of a cluster-wide list at ``path``, paged, as the API server's JSON: no
        client-side model objects, which cost more than the request for a thousand VMs."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"labelSelector": selector, "limit": LIST_CHUNK}
        while True:
            response = self.retry(f"list {path}", lambda: self._checked(self._http.get(path, params=params)))
            body = orjson.loads(response.content)
            items.extend(body.get("items") or ())
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items, str((body.get("metadata") or {}).get("resourceVersion") or "")
            params["continue"] = token

    def watch_lines(self, path: str, selector: str, version: str, timeout: int) -> Iterator[bytes | str]:
        """The events of a watch from ``version`` (one JSON document a line) until the server ends it;
        never retried: the watch cache lists again on any error."""
        params: dict[str, Any] = {"watch": "true", "labelSelector": selector, "resourceVersion": version,
                                  "timeoutSeconds": timeout, "allowWatchBookmarks": "true"}
        with self._http.stream("GET", path, params=params, timeout=timeout + 10) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if line.strip():
                    yield line

    def create(self, body: dict[str, Any]) -> None:
        key = key_of(body)
        obj = RESOURCES[key.kind].from_dict(body)
        self.retry(f"create {key}", lambda: self.client.create(obj, field_manager=FIELD_MANAGER))

    def apply(self, body: dict[str, Any]) -> None:
        """Server-side apply (field manager openkeel, forced)."""
        self.applied(body)

    def applied(self, body: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply (field manager openkeel, forced): the object as the cluster now has it.

        The request lightkube's ``patch`` would send, sent on its HTTP client and read back as the API
        server's JSON: a build applies half a dozen objects, and lightkube's request building and model
        decoding cost more than the request itself."""
        key = key_of(body)
        url = object_path(key.kind, key.namespace or self.client.namespace, key.name) + _APPLY_QUERY
        content = orjson.dumps(body)
        response = self.retry(f"apply {key}", lambda: raise_for_status(self._http.patch(
            url, content=content, headers=_APPLY_HEADERS)))
        data: dict[str, Any] = orjson.loads(response.content)
        data.setdefault("kind", key.kind)
        return data

    def replace(self, body: dict[str, Any]) -> None:
        key = key_of(body)
        obj = RESOURCES[key.kind].from_dict(body)
        self.retry(f"replace {key}", lambda: self.client.replace(obj, field_manager=FIELD_MANAGER))

    def delete(self, key: ObjectKey) -> None:
        """Delete one object; one already gone is what we wanted."""
        try:
            self.retry(f"delete {key}", lambda: self.client.delete(RESOURCES[key.kind], key.name,
                                                                    namespace=key.namespace))
        except ApiError as exc:
            if exc.status.code != 404:
                raise

    def patch(self, kind: str, namespace: str, name: str, body: Any, *, patch: str = "json") -> bool:
        """A JSON patch (``patch`` "json", a list of operations) or a merge patch ("merge"); False when the
        object is not there."""
        url = object_path(kind, namespace, name)
        content, headers = json.dumps(body).encode(), {"Content-Type": _PATCH_TYPES[patch]}
        response = self.retry(f"patch {kind}/{namespace}/{name}",
                              lambda: self._checked(self._http.patch(url, content=content, headers=headers), 404))
        return response.status_code != 404

    def subresource(self, namespace: str, name: str, verb: str) -> None:
        """KubeVirt's ``verb`` (start, stop, restart, softreboot, pause, unpause) on a VM or its VMI; a 409
        saying its end state is already there is done."""
        plural, already = SUBRESOURCES[verb]
        url = f"/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/{plural}/{name}/{verb}"

        def put() -> Any:
            response = self._http.put(url, content=b"{}", headers={"Content-Type": "application/json"})
            if response.status_code == 409 and already is not None and already in response.text:
                return response
            return self._checked(response)

        self.retry(f"{verb} {namespace}/{name}", put)

    def force_delete_pod(self, namespace: str, name: str) -> None:
        """``kubectl delete pod --force --grace-period=0``: the pod goes at once, without its node's
        kubelet confirming it stopped (a pod on a failed node otherwise stays Terminating); one already
        gone is what we wanted."""
        url = f"/api/v1/namespaces/{namespace}/pods/{name}"
        body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}).encode()
        self.retry(f"force delete pod {namespace}/{name}", lambda: self._checked(self._http.request(
            "DELETE", url, content=body, headers={"Content-Type": "application/json"}), 404))

    @staticmethod
    def _checked(response: Any, *allowed: int) -> Any:
        if response.status_code not in allowed:
            response.raise_for_status()
        return response

    # -- the flavor engine's backend -----------------------------------------------------------------

    def namespaces(self) -> set[str]:
        return {o["metadata"]["name"] for o in self.list_of(NAMESPACE)}

    def observe(self, names: Collection[str] | None = None) -> Observed:
        """Objects of the four flavor kinds (ours and anyone's) named ``names``, or all of them; plus the
        namespaces."""
        objects: dict[ObjectKey, dict[str, Any]] = {}
        every = {kind: "*" if kind in NAMESPACED_KINDS else None for kind in MANAGED_KINDS}
        if names is not None and len(names) <= PER_NAME_LIMIT:
            for name in names:
                for kind in MANAGED_KINDS:
                    objects.update((key_of(o), o) for o in self.list_of(kind, every[kind], name=name))
        else:
            wanted = None if names is None else set(names)
            for kind in MANAGED_KINDS:
                objects.update((key_of(o), o) for o in self.list_of(kind, every[kind])
                               if wanted is None or o["metadata"]["name"] in wanted)
        return Observed(objects, self.namespaces())

    # -- servers -------------------------------------------------------------------------------------

    def ensure_namespace(self, name: str, project_id: str) -> None:
        """The project's namespace, created (labelled managed-by openkeel) when missing."""
        if self.get(NAMESPACE, name) is None:
            self.apply(namespace_object(name, project_id))

    def vmi(self, namespace: str, uuid: str) -> dict[str, Any] | None:
        """The server's VMI, if it has one (labelled managed-by openkeel)."""
        return self.ours("VirtualMachineInstance", server_vm_name(uuid), namespace)

    def look(self, namespace: str, uuid: str) -> ObjectView:
        """(VM, VMI, DataVolumes) of a server: only objects labelled managed-by openkeel."""
        name = server_vm_name(uuid)
        dvs = self.list_of("DataVolume", namespace, server_labels(uuid))
        return self.ours("VirtualMachine", name, namespace), self.ours("VirtualMachineInstance", name, namespace), dvs

    def snapshot(self) -> Snapshot:
        """Every server's VM, VMI and DataVolumes in three cluster-wide lists (labelled managed-by openkeel),
        instead of three requests per server."""
        vms, vmis, dvs = (self.list_json(f"/apis/{api}/{plural}", SELECTOR)[0] for _kind, api, plural in WATCHED)
        return Snapshot.of(vms, vmis, dvs)

    def secrets_of(self, namespace: str, uuid: str) -> list[str]:
        """The names of the server's Secrets."""
        return [o["metadata"]["name"] for o in self.list_of("Secret", namespace, server_labels(uuid))]

    def sizing_of(self, namespace: str, uuid: str) -> list[ObjectKey]:
        """The server's own instancetypes and preferences."""
        return [ObjectKey(kind, namespace, o["metadata"]["name"]) for kind in SERVER_SIZING_KINDS
                for o in self.list_of(kind, namespace, server_labels(uuid))]

    def revisions_of(self, namespace: str, object_name: str) -> list[ObjectKey]:
        """The ControllerRevisions KubeVirt made of the instancetype or preference ``object_name`` (its
        ``instancetype.kubevirt.io/object-name`` label)."""
        return [ObjectKey("ControllerRevision", namespace, o["metadata"]["name"])
                for o in self.list_of("ControllerRevision", namespace, {REVISION_OF: object_name})]

    def delete_server(self, namespace: str, uuid: str) -> None:
        """The VM (its DataVolumes and VMI go with it), its Secrets and its own instancetypes and
        preferences; only objects labelled managed-by openkeel (a foreign object under the same name is
        left alone)."""
        name = server_vm_name(uuid)
        if self.ours("VirtualMachine", name, namespace) is not None:
            self.delete(ObjectKey("VirtualMachine", namespace, name))
        for kind in (*SERVER_SIZING_KINDS, "Secret", "PersistentVolumeClaim"):
            for obj in self.list_of(kind, namespace, server_labels(uuid)):
                self.delete(ObjectKey(kind, namespace, obj["metadata"]["name"]))
        # the static volumes of its Cinder attachments (Retain: the data stays Cinder's)
        for obj in self.list_of("PersistentVolume", None, server_labels(uuid)):
            self.delete(ObjectKey("PersistentVolume", None, obj["metadata"]["name"]))

    def leftovers(self, namespace: str, uuid: str) -> list[str]:
        """What of the server is still in the cluster (kind/name)."""
        name = server_vm_name(uuid)
        left = [f"{kind}/{o['metadata']['name']}"
                for kind in ("DataVolume", "Secret", "PersistentVolumeClaim", *SERVER_SIZING_KINDS)
                for o in self.list_of(kind, namespace, server_labels(uuid))]
        left += [f"PersistentVolume/{o['metadata']['name']}"
                 for o in self.list_of("PersistentVolume", None, server_labels(uuid))]
        left += [f"{kind}/{name}" for kind in ("VirtualMachine", "VirtualMachineInstance")
                 if self.ours(kind, name, namespace)]
        return left

    # -- Neutron networks as Multus networks ------------------------------------------------------------

    def attachments(self, namespace: str) -> list[dict[str, Any]]:
        """The NetworkAttachmentDefinitions of Neutron networks in the namespace (labelled managed-by
        openkeel)."""
        return [o for o in self.list_of("NetworkAttachmentDefinition", namespace, _MANAGED) if _is_ours(o)]

    def multus_networks(self, namespace: str) -> set[str]:
        """The Multus network names the namespace's VirtualMachines (anyone's) and VMIs use."""
        used: set[str] = set()
        for kind in ("VirtualMachine", "VirtualMachineInstance"):
            for obj in self.list_of(kind, namespace):
                spec = obj.get("spec") or {}
                if kind == "VirtualMachine":
                    spec = (spec.get("template") or {}).get("spec") or {}
                for net in spec.get("networks") or ():
                    name = (net.get("multus") or {}).get("networkName")
                    if name:
                        used.add(name.split("/", 1)[1] if "/" in name else name)
        return used

    def managed_servers(self) -> dict[str, set[str]]:
        """Server uuid -> the namespaces where objects labelled managed-by openkeel name it (all namespaces).

        Only VirtualMachines, Secrets and per-server instancetypes and preferences: the VM's DataVolumes
        and VMI go with it.
        """
        found: dict[str, set[str]] = {}
        for kind in ("VirtualMachine", "Secret", *SERVER_SIZING_KINDS):
            for obj in self.list_of(kind, "*", _MANAGED):
                labels = obj["metadata"].get("labels") or {}
                server = labels.get(SERVER_ID)
                if server and labels.get(mapping.MANAGED_BY) == FIELD_MANAGER:
                    found.setdefault(server, set()).add(obj["metadata"]["namespace"])
        return found

    def apply_if_changed(self, body: dict[str, Any], written: dict[str, str]) -> None:
        """Apply a Secret unless the same content was written before (``written``: name -> content)."""
        key = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
        content = json.dumps(body.get("data"), sort_keys=True)
        if written.get(key) != content:
            self.apply(body)
            written[key] = content

    def node_exists(self, name: str) -> bool:
        """Whether the cluster still has the node (False once it was deleted)."""
        return self.get("Node", name) is not None

    def nodes(self) -> list[dict[str, Any]]:
        return self.list_of("Node")

    def pods(self, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
        return self.list_of("Pod", namespace, labels)

    def pod_log(self, namespace: str, pod: str, container: str, tail_lines: int | None,
                keep: int) -> bytes | None:
        """The last ``keep`` bytes of a container's log (``tail_lines``: only that many last lines); None
        when the pod went or its container is not running yet (400, 404)."""
        params: dict[str, Any] = {"container": container}
        if tail_lines is not None:
            params["tailLines"] = tail_lines

        def read() -> bytes | None:
            kept: collections.deque[bytes] = collections.deque()
            size = 0
            with self._http.stream("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
                                   params=params) as response:
                if response.status_code in (400, 404):
                    return None
                response.raise_for_status()
                for chunk in response.iter_bytes(16 * 1024):
                    kept.append(chunk)
                    size += len(chunk)
                    while size - len(kept[0]) >= keep:
                        size -= len(kept.popleft())
            return b"".join(kept)[-keep:]

        return self.retry(f"log of pod {namespace}/{pod}", read)

    # -- the Lease (never retried: the elector's renewals are its retries) ---------------------------

    def lease(self, name: str, namespace: str) -> Lease | None:
        try:
            return NO_RETRY("get lease", lambda: self.client.get(Lease, name, namespace=namespace))
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise

    def write_lease(self, lease: Lease, *, create: bool) -> bool:
        """Create the Lease, or replace it at the resourceVersion it carries; False when another replica
        wrote it first (409)."""
        try:
            if create:
                self.client.create(lease)
            else:
                self.client.replace(lease)
        except ApiError as exc:
            if exc.status.code != 409:
                raise
            return False
        return True
