"""The emulated API server's object store: what kube-apiserver does with a request, minus the HTTP.

Every object gets uid, resourceVersion, generation (bumped on spec changes) and creationTimestamp.
Creates answer 201 or 409 AlreadyExists; updates need the current resourceVersion (409 Conflict);
patches are JSON merge, JSON (RFC 6902) or server-side apply (per field manager: fields a manager
stops applying are removed). Kinds with a status subresource ignore status in writes to the object
and take only status through ``/status``. Deleting an object with finalizers marks it
(deletionTimestamp) until the finalizers are gone; owners' deletion cascades to dependents (in the
background, or first with propagationPolicy Foreground). Lists take label and field selectors and
limit/continue. Namespaced writes need the namespace. Writes are validated against KubeVirt's
schema (``fieldValidation=Strict`` refuses unknown fields, otherwise they are dropped with a
warning) and then by the admission hooks.
"""

from __future__ import annotations

import base64
import collections
import copy
import datetime
import math
import random
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from openkeel_compute.emulator import admission, schema
from openkeel_compute.emulator.resources import BY_KIND, Resource

Key = tuple[str, "str | None", str]  # (plural, namespace, name)

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
SUBDOMAIN_MESSAGE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                     "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                     "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MESSAGE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                 "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
           409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


class ApiError(Exception):
    """An answer other than success, rendered as a Kubernetes Status object."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: dict | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details or {}
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                "reason": self.reason, "details": self.details, "code": self.code}


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, f'{res.group_resource} "{name}" not found', details={
        "name": name, "group": res.group, "kind": res.plural})


def clone(obj: Any) -> Any:
    """A deep copy of a JSON value (several times faster than copy.deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    """A status condition as KubeVirt and Kubernetes write them."""
    cond: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now()}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def own_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy to change metadata and status of (the spec is shared: stored objects are replaced, never edited)."""
    new = dict(obj)
    new["metadata"] = clone(obj["metadata"])
    new["status"] = clone(obj.get("status") or {})
    return new


def new_uid() -> str:
    return str(uuid.UUID(int=random.getrandbits(128), version=4))


# -- patches -----------------------------------------------------------------------------------------

def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ApiError(422, f"the server rejected our request due to an error in our request: invalid path {path}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def json_patch(doc: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test, copy, move)."""
    doc = copy.deepcopy(doc)
    for op in operations:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        try:
            parent = _container(doc, parts)
            last = parts[-1]
            if kind == "test":
                current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if current != op.get("value"):
                    raise ApiError(422, f"the server rejected our request due to an error in our request: "
                                        f"testing value {op['path']} failed: test failed")
            elif kind in ("add", "replace"):
                value = copy.deepcopy(op.get("value"))
                if isinstance(parent, list):
                    if last == "-":
                        parent.append(value)
                    elif kind == "add":
                        parent.insert(int(last), value)
                    else:
                        parent[int(last)] = value
                else:
                    if kind == "replace" and last not in parent:
                        raise KeyError(last)
                    parent[last] = value
            elif kind == "remove":
                if isinstance(parent, list):
                    del parent[int(last)]
                else:
                    del parent[last]
            elif kind in ("copy", "move"):
                src = _pointer(op.get("from", ""))
                src_parent = _container(doc, src)
                value = copy.deepcopy(src_parent[int(src[-1])] if isinstance(src_parent, list) else src_parent[src[-1]])
                if kind == "move":
                    del src_parent[int(src[-1]) if isinstance(src_parent, list) else src[-1]]
                doc = json_patch(doc, [{"op": "add", "path": op["path"], "value": value}])
            else:
                raise ApiError(422, f"the server rejected our request due to an error in our request: "
                                    f"unexpected kind of operation {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError, AttributeError):
            raise ApiError(422, f"the server rejected our request due to an error in our request: "
                                f"{kind} operation does not apply: doc is missing path: \"{op.get('path')}\""
                           ) from None
    return doc


def _leaves(obj: Any, prefix: tuple = ()) -> set[tuple]:
    if isinstance(obj, dict) and obj:
        out: set[tuple] = set()
        for key, value in obj.items():
            out |= _leaves(value, (*prefix, key))
        return out
    return {prefix}


def _drop(obj: dict, path: tuple) -> None:
    for part in path[:-1]:
        obj = obj.get(part)
        if not isinstance(obj, dict):
            return
    obj.pop(path[-1], None)


def _drop_empty(obj: dict, keep: tuple[str, ...] = ("spec", "metadata")) -> None:
    for key in list(obj):
        if isinstance(obj[key], dict):
            _drop_empty(obj[key], ())
            if not obj[key] and key not in keep:
                del obj[key]


# -- selectors ---------------------------------------------------------------------------------------

def labels_match(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if " in " in term or " notin " in term:
            key, _, rest = term.partition(" notin " if " notin " in term else " in ")
            values = {v.strip() for v in rest.strip().strip("()").split(",")}  # pragma: no cover - rare
            if (labels.get(key.strip()) in values) == (" notin " in term):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def fields_match(selector: str, obj: dict) -> bool:
    meta = obj.get("metadata", {})
    known = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
             "status.phase": (obj.get("status") or {}).get("phase")}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        negate = "!=" in term
        key, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        if key not in known:
            raise ApiError(400, f'"{key}" is not a known field selector: only "metadata.name", '
                                f'"metadata.namespace"')
        if (known[key] == value) == negate:
            return False
    return True


class Objects(dict):
    """The store's objects by (plural, namespace, name), with the keys of each kind kept apart as well
    (a list of one kind, or a controller's pass over one kind, must not walk the whole cluster), and the
    objects that may have lost their owners since garbage was last collected (``suspects``): those
    written with owners, and those whose owner was removed."""

    def __init__(self) -> None:
        super().__init__()
        self._kinds: dict[str, dict[Key, dict[str, Any]]] = {}
        self.uids: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}  # owner uid -> keys of the objects naming it
        self.suspects: set[Key] = set()
        self.nodes_removed: set[str] = set()  # names of Nodes removed since the lifecycle last looked
        self.touched: set[Key] = set()  # written or removed since the controllers last looked (take_touched)

    @staticmethod
    def _owners(obj: dict[str, Any] | None) -> list[str]:
        refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or ()
        return [r.get("uid") for r in refs if isinstance(r, dict)]

    def _forget(self, key: Key, old: dict[str, Any]) -> None:
        uid = (old.get("metadata") or {}).get("uid")
        if uid is not None and self.uids.get(uid) == key:
            del self.uids[uid]
        for owner in self._owners(old):
            keys = self._dependents.get(owner)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._dependents[owner]

    def __setitem__(self, key: Key, value: dict[str, Any]) -> None:
        old = dict.get(self, key)
        if old is not None:
            self._forget(key, old)
        super().__setitem__(key, value)
        self.touched.add(key)
        self._kinds.setdefault(key[0], {})[key] = value
        uid = (value.get("metadata") or {}).get("uid")
        if uid is not None:
            self.uids[uid] = key
        owners = self._owners(value)
        for owner in owners:
            self._dependents.setdefault(owner, set()).add(key)
        if owners and owners != self._owners(old):
            self.suspects.add(key)

    def __delitem__(self, key: Key) -> None:
        self.pop(key)

    def pop(self, key: Key, *default: Any) -> Any:
        if key not in self:
            return super().pop(key, *default)
        old = super().pop(key)
        self.touched.add(key)
        self._kinds[key[0]].pop(key, None)
        self._forget(key, old)
        uid = (old.get("metadata") or {}).get("uid")
        self.suspects.update(self._dependents.get(uid, ()))
        if key[0] == "nodes":
            self.nodes_removed.add(key[2])
        return old

    def dependents_of(self, uid: str) -> set[Key]:
        """The keys of the objects that name ``uid`` among their owners."""
        return set(self._dependents.get(uid, ()))

    def take_touched(self) -> set[Key]:
        """The keys written or removed since the last call (hold the store's lock)."""
        touched, self.touched = self.touched, set()
        return touched

    def of_kind(self, plural: str) -> dict[Key, dict[str, Any]]:
        """The objects of one kind (the live mapping: copy it before changing the store)."""
        return self._kinds.get(plural, {})


