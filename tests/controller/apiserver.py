"""kmock's KubernetesEmulator, extended with what a real API server does and the controller relies on.

kmock serves discovery, parses requests and renders errors; this subclass keeps its own store and adds
(stack.md §3 lists the gaps): uid / resourceVersion / generation / creationTimestamp stamping; POST 201
and 409 AlreadyExists; PUT with resourceVersion preconditions (409 Conflict); merge-patch and server-side
apply with per-manager field removal and resourceVersion preconditions; label and field selectors;
limit/continue paging and 410 Gone for expired continue tokens; namespaced writes refused (404) when the
namespace does not exist; fieldValidation=Strict refusing unknown fields. Faults are injected per
request (status codes, held writes) and the whole server can refuse connections and come back.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import datetime
import json
import multiprocessing
import random
import threading
import uuid
from typing import Any

import aiohttp.web
import attrs
from kmock import KubernetesEmulator, KubernetesError, Request, Server, resource

KUBEVIRT = ("instancetype.kubevirt.io", "v1beta1")
RESOURCES: dict[tuple[str, str, str], tuple[str, bool]] = {
    (*KUBEVIRT, "virtualmachineclusterinstancetypes"): ("VirtualMachineClusterInstancetype", False),
    (*KUBEVIRT, "virtualmachineclusterpreferences"): ("VirtualMachineClusterPreference", False),
    (*KUBEVIRT, "virtualmachineinstancetypes"): ("VirtualMachineInstancetype", True),
    (*KUBEVIRT, "virtualmachinepreferences"): ("VirtualMachinePreference", True),
    ("kubevirt.io", "v1", "virtualmachines"): ("VirtualMachine", True),
    ("", "v1", "namespaces"): ("Namespace", False),
    ("coordination.k8s.io", "v1", "leases"): ("Lease", True),
}
PLURAL_OF_KIND = {kind: plural for (_g, _v, plural), (kind, _n) in RESOURCES.items()}
# KubeVirt v1beta1 VirtualMachineInstancetypeSpec fields: Strict validation refuses anything else.
INSTANCETYPE_SPEC = {"nodeSelector", "schedulerName", "cpu", "memory", "gpus", "hostDevices", "ioThreadsPolicy",
                     "ioThreads", "launchSecurity", "annotations"}
TOP_LEVEL = {"apiVersion", "kind", "metadata", "spec", "status"}


@dataclasses.dataclass
class Fault:
    """Answer ``status`` instead of serving matching requests, ``times`` times, after skipping ``after``."""

    status: int
    method: str | None = None  # GET, POST, PUT, PATCH, DELETE
    plural: str | None = None
    times: int = 1
    after: int = 0
    matched: int = 0


def _leaves(obj: Any, prefix: tuple = ()) -> set[tuple]:
    if isinstance(obj, dict) and obj:
        out: set[tuple] = set()
        for k, v in obj.items():
            out |= _leaves(v, (*prefix, k))
        return out
    return {prefix}


def _remove(obj: dict, path: tuple) -> None:
    for part in path[:-1]:
        obj = obj.get(part)
        if not isinstance(obj, dict):
            return
    obj.pop(path[-1], None)


def _merge(target: dict, patch: dict) -> dict:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _prune_empty(obj: dict) -> None:
    for key in list(obj):
        if isinstance(obj[key], dict):
            _prune_empty(obj[key])
            if not obj[key] and key not in ("spec",):
                del obj[key]


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _fields_match(selector: str, obj: dict) -> bool:
    meta = obj.get("metadata", {})
    for term in filter(None, (t.strip() for t in selector.split(","))):
        k, v = term.replace("==", "=").split("=", 1)
        field = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace")}.get(k)
        if field != v:
            return False
    return True


def _json(body: dict, status: int) -> aiohttp.web.Response:
    # Exactly "application/json", as kube-apiserver sends it: lightkube only turns that into an ApiError.
    return aiohttp.web.Response(body=json.dumps(body).encode(), status=status,
                                headers={"Content-Type": "application/json"})


def _error(status: int, reason: str, message: str, details: dict | None = None) -> KubernetesError:
    return KubernetesError(status=status, reason=reason, message=message, details=details or {})


@attrs.define(kw_only=True)
class ApiServer(KubernetesEmulator):
    store: dict[tuple, dict] = attrs.field(factory=dict)
    applied: dict[tuple, dict[str, dict]] = attrs.field(factory=dict)  # key -> manager -> last applied config
    rv: int = 0
    faults: list[Fault] = attrs.field(factory=list)
    writes: list[tuple[str, str, dict]] = attrs.field(factory=list)  # (method, path, params) of accepted writes
    expire_continue: int = 0  # the next N continued list pages answer 410 Gone
    hold_after: int | None = None  # accept this many more writes, then hold every further write
    holding: threading.Event = attrs.field(factory=threading.Event)
    release: asyncio.Event | None = None
    mutex: threading.Lock = attrs.field(factory=threading.Lock)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for (group, version, plural), (kind, namespaced) in RESOURCES.items():
            self.resources[f"{group}/{version}/{plural}" if group else f"v1/{plural}"] = \
                self.ResourceInfo(kind=kind, namespaced=namespaced)
        self.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})

    # -- helpers for tests ---------------------------------------------------------------------------

    def _stamp(self, obj: dict, old: dict | None) -> dict:
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        if old is None:
            meta["uid"] = str(uuid.UUID(int=random.getrandbits(128), version=4))  # uuid4() reads urandom: slow
            meta["creationTimestamp"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            meta["generation"] = 1
        else:
            old_meta = old["metadata"]
            meta["uid"] = old_meta["uid"]
            meta["creationTimestamp"] = old_meta["creationTimestamp"]
            meta["generation"] = old_meta.get("generation", 1) + (1 if obj.get("spec") != old.get("spec") else 0)
        return obj

    def seed(self, obj: dict) -> dict:
        """Put an object in place as if someone else had created it."""
        plural = PLURAL_OF_KIND[obj["kind"]]
        meta = obj["metadata"]
        key = (plural, meta.get("namespace"), meta["name"])
        with self.mutex:
            self.store[key] = self._stamp(copy.deepcopy(obj), self.store.get(key))
            return copy.deepcopy(self.store[key])

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:  # type: ignore[override]
        with self.mutex:
            obj = self.store.get((PLURAL_OF_KIND[kind], namespace, name))
            return copy.deepcopy(obj) if obj else None

    def remove(self, kind: str, name: str, namespace: str | None = None) -> None:
        with self.mutex:
            self.store.pop((PLURAL_OF_KIND[kind], namespace, name), None)
            self.applied.pop((PLURAL_OF_KIND[kind], namespace, name), None)

    def objects(self, kind: str) -> dict[tuple[str | None, str], dict]:
        plural = PLURAL_OF_KIND[kind]
        with self.mutex:
            return {(ns, name): copy.deepcopy(o) for (p, ns, name), o in self.store.items() if p == plural}

    # -- serving -------------------------------------------------------------------------------------

    async def __call__(self, raw_request):  # type: ignore[override]
        # kmock 0.8's path parser crashes on the namespaces collection (/api/v1/namespaces reads as
        # "namespace <missing>"): build that one request ourselves.
        if raw_request.path.rstrip("/") != "/api/v1/namespaces":
            return await super().__call__(raw_request)
        body = await raw_request.read()
        request = Request(method=raw_request.method, url=raw_request.url, params=dict(raw_request.query),
                          headers=dict(raw_request.headers), body=body, text=body.decode(errors="replace"),
                          resource=resource("", "v1", "namespaces"))
        try:
            return await self._handle(request)
        except KubernetesError as exc:
            return await self._render_error(exc)

    async def _handle(self, request):  # type: ignore[override]
        resource = request.resource
        known = resource is not None and (resource.group, resource.version, resource.plural) in RESOURCES
        if not known:
            return await super()._handle(request)  # discovery and anything else: kmock's own behaviour
        method = request.method.value
        for fault in self.faults:
            if (fault.method in (None, method) and fault.plural in (None, resource.plural)
                    and fault.times > 0):
                fault.matched += 1
                if fault.matched > fault.after:
                    fault.times -= 1
                    raise _error(fault.status, "InjectedFault", f"injected {fault.status}")
        if method in ("POST", "PUT", "PATCH", "DELETE") and self.hold_after is not None:
            if self.hold_after <= 0:
                self.holding.set()
                while True:  # held until the client gives up (it is killed in the tests)
                    await asyncio.sleep(3600)
            self.hold_after -= 1
        kind, namespaced = RESOURCES[(resource.group, resource.version, resource.plural)]
        with self.mutex:
            status, body = self._serve(request, method, resource.plural, kind, namespaced)
        return _json(body, status)

    async def _render_error(self, exc):  # type: ignore[override]
        if not isinstance(exc, KubernetesError):
            return await super()._render_error(exc)
        return _json({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": exc.status,
                      "reason": exc.reason, "message": exc.message, "details": exc.details or {}}, exc.status)

    def _serve(self, request, method: str, plural: str, kind: str, namespaced: bool) -> tuple[int, dict]:
        params = dict(request.params)
        ns = request.namespace if namespaced else None
        name = request.name
        if method == "GET" and name is None:
            return 200, self._list(plural, kind, ns, params)
        key = (plural, ns, name)
        current = self.store.get(key)
        if method == "GET":
            if current is None:
                raise _error(404, "NotFound", f'{plural} "{name}" not found', {"name": name, "kind": plural})
            return 200, current
        body = json.loads(request.body) if request.body else {}
        if method == "DELETE":
            if current is None:
                raise _error(404, "NotFound", f'{plural} "{name}" not found', {"name": name, "kind": plural})
            pre = (body.get("preconditions") or {}) if isinstance(body, dict) else {}
            if pre.get("uid") not in (None, current["metadata"]["uid"]):
                raise _error(409, "Conflict", "Precondition failed: UID")
            del self.store[key]
            self.applied.pop(key, None)
            self.writes.append((method, str(request.url.path), params))
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}
        # Writes.
        if namespaced and ("namespaces", None, ns) not in self.store:
            raise _error(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
        if method == "POST":
            name = (body.get("metadata") or {}).get("name")
            key = (plural, ns, name)
            self._validate(body, kind, params)
            if key in self.store:
                raise _error(409, "AlreadyExists", f'{plural} "{name}" already exists')
            obj = copy.deepcopy(body)
            if namespaced:
                obj["metadata"]["namespace"] = ns
            self.store[key] = self._stamp(obj, None)
            status = 201
        elif method == "PUT":
            self._validate(body, kind, params)
            if current is None:
                raise _error(404, "NotFound", f'{plural} "{name}" not found')
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if not rv:
                raise _error(422, "Invalid", "metadata.resourceVersion: must be specified for an update")
            if rv != current["metadata"]["resourceVersion"]:
                raise _error(409, "Conflict", "the object has been modified; please apply your changes to the "
                                              "latest version and try again")
            obj = copy.deepcopy(body)
            if namespaced:
                obj["metadata"]["namespace"] = ns
            self.store[key] = self._stamp(obj, current)
            self.applied.pop(key, None)
            status = 200
        elif method == "PATCH":
            content_type = request.headers.get("Content-Type", "")
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if current is not None and rv and rv != current["metadata"]["resourceVersion"]:
                raise _error(409, "Conflict", "the object has been modified")
            if "apply-patch" in content_type:
                manager = params.get("fieldManager")
                if not manager:
                    raise _error(400, "BadRequest", "fieldManager is required for apply requests")
                self._validate(body, kind, params)
                obj = copy.deepcopy(current) if current is not None else {}
                config = copy.deepcopy(body)
                config.get("metadata", {}).pop("resourceVersion", None)
                previous = self.applied.get(key, {}).get(manager)
                if previous is not None:
                    for path in _leaves(previous) - _leaves(config):
                        _remove(obj, path)
                _merge(obj, config)
                _prune_empty(obj)
                if namespaced:
                    obj.setdefault("metadata", {})["namespace"] = ns
                self.store[key] = self._stamp(obj, current)
                self.applied.setdefault(key, {})[manager] = config
                status = 201 if current is None else 200
            else:
                if current is None:
                    raise _error(404, "NotFound", f'{plural} "{name}" not found')
                obj = _merge(copy.deepcopy(current), body)
                self.store[key] = self._stamp(obj, current)
                status = 200
        else:
            raise _error(405, "MethodNotAllowed", method)
        self.writes.append((method, str(request.url.path), params))
        return status, self.store[key]

    def _validate(self, body: dict, kind: str, params: dict) -> None:
        if params.get("fieldValidation") != "Strict":
            return
        unknown = [k for k in body if k not in TOP_LEVEL]
        if kind in ("VirtualMachineClusterInstancetype", "VirtualMachineInstancetype"):
            unknown += [f"spec.{k}" for k in (body.get("spec") or {}) if k not in INSTANCETYPE_SPEC]
        if unknown:
            raise _error(400, "BadRequest", f'strict decoding error: unknown field "{unknown[0]}"')

    def _list(self, plural: str, kind: str, ns: str | None, params: dict) -> dict:
        cont = params.get("continue")
        offset, snapshot = 0, self.rv
        if cont:
            if self.expire_continue > 0:
                self.expire_continue -= 1
                raise _error(410, "Expired", "The provided continue parameter is too old to display a consistent "
                                             "list result. You can start a new list without the continue parameter.")
            snapshot_s, offset_s = base64.b64decode(cont).decode().split(":")
            offset, snapshot = int(offset_s), int(snapshot_s)
        items = [o for (p, o_ns, _n), o in sorted(self.store.items(), key=lambda kv: str(kv[0]))
                 if p == plural and (ns is None or o_ns == ns)]
        if params.get("labelSelector"):
            items = [o for o in items if _selector_matches(params["labelSelector"], o["metadata"].get("labels") or {})]
        if params.get("fieldSelector"):
            items = [o for o in items if _fields_match(params["fieldSelector"], o)]
        meta: dict[str, Any] = {"resourceVersion": str(snapshot)}
        limit = int(params.get("limit") or 0)
        if limit and offset + limit < len(items):
            meta["continue"] = base64.b64encode(f"{snapshot}:{offset + limit}".encode()).decode()
            items = items[offset:offset + limit]
        else:
            items = items[offset:]
        group_version = "v1" if plural == "namespaces" else None
        for g, v, p in RESOURCES:
            if p == plural:
                group_version = f"{g}/{v}" if g else "v1"
        return {"apiVersion": group_version, "kind": f"{kind}List", "metadata": meta, "items": items}


class RunningApiServer:
    """An ApiServer on a real port in a thread of its own (the controller's client is synchronous)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.handler: ApiServer | None = None
        self.server: Server | None = None
        self.port: int | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="apiserver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self) -> dict:
        return {"apiVersion": "v1", "kind": "Config", "current-context": "test",
                "clusters": [{"name": "test", "cluster": {"server": self.url}}],
                "users": [{"name": "test", "user": {}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}]}

    def _call(self, coro, timeout: float = 10):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> RunningApiServer:
        self._thread.start()

        async def enter():
            self.handler = ApiServer()
            await self.handler.__aenter__()
        self._call(enter())
        self.up()
        return self

    def up(self) -> None:
        """Listen (again, on the same port once it had one)."""
        async def start():
            self.server = Server(self.handler, port=self.port)
            await self.server.__aenter__()
            self.port = self.server.port
        self._call(start())

    def down(self) -> None:
        """Stop listening: clients get connection refused until up()."""
        async def stop():
            await self.server.__aexit__(None, None, None)
            self.server = None
        self._call(stop())

    def stop(self) -> None:
        if self.server is not None:
            self.down()
        self._call(self.handler.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def _serve_in_child(conn) -> None:
    server = RunningApiServer().start()
    conn.send(server.port)
    while True:
        command, args = conn.recv()
        if command == "stop":
            server.stop()
            conn.send(None)
            return
        if command == "seed":
            conn.send(server.handler.seed(args))
        elif command == "count":
            conn.send(len(server.handler.objects(args)))
        elif command == "writes":
            conn.send(len(server.handler.writes))


class ApiServerProcess:
    """The same server in a process of its own (the benchmark: no GIL shared with the controller)."""

    def __init__(self) -> None:
        self._conn, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("fork").Process(target=_serve_in_child, args=(child,),
                                                                    daemon=True)
        self._process.start()
        self.port = self._conn.recv()

    url = RunningApiServer.url
    kubeconfig = RunningApiServer.kubeconfig

    def _ask(self, command: str, args=None):
        self._conn.send((command, args))
        return self._conn.recv()

    def seed(self, obj: dict) -> dict:
        return self._ask("seed", obj)

    def count(self, kind: str) -> int:
        return self._ask("count", kind)

    def writes(self) -> int:
        return self._ask("writes")

    def stop(self) -> None:
        self._ask("stop")
        self._process.join(10)