DEFAULT_NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}


class Store:
    """Objects by (plural, namespace, name), with the API server's rules for changing them."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects = Objects()
        self.applied: dict[Key, dict[str, dict]] = {}  # key -> field manager -> last applied configuration
        self.rv = 0
        self.writes: list[tuple[str, str, dict]] = []  # (method, path, params) of accepted writes
        self.expire_continue = 0  # the next N continued list pages answer 410 Gone
        self.service = False  # a write under way comes from KubeVirt's own service account (subresources)
        # (resourceVersion, type, plural, namespace, object JSON) of recent changes, for watches
        self.events: collections.deque[tuple[int, str, str, str | None, bytes]] = collections.deque(maxlen=20000)
        self.history_start = 0  # watches from an older resource version answer 410 (set by a restore)
        self.changed = threading.Condition(self.lock)
        # Kept on disk (persist.py): the changes and other records since the journal last took them (None
        # when the cluster lives in memory only), and the resource versions already made durable: going
        # past ``reserved`` calls ``reserve`` first, so that a restarted cluster never hands one out again.
        self.pending: list[tuple] | None = None
        self.reserved: float = math.inf
        self.reserve: Callable[[int], int] | None = None
        self.put(clone(DEFAULT_NAMESPACE))

    # -- internal ------------------------------------------------------------------------------------

    def _next_rv(self) -> None:
        self.rv += 1
        if self.rv > self.reserved and self.reserve is not None:
            self.reserved = self.reserve(self.rv)

    def note(self, record: tuple) -> None:
        """Keep a record for the journal (hold the lock); nothing when the cluster is not kept on disk."""
        if self.pending is not None:
            self.pending.append(record)

    def restore(self, objects: dict[Key, dict[str, Any]], applied: dict[Key, dict[str, dict]], rv: int) -> None:
        """Take the objects of a cluster read back from disk, as they were at resource version ``rv``.
        Watches from an older version answer 410 (the changes before are not kept): clients list again."""
        with self.lock:
            self.objects = Objects()
            for key, obj in objects.items():
                self.objects[key] = obj
            self.objects.touched = set()
            self.applied = applied
            self.rv = self.history_start = rv
            self.events.clear()
            if ("namespaces", None, "default") not in self.objects:
                self.put(clone(DEFAULT_NAMESPACE))

    def history_floor(self) -> int:
        """The oldest resource version a watch can start from (older ones answer 410 Expired)."""
        if self.events:
            return max(self.history_start, self.events[0][0] - 1)
        return self.history_start

    def _stamp(self, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        self._next_rv()
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        if old is None:
            meta["uid"] = new_uid()
            meta["creationTimestamp"] = now()
            meta["generation"] = 1
        else:
            old_meta = old["metadata"]
            for field in ("uid", "creationTimestamp", "deletionTimestamp"):
                if field in old_meta:
                    meta[field] = old_meta[field]
            bump = obj.get("spec") != old.get("spec")
            meta["generation"] = old_meta.get("generation", 1) + (1 if bump else 0)
        self._event("ADDED" if old is None else "MODIFIED", obj)
        return obj

    def _event(self, type_: str, obj: dict[str, Any]) -> None:
        """Record a change for watches (the object as it is now, serialised) and wake the watchers."""
        kind = obj.get("kind")
        if kind not in BY_KIND:
            return
        meta = obj["metadata"]
        res = BY_KIND[kind]
        event = (self.rv, type_, res.plural, meta.get("namespace") if res.namespaced else None, orjson.dumps(obj))
        self.events.append(event)
        if self.pending is not None:  # the journal writes the same bytes
            self.pending.append(event)
        self.changed.notify_all()

    def events_after(self, rv: int) -> list[tuple[int, str, str, str | None, bytes]]:
        """The recorded changes newer than ``rv``, oldest first (hold the lock). The changes are kept in
        resource-version order, so only the new ones at the end are looked at, not the whole record."""
        fresh = []
        for event in reversed(self.events):
            if event[0] <= rv:
                break
            fresh.append(event)
        fresh.reverse()
        return fresh

    def _validate(self, res: Resource, body: dict[str, Any], params: dict[str, str]) -> list[str]:
        """Schema checks; returns the warnings of dropped unknown fields (non-strict)."""
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was in an unknown format")
        problems = res.problems(body)
        name = (body.get("metadata") or {}).get("name") or ""
        warnings: list[str] = []
        if problems.unknown:
            text = ", ".join(f'unknown field "{p}"' for p in problems.unknown)
            if params.get("fieldValidation") == "Strict":
                raise ApiError(400, f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
                                    f"strict decoding error: {text}")
            if params.get("fieldValidation") != "Ignore":
                warnings = [f'unknown field "{p}"' for p in problems.unknown]
            schema.prune(body, problems.unknown)
        if problems.invalid:
            causes = [{"reason": "FieldValueTypeInvalid",
                       "message": f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"',
                       "field": path} for path, got, want in problems.invalid]
            text = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
            raise ApiError(422, f'{res.kind}.{res.group or "core"} "{name}" is invalid: {text}',
                           details={"name": name, "group": res.group, "kind": res.kind, "causes": causes})
        if res.kind == "VirtualMachine" and body.get("spec") is None:
            raise ApiError(422, f'{res.kind}.{res.group} "{name}" is invalid: spec: Required value',
                           details={"name": name, "group": res.group, "kind": res.kind,
                                    "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                                                "field": "spec"}]})
        return warnings

    def _check_name(self, res: Resource, name: str | None) -> None:
        group = f".{res.group}" if res.group else ""
        if not name:
            raise ApiError(422, f"{res.kind}{group} \"\" is invalid: metadata.name: Required value: name or "
                                "generateName is required")
        pattern, message = ((_DNS1123_LABEL, LABEL_MESSAGE) if res.kind == "Namespace"
                            else (_DNS1123_SUBDOMAIN, SUBDOMAIN_MESSAGE))
        limit = 63 if res.kind == "Namespace" else 253
        if not pattern.fullmatch(name) or len(name) > limit:
            why = message if pattern.fullmatch(name) is None else f"must be no more than {limit} characters"
            raise ApiError(422, f'{res.kind}{group} "{name}" is invalid: metadata.name: Invalid value: '
                                f'"{name}": {why}',
                           details={"name": name, "group": res.group, "kind": res.kind})

    def _admit(self, res: Resource, operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        request = admission.Review(operation, res.kind, obj, old, self.lookup, self.service, self.of_kind)
        admission.mutate(request)
        refusals = admission.review(request)
        if not refusals:
            return
        name = obj["metadata"].get("name", "")
        fields = [r for r in refusals if isinstance(r, admission.FieldError)]
        if fields:  # the API server's own validation answers before any webhook
            text = fields[0] if len(fields) == 1 else "[" + ", ".join(fields) + "]"
            raise ApiError(422, f'{res.kind} "{name}" is invalid: {text}', details={
                "name": name, "group": res.group, "kind": res.kind,
                "causes": [{"reason": "FieldValueInvalid", "message": f.split(": ", 1)[-1],
                            "field": f.split(": ", 1)[0]} for f in fields]})
        code = 400 if any(isinstance(r, admission.Rejection) for r in refusals) else 422
        raise ApiError(code, admission.denial(res.kind, refusals, operation), details={
            "name": name, "group": res.group, "kind": res.plural,
            "causes": [{"reason": "FieldValueInvalid", "message": m} for m in refusals]})

    def _need_namespace(self, res: Resource, ns: str | None, name: str | None = None) -> None:
        if not res.namespaced:
            return
        namespace = self.objects.get(("namespaces", None, ns))
        if namespace is None:
            raise ApiError(404, f'namespaces "{ns}" not found', details={"name": ns, "kind": "namespaces"})
        if namespace["metadata"].get("deletionTimestamp"):
            raise ApiError(403, f'{res.group_resource} "{name or ""}" is forbidden: unable to create new content in '
                                f"namespace {ns} because it is being terminated",
                           details={"name": name or "", "group": res.group, "kind": res.plural,
                                    "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                                "message": f"namespace {ns} is being terminated"}]})

    # -- reads ---------------------------------------------------------------------------------------

    def lookup(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        res = BY_KIND[kind]
        return self.objects.get((res.plural, namespace if res.namespaced else None, name))

    def of_kind(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The stored objects of a kind (in a namespace, when given)."""
        res = BY_KIND[kind]
        return [o for key, o in self.objects.of_kind(res.plural).items() if namespace is None or key[1] == namespace]

    def get(self, res: Resource, ns: str | None, name: str) -> dict[str, Any]:
        obj = self.objects.get((res.plural, ns, name))
        if obj is None:
            raise not_found(res, name)
        return obj

    def list(self, res: Resource, ns: str | None, params: dict[str, str]) -> dict[str, Any]:
        cont = params.get("continue")
        offset, snapshot = 0, self.rv
        if cont:
            if self.expire_continue > 0:
                self.expire_continue -= 1
                raise ApiError(410, "The provided continue parameter is too old to display a consistent list "
                                    "result. You can start a new list without the continue parameter.")
            try:
                snap, off = base64.b64decode(cont).decode().split(":")
                offset, snapshot = int(off), int(snap)
            except ValueError:
                raise ApiError(400, "continue key is not valid: illegal base64 data") from None
        # filter first, then sort what is left: a list of one kind must not sort the whole store
        chosen = [(key, o) for key, o in self.objects.of_kind(res.plural).items() if ns is None or key[1] == ns]
        chosen.sort(key=lambda kv: (kv[0][1] or "", kv[0][2]))
        items = [o for _key, o in chosen]
        if params.get("labelSelector"):
            items = [o for o in items if labels_match(params["labelSelector"], o["metadata"].get("labels") or {})]
        if params.get("fieldSelector"):
            items = [o for o in items if fields_match(params["fieldSelector"], o)]
        meta: dict[str, Any] = {"resourceVersion": str(snapshot)}
        limit = int(params.get("limit") or 0)
        if limit and offset + limit < len(items):
            meta["continue"] = base64.b64encode(f"{snapshot}:{offset + limit}".encode()).decode()
            items = items[offset:offset + limit]
        else:
            items = items[offset:]
        return {"apiVersion": res.api_version, "kind": f"{res.kind}List", "metadata": meta, "items": items}

    # -- writes --------------------------------------------------------------------------------------

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object as it is (no checks): what someone else created, or a controller's write."""
        res = BY_KIND[obj["kind"]]
        meta = obj["metadata"]
        key = (res.plural, meta.get("namespace") if res.namespaced else None, meta["name"])
        with self.lock:
            self.objects[key] = self._stamp(obj, self.objects.get(key))
            return self.objects[key]

    def create(self, res: Resource, ns: str | None, body: dict[str, Any], params: dict[str, str]
               ) -> tuple[dict[str, Any], list[str]]:
        warnings = self._validate(res, body, params)
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
        self._check_name(res, meta.get("name"))
        self._need_namespace(res, ns, meta.get("name"))
        if res.namespaced:
            meta["namespace"] = ns
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        for field in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            meta.pop(field, None)
        if res.status_subresource:
            obj.pop("status", None)
        key = (res.plural, ns if res.namespaced else None, meta["name"])
        if key in self.objects:
            raise ApiError(409, f'{res.group_resource} "{meta["name"]}" already exists', reason="AlreadyExists",
                           details={"name": meta["name"], "group": res.group, "kind": res.plural})
        self._admit(res, "CREATE", obj, None)
        if params.get("dryRun") != "All":
            self.objects[key] = self._stamp(obj, None)
        return obj, warnings

    def _replace(self, res: Resource, key: Key, current: dict[str, Any] | None, obj: dict[str, Any],
                 subresource: str | None, params: dict[str, str]) -> dict[str, Any]:
        """Store ``obj`` in place of ``current`` (status and main resource kept apart)."""
        ns, name = key[1], key[2]
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta = obj.setdefault("metadata", {})
        meta["name"] = name
        if res.namespaced:
            meta["namespace"] = ns
        if current is not None and res.status_subresource:
            if subresource == "status":
                status = obj.get("status")
                obj = copy.deepcopy(current)
                if status is None:
                    obj.pop("status", None)
                else:
                    obj["status"] = status
            elif "status" in current:
                obj["status"] = copy.deepcopy(current["status"])
            else:
                obj.pop("status", None)
        if current is not None and current["metadata"].get("deletionTimestamp") and not meta.get("finalizers"):
            if params.get("dryRun") != "All":
                self._remove(key)
            return obj
        if subresource != "status":  # KubeVirt's webhooks review the object, not its status
            self._admit(res, "CREATE" if current is None else "UPDATE", obj, current)
        if params.get("dryRun") == "All":
            return obj
        self.objects[key] = self._stamp(obj, current)
        return self.objects[key]

    def update(self, res: Resource, ns: str | None, name: str, body: dict[str, Any], params: dict[str, str],
               subresource: str | None = None) -> tuple[dict[str, Any], list[str]]:
        warnings = self._validate(res, body, params)
        key = (res.plural, ns, name)
        current = self.objects.get(key)
        if current is None:
            raise not_found(res, name)
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if not rv:
            raise ApiError(422, f'{res.kind}.{res.group or "core"} "{name}" is invalid: metadata.resourceVersion: '
                                "Invalid value: 0x0: must be specified for an update")
        if rv != current["metadata"]["resourceVersion"]:
            raise self._conflict(res, name)
        if self.applied.pop(key, None) is not None:
            self.note(("unapplied", key))
        return self._replace(res, key, current, copy.deepcopy(body), subresource, params), warnings

    @staticmethod
    def _conflict(res: Resource, name: str) -> ApiError:
        return ApiError(409, f'Operation cannot be fulfilled on {res.group_resource} "{name}": the object has been '
                             "modified; please apply your changes to the latest version and try again",
                        details={"name": name, "group": res.group, "kind": res.plural})

    def patch(self, res: Resource, ns: str | None, name: str, body: Any, content_type: str,
              params: dict[str, str], subresource: str | None = None) -> tuple[dict[str, Any], list[str], int]:
        key = (res.plural, ns, name)
        current = self.objects.get(key)
        warnings: list[str] = []
        if "apply-patch" in content_type:
            manager = params.get("fieldManager")
            if not manager:
                raise ApiError(400, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: "
                                    "is required for apply patch")
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request was in an unknown format")
            warnings = self._validate(res, body, params)
            if current is None:
                self._need_namespace(res, ns, name)
                self._check_name(res, name)
            config = copy.deepcopy(body)
            config.setdefault("metadata", {}).pop("resourceVersion", None)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if current is not None and rv and rv != current["metadata"]["resourceVersion"]:
                raise self._conflict(res, name)
            obj = copy.deepcopy(current) if current is not None else {}
            previous = self.applied.get(key, {}).get(manager)
            if previous is not None:
                for path in _leaves(previous) - _leaves(config):
                    _drop(obj, path)
            obj = merge_patch(obj, config)
            _drop_empty(obj)
            if current is None and res.status_subresource:
                obj.pop("status", None)
            stored = self._replace(res, key, current, obj, subresource, params)
            if params.get("dryRun") != "All":
                self.applied.setdefault(key, {})[manager] = config
                self.note(("applied", key, manager, config))
            return stored, warnings, 201 if current is None else 200
        if current is None:
            raise not_found(res, name)
        if "json-patch" in content_type:
            if not isinstance(body, list):
                raise ApiError(400, "the body of the request was in an unknown format")
            obj = json_patch(current, body)
        elif "merge-patch" in content_type or "strategic-merge-patch" in content_type:
            if "strategic" in content_type and res.group not in ("", "apps", "coordination.k8s.io"):
                raise ApiError(415, "strategic merge patch is not supported for custom resources")
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request was in an unknown format")
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise self._conflict(res, name)
            obj = merge_patch(current, body)
        else:
            raise ApiError(415, f'the body of the request was in an unknown format - accepted media types '
                                f'include: application/json-patch+json, application/merge-patch+json, '
                                f'application/apply-patch+yaml (not "{content_type}")')
        warnings = self._validate(res, obj, params)
        return self._replace(res, key, current, obj, subresource, params), warnings, 200

    def _remove(self, key: Key) -> None:
        gone = self.objects.pop(key, None)
        self.applied.pop(key, None)
        self._next_rv()
        if gone is not None:
            gone = dict(gone, metadata={**gone["metadata"], "resourceVersion": str(self.rv)})
            self._event("DELETED", gone)

    def delete(self, res: Resource, ns: str | None, name: str, body: dict[str, Any] | None,
               params: dict[str, str]) -> dict[str, Any]:
        key = (res.plural, ns, name)
        current = self.get(res, ns, name)
        options = body if isinstance(body, dict) else {}
        pre = options.get("preconditions") or {}
        if pre.get("uid") not in (None, current["metadata"]["uid"]):
            raise ApiError(409, f'Operation cannot be fulfilled on {res.group_resource} "{name}": Precondition '
                                f'failed: UID in precondition: {pre["uid"]}, UID in object meta: '
                                f'{current["metadata"]["uid"]}')
        if pre.get("resourceVersion") not in (None, current["metadata"]["resourceVersion"]):
            raise self._conflict(res, name)
        if params.get("dryRun") == "All" or options.get("dryRun") == ["All"]:
            return current
        if res.kind == "Namespace":
            return self._terminate_namespace(key, current)
        grace = options.get("gracePeriodSeconds", params.get("gracePeriodSeconds"))
        if res.kind == "Pod" and str(grace) != "0" and self._node_down((current.get("spec") or {}).get("nodeName")):
            # no kubelet confirms the pod stopped: it stays Terminating (a forced delete removes it)
            if not current["metadata"].get("deletionTimestamp"):
                obj = copy.deepcopy(current)
                obj["metadata"].update(deletionTimestamp=now(), deletionGracePeriodSeconds=int(grace or 30))
                self.objects[key] = self._stamp(obj, current)
                self.objects[key]["metadata"]["deletionTimestamp"] = obj["metadata"]["deletionTimestamp"]
            return self.objects[key]
        policy = options.get("propagationPolicy") or params.get("propagationPolicy")
        finalizers = list(current["metadata"].get("finalizers") or [])
        if policy == "Foreground" and "foregroundDeletion" not in finalizers and self.dependents(current):
            finalizers.append("foregroundDeletion")
        if finalizers:
            if not current["metadata"].get("deletionTimestamp"):
                obj = copy.deepcopy(current)
                obj["metadata"]["deletionTimestamp"] = now()
                obj["metadata"]["finalizers"] = finalizers
                obj["metadata"]["deletionGracePeriodSeconds"] = 0
                self.objects[key] = self._stamp(obj, current)
                self.objects[key]["metadata"]["deletionTimestamp"] = obj["metadata"]["deletionTimestamp"]
            return self.objects[key]
        self._remove(key)
        return current

    def _terminate_namespace(self, key: Key, current: dict[str, Any]) -> dict[str, Any]:
        """A namespace is Terminating until what it holds is gone (the lifecycle empties it), then goes."""
        if current["metadata"].get("deletionTimestamp"):
            return current
        obj = clone(current)
        obj["metadata"]["deletionTimestamp"] = now()
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Terminating"}
        self.objects[key] = self._stamp(obj, current)
        return self.objects[key]

    def _node_down(self, name: str | None) -> bool:
        node = self.objects.get(("nodes", None, name)) if name else None
        if node is None:
            return False
        ready = next((c for c in (node.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), {})
        return ready.get("status") != "True"

    def dependents(self, owner: dict[str, Any]) -> list[Key]:
        uid = owner["metadata"]["uid"]
        return [key for key, obj in self.objects.items()
                if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or ())]
