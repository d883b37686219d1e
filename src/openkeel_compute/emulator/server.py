"""The emulated cluster on a real port: a Kubernetes API server over HTTP, KubeVirt's controllers behind it.

``Emulator`` serves the Kubernetes REST API (core namespaces and secrets, leases, controller
revisions, KubeVirt's VMs, VMIs, instancetypes and preferences, CDI's DataVolumes, the
subresources.kubevirt.io lifecycle verbs) on a ThreadingHTTPServer and runs the lifecycle
controllers in a thread of their own. Clients (lightkube, kubectl) talk to it through an ordinary
kubeconfig (``kubeconfig()``). Faults are injected with ``inject`` or over HTTP (faults.py).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import http.server
import json
import logging
import os
import pathlib
import re
import socket
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Self

import orjson
import yaml

from openkeel_compute.emulator import consoles, guest, snapshots, subresources
from openkeel_compute.emulator.audit import AuditLog
from openkeel_compute.emulator.faults import API_MESSAGES, Fault
from openkeel_compute.emulator.importer import Importer
from openkeel_compute.emulator.lifecycle import NODE, Delays, Lifecycle
from openkeel_compute.emulator.persist import Persistence
from openkeel_compute.emulator.resources import BY_KIND, BY_PATH, RESOURCES, Resource
from openkeel_compute.emulator.sshd import GuestSSH
from openkeel_compute.emulator.store import ApiError, Store, fields_match, labels_match, now

LOG = logging.getLogger(__name__)
FAULTS_PATH = "/emulator/v1/faults"
SUBRESOURCES_GROUP = "subresources.kubevirt.io"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body in separate segments would wait for a delayed ACK
    server_version = "openkeel-emulated-kube-apiserver"
    emulator: Emulator  # set on the per-server subclass

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    def setup(self) -> None:
        super().setup()
        self.emulator._connections.add(self.connection)

    def finish(self) -> None:
        self.emulator._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = _dumps(body) if not isinstance(body, bytes) else body
        headers = dict(headers or {})
        self.send_response(code)
        self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError:
                raise ApiError(400, "the body of the request was in an unknown format") from None

    def _serve(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        if self.command == "GET" and (self.headers.get("Upgrade") or "").lower() == "websocket":
            self._audit(url.path, params, 101)
            self.close_connection = True
            try:
                self.emulator.console(self, url.path)
            except ApiError as exc:
                self._send(exc.code, exc.status(), exc.headers)
            return
        if self.command == "GET" and url.path.startswith("/exports/"):
            self._export(url.path, params)
            return
        if self.command == "GET" and params.get("watch") in ("true", "1"):
            self._audit(url.path, params, 200)
            try:
                self.emulator.watch(self, url.path, params)
            except ApiError as exc:
                self._send(exc.code, exc.status(), exc.headers)
            except OSError:  # the client went away
                self.close_connection = True
            return
        try:
            body = self._body()
            code, answer, headers = self.emulator.handle(self.command, url.path, params, body,
                                                         self.headers.get("Content-Type", ""))
        except ApiError as exc:
            code, answer, headers = exc.code, exc.status(), exc.headers
        except Exception:  # a defect of the emulator: say so the way the API server does
            LOG.exception("emulated API server: %s %s", self.command, self.path)
            exc = ApiError(500, "Internal error occurred: the emulated API server failed on this request")
            code, answer, headers = 500, exc.status(), {}
        self._audit(url.path, params, code)
        self._send(code, answer, headers)

    def _export(self, path: str, params: dict[str, str]) -> None:
        """A download from a VirtualMachineExport's link (emulator/snapshots.py), streamed."""
        token = self.headers.get(snapshots.TOKEN_HEADER) or params.get("x_kubevirt_export_token")
        try:
            code, body, length = self.emulator.lifecycle.snapshots.serve(path, token)
        except ApiError as exc:
            self._send(exc.code, exc.status(), exc.headers)
            return
        self._audit(path, {}, code)
        if isinstance(body, bytes):
            self._send(code, body, {"Content-Type": "application/octet-stream" if code == 200 else "text/plain"})
            return
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        for chunk in body:
            self.wfile.write(chunk)

    def _audit(self, path: str, params: dict[str, str], code: int) -> None:
        if self.emulator.audit is not None:
            self.emulator.audit.record(self.command, path, params, self.headers.get("User-Agent", ""), code)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def _dumps(body: Any) -> bytes:
    """An answer's JSON, compact as the API server's; orjson (a list of a thousand VMs is encoded while
    the store is locked), the standard library for what orjson refuses (keys that are not strings)."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, separators=(",", ":")).encode()


def node(name: str, zone: str | None = None, ready: bool = True, *, cpu: str = "16", memory: str = "65536Mi",
         disk: str = "500Gi", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Ready node (the cluster has one, without a zone label: the default availability zone).
    Tests seed more, with ``topology.kubernetes.io/zone`` labels. Its capacity and allocatable are a
    typical worker's (16 CPUs, 64 GiB, 500 GiB of ephemeral storage, 110 pods), or what is given;
    ``labels`` are added to the usual ones (traits, ``cpumanager``, ...)."""
    all_labels = {"kubernetes.io/hostname": name, "kubevirt.io/schedulable": "true", **(labels or {})}
    if zone is not None:
        all_labels["topology.kubernetes.io/zone"] = zone
    resources = {"cpu": cpu, "memory": memory, "ephemeral-storage": disk, "pods": "110"}
    address = f"192.168.122.{10 + int(hashlib.sha256(name.encode()).hexdigest(), 16) % 200}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": all_labels},
            "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                                   "addresses": [{"type": "InternalIP", "address": address},
                                                 {"type": "Hostname", "address": name}],
                                   "capacity": dict(resources), "allocatable": dict(resources)}}


class Emulator:
    """A KubeVirt v1.9 cluster in this process: API server on ``host:port`` plus its controllers."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, delays: Delays | None = None,
                 tick: float = 0.05, audit_log: str | None = None, nodes: int = 1,
                 state_dir: str | os.PathLike | None = None, read_images: bool = True,
                 guest_ssh_port: int | None = 22) -> None:
        """``nodes``: how many Ready worker nodes the cluster has (``emulated-node-1`` … ``-N``, each a
        typical worker, see ``node``). ``state_dir``: where the cluster is kept (persist.py), so that a new
        Emulator on the same directory finds every object as it was; None keeps it in memory only.
        ``read_images``: CDI's importer reads each DataVolume's HTTP source, and an import whose source
        cannot be read fails and is retried as on a real cluster (importer.py); False: every import succeeds
        without reading it (a cluster whose image URLs are never served).
        ``guest_ssh_port``: the port on which running guests answer SSH where their addresses are this
        machine's (sshd.py); None: no guest answers.
        Raises persist.StateError when another process uses that directory."""
        if nodes < 1:
            raise ValueError("the built-in cluster needs at least one node")
        self.host, self.port = host, port
        # Opt-in audit of every resource request (emulator/audit.py): the argument, else $OPENKEEL_EMULATOR_AUDIT_LOG.
        self.audit = AuditLog.from_env(audit_log)
        self.store = Store()
        self.faults: list[Fault] = []
        self.lifecycle = Lifecycle(self.store, delays or Delays(), self.faults, Importer(enabled=read_images))
        self.tick = tick
        self.hold_after: int | None = None  # see _maybe_hold
        self.holding = threading.Event()
        self._release = threading.Event()
        self._stopped = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self.persistence: Persistence | None = None
        self.restored: int | None = None  # objects read back from state_dir (None: kept in memory only)
        # the volume copies of VirtualMachineSnapshots (emulator/snapshots.py): kept with the cluster's state
        self._scratch = None if state_dir is not None else tempfile.TemporaryDirectory(prefix="emulator-snapshots-")
        kept = pathlib.Path(state_dir if state_dir is not None else self._scratch.name)  # type: ignore[union-attr]
        self.lifecycle.snapshots.data_dir = kept / "snapshot-data"
        # the files of the guests' boot disks (sshd.py, guestshell.py): kept with the cluster's state too
        self.sshd = GuestSSH(self.store, kept / "guest-disks", guest_ssh_port) if guest_ssh_port is not None \
            else None
        if state_dir is not None:
            self.persistence = Persistence(state_dir, self.store, self.lifecycle)
            self.restored = len(self.persistence.open().objects)  # (not kept: it would hold old objects)
        self._size_node_pool(nodes)

    def _size_node_pool(self, count: int) -> None:
        """emulated-node-1 … -N exist (a cluster read back keeps its nodes as they were); nodes of the
        pool beyond N go, as when a node pool is scaled down (what ran there fails, see lifecycle)."""
        wanted = {NODE, *(f"emulated-node-{i}" for i in range(2, count + 1))}
        with self.store.lock:
            for name in sorted(wanted, key=lambda n: int(n.rsplit("-", 1)[1])):
                if ("nodes", None, name) not in self.store.objects:
                    self.store.put(node(name))
            for _plural, _ns, name in list(self.store.objects.of_kind("nodes")):
                if re.fullmatch(r"emulated-node-[0-9]+", name) and name not in wanted:
                    LOG.warning("built-in cluster: node %s goes ([controller] emulator_nodes = %d)", name, count)
                    self.store._remove(("nodes", None, name))

    # -- running -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def handler(self) -> Emulator:
        """The object tests reach into (the same one: seed, get, objects, faults, writes, …)."""
        return self

    def kubeconfig(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Config", "current-context": "emulated",
                "clusters": [{"name": "emulated", "cluster": {"server": self.url}}],
                "users": [{"name": "emulated", "user": {}}],
                "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "emulated"}}]}

    def start(self) -> Emulator:
        if self.persistence is not None:
            self.persistence.start()
        self.up()
        ticker = threading.Thread(target=self._run_controllers, name="emulator-controllers", daemon=True)
        ticker.start()
        self._threads.append(ticker)
        return self

    def up(self) -> None:
        """Listen (again, on the same port once it had one)."""
        handler = type("Handler", (_Handler,), {"emulator": self})
        server = http.server.ThreadingHTTPServer((self.host, self.port), handler, bind_and_activate=False)
        server.daemon_threads = True
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        self.port = server.server_address[1]
        self.lifecycle.snapshots.base_url = self.url
        self._server = server
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  name=f"emulator-api-{self.port}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def down(self) -> None:
        """Stop listening and drop open connections: clients get connection refused until up()."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._stopped.set()
        self._release.set()
        self.down()
        for thread in self._threads:
            thread.join(2)
        self.lifecycle.importer.close()
        if self.sshd is not None:
            self.sshd.close()
        if self.persistence is not None:  # after the controllers: their last changes are in the last snapshot
            self.persistence.close()
            self.persistence = None
        if self._scratch is not None:
            self._scratch.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run_controllers(self) -> None:
        pause = self.tick
        while not self._stopped.wait(pause):
            started = time.monotonic()
            try:
                self.lifecycle.step()
                if self.sshd is not None:
                    self.sshd.sync()
            except Exception:  # keep the cluster alive; the defect is in the log
                LOG.exception("emulated KubeVirt controllers")
            # A large cluster's pass takes a while: leave the API server at least as long again.
            pause = max(self.tick, time.monotonic() - started)

    # -- what tests and operators drive --------------------------------------------------------------

    def inject(self, fault: Fault) -> int:
        """Add a fault; a node loss acts at once and returns how many VMIs it failed."""
        if fault.kind == "node-loss":
            return self.lifecycle.lose_node(fault.namespace, fault.name)
        if fault.kind in ("node-not-ready", "node-ready"):
            if not fault.name:
                raise ValueError(f"a {fault.kind} fault names its node (name)")
            ready = "True" if fault.kind == "node-ready" else ("Unknown" if fault.reason == "Unknown" else "False")
            return int(self.set_node_ready(fault.name, ready))
        with self.store.lock:
            self.faults.append(fault)
        return 0

    def set_node_ready(self, name: str, ready: str | bool = True) -> bool:
        """What the node's kubelet posts: its Ready condition ``True``, ``False`` or ``Unknown`` (a node that
        stopped answering). Returns whether the node exists."""
        status = ready if isinstance(ready, str) else ("True" if ready else "False")
        with self.store.lock:
            current = self.store.lookup("Node", name)
            if current is None:
                return False
            new = copy.deepcopy(current)
            conditions = [c for c in (new.get("status") or {}).get("conditions") or () if c.get("type") != "Ready"]
            reason = {"True": "KubeletReady", "False": "KubeletNotReady", "Unknown": "NodeStatusUnknown"}[status]
            message = {"True": "kubelet is posting ready status",
                       "False": "container runtime network not ready: NetworkReady=false",
                       "Unknown": "Kubelet stopped posting node status."}[status]
            conditions.insert(0, {"type": "Ready", "status": status, "reason": reason, "message": message,
                                  "lastHeartbeatTime": now(), "lastTransitionTime": now()})
            new.setdefault("status", {})["conditions"] = conditions
            self.store.put(new)
            return True

    def clear_faults(self, kind: str | None = None) -> None:
        with self.store.lock:
            self.faults[:] = [f for f in self.faults if kind is not None and f.kind != kind]

    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Put an object in place as if someone else had created it."""
        return copy.deepcopy(self.store.put(copy.deepcopy(obj)))

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        with self.store.lock:
            obj = self.store.lookup(kind, name, namespace)
            return copy.deepcopy(obj) if obj else None

    def remove(self, kind: str, name: str, namespace: str | None = None) -> None:
        res = BY_KIND[kind]
        with self.store.lock:
            self.store._remove((res.plural, namespace if res.namespaced else None, name))

    def objects(self, kind: str) -> dict[tuple[str | None, str], dict[str, Any]]:
        plural = BY_KIND[kind].plural
        with self.store.lock:
            return {(ns, name): copy.deepcopy(o) for (p, ns, name), o in self.store.objects.items() if p == plural}

    @property
    def writes(self) -> list[tuple[str, str, dict]]:
        return self.store.writes

    @property
    def expire_continue(self) -> int:
        return self.store.expire_continue

    @expire_continue.setter
    def expire_continue(self, value: int) -> None:
        self.store.expire_continue = value

    def wait_for(self, kind: str, name: str, namespace: str | None, predicate: Callable[[dict | None], bool],
                 timeout: float = 10.0) -> dict[str, Any] | None:
        """Wait until ``predicate(object or None)`` holds; returns the object (AssertionError on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            obj = self.get(kind, name, namespace)
            if predicate(obj):
                return obj
            if time.monotonic() > deadline:
                raise AssertionError(f"{kind} {namespace}/{name} did not get there in {timeout}s: {obj}")
            time.sleep(0.01)

    # -- requests ------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, params: dict[str, str], body: Any, content_type: str
               ) -> tuple[int, Any, dict[str, str]]:
        if path.rstrip("/") in ("/healthz", "/readyz", "/livez"):
            return 200, b"ok", {}
        if path.rstrip("/") == FAULTS_PATH:
            return self._faults_endpoint(method, body)
        group, version, rest = self._split(path)
        if version is None or (group is None) or not rest:
            return 200, self._discovery(group, version), {}
        if group == SUBRESOURCES_GROUP:
            return self._subresource(method, rest, params, body)
        res, ns, name, subresource = self._route(group, version, rest)
        self._api_fault(method, res.plural, ns, name)
        if subresource == "log":
            return self._pod_log(method, res, ns, name, params)
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            self._maybe_hold(counts=res.plural != "leases")
        with self.store.lock:
            code, answer, warnings = self._resource(method, res, ns, name, subresource, params, body, content_type)
            if method != "GET":
                self.store.writes.append((method, path, params))
            data = _dumps(answer)
        headers = {}
        if warnings:
            headers["Warning"] = ", ".join(f'299 - "{w}"' for w in warnings).replace('\\"', "'")
        return code, data, headers

    @staticmethod
    def _split(path: str) -> tuple[str | None, str | None, list[str]]:
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
        if parts[:1] == ["api"]:
            return "", parts[1] if len(parts) > 1 else None, parts[2:]
        if parts[:1] == ["apis"]:
            return (parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None, parts[3:])
        raise ApiError(404, "the server could not find the requested resource", reason="NotFound")

    @staticmethod
    def _route(group: str, version: str, rest: list[str]) -> tuple[Resource, str | None, str | None, str | None]:
        ns: str | None = None
        if group == "" and rest[0] == "namespaces" and len(rest) <= 2:
            plural, tail = "namespaces", rest[1:]
        elif rest[0] == "namespaces" and len(rest) >= 3:
            ns, plural, tail = rest[1], rest[2], rest[3:]
        else:
            plural, tail = rest[0], rest[1:]
        res = BY_PATH.get((group, version, plural))
        if res is None:
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        if not res.namespaced and ns is not None:
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        name = tail[0] if tail else None
        subresource = tail[1] if len(tail) > 1 else None
        if subresource == "log" and res.plural == "pods":
            return res, ns, name, subresource
        if subresource not in (None, "status") or (subresource == "status" and not res.status_subresource):
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        return res, ns, name, subresource

    def watch(self, handler: _Handler, path: str, params: dict[str, str]) -> None:
        """Stream ADDED / MODIFIED / DELETED events as newline-delimited JSON (chunked), as a watch does."""
        group, version, rest = self._split(path)
        if version is None or group is None or not rest:
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        res, ns, name, _sub = self._route(group, version, rest)
        self._api_fault("GET", res.plural, ns, name)
        labels, fields = params.get("labelSelector"), params.get("fieldSelector")
        if name is not None:
            fields = ",".join(filter(None, (fields, f"metadata.name={name}")))
        timeout = float(params.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        store = self.store
        with store.lock:
            since = params.get("resourceVersion") or "0"
            try:
                last = int(since)
            except ValueError:
                raise ApiError(400, f'resourceVersion: Invalid value: "{since}": must be an integer') from None
            initial: list[bytes] = []
            if last == 0:
                listing = store.list(res, ns, {"labelSelector": labels or "", "fieldSelector": fields or ""})
                initial = [orjson.dumps({"type": "ADDED", "object": o}) for o in listing["items"]]
                last = store.rv
            elif last < store.rv and last < store.history_floor():
                initial = [orjson.dumps({"type": "ERROR", "object": ApiError(
                    410, f"too old resource version: {last} ({store.history_floor()})", reason="Expired").status()})]
                deadline = 0.0
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def send(lines: list[bytes]) -> None:
            if lines:
                data = b"".join(line + b"\n" for line in lines)
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                handler.wfile.flush()

        send(initial)
        while not self._stopped.is_set() and time.monotonic() < deadline:
            with store.lock:
                fresh = store.events_after(last)
                if not fresh:
                    store.changed.wait(min(1.0, max(0.0, deadline - time.monotonic())))
                    fresh = store.events_after(last)
            lines = []
            for rv, type_, plural, event_ns, data in fresh:
                last = max(last, rv)
                if plural != res.plural or (ns is not None and event_ns != ns):
                    continue
                if labels or fields:
                    obj = orjson.loads(data)
                    if labels and not labels_match(labels, obj["metadata"].get("labels") or {}):
                        continue
                    if fields and not fields_match(fields, obj):
                        continue
                lines.append(b'{"type":"%s","object":%s}' % (type_.encode(), data))
            send(lines)
        handler.wfile.write(b"0\r\n\r\n")  # the connection stays open for the next request

    def _api_fault(self, method: str, plural: str, ns: str | None, name: str | None) -> None:
        with self.store.lock:
            for fault in self.faults:
                if fault.api_match(method, plural, ns, name):
                    headers = {"Retry-After": "1"} if fault.status == 429 else {}
                    message = fault.message or (f"{API_MESSAGES.get(fault.status, 'injected fault')} "
                                                f"(HTTP {fault.status} injected into the emulated cluster)")
                    raise ApiError(fault.status, message, headers=headers)

    def _maybe_hold(self, counts: bool) -> None:
        """``hold_after``: accept that many more writes (Lease renewals not counted), then hold every write."""
        if self.hold_after is None:
            return
        with self.store.lock:
            hold = self.hold_after <= 0
            if not hold and counts:
                self.hold_after -= 1
        if hold:
            self.holding.set()
            self._release.wait()  # until the emulator stops (the client gives up long before)
            raise ApiError(503, API_MESSAGES[503])

    def _resource(self, method: str, res: Resource, ns: str | None, name: str | None, subresource: str | None,
                  params: dict[str, str], body: Any, content_type: str) -> tuple[int, Any, list[str]]:
        store = self.store
        if method == "GET":
            if name is None:
                return 200, store.list(res, ns, params), []
            return 200, store.get(res, ns, name), []
        if method == "POST" and name is None:
            obj, warnings = store.create(res, ns, body if body is not None else {}, params)
            return 201, obj, warnings
        if name is None:
            raise ApiError(405, f"the server does not allow this method on the requested resource ({method})",
                           reason="MethodNotAllowed")
        if method == "PUT":
            obj, warnings = store.update(res, ns, name, body if body is not None else {}, params, subresource)
            return 200, obj, warnings
        if method == "PATCH":
            obj, warnings, code = store.patch(res, ns, name, body, content_type, params, subresource)
            return code, obj, warnings
        if method == "DELETE":
            return 200, store.delete(res, ns, name, body, params), []
        raise ApiError(405, f"the server does not allow this method on the requested resource ({method})",
                       reason="MethodNotAllowed")

    def _pod_log(self, method: str, res: Resource, ns: str | None, name: str | None, params: dict[str, str]
                 ) -> tuple[int, Any, dict[str, str]]:
        """A container's log: plain text, as the API server streams it from the kubelet."""
        if method != "GET":
            raise ApiError(405, f"the server does not allow this method on the requested resource ({method})",
                           reason="MethodNotAllowed")
        with self.store.lock:
            data = self.lifecycle.launchers.log(res, ns, name or "", params)
        return 200, data, {"Content-Type": "text/plain"}

    def _subresource(self, method: str, rest: list[str], params: dict[str, str], body: Any
                     ) -> tuple[int, Any, dict[str, str]]:
        if len(rest) != 5 or rest[0] != "namespaces":
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        ns, plural, name, verb = rest[1], rest[2], rest[3], rest[4]
        verbs = {"virtualmachines": subresources.VM_VERBS, "virtualmachineinstances": subresources.VMI_VERBS}
        if plural == "virtualmachineinstances" and verb in guest.AGENT_VERBS:
            if method != "GET":
                raise ApiError(405, f"the server does not allow this method on the requested resource ({method})",
                               reason="MethodNotAllowed")
            self._api_fault(method, plural, ns, name)
            with self.store.lock:
                return 200, guest.agent_answer(self.store, ns, name, verb), {}
        if verb not in verbs.get(plural, ()):
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        if method != "PUT":
            raise ApiError(405, f"the server does not allow this method on the requested resource ({method})",
                           reason="MethodNotAllowed")
        self._api_fault(method, plural, ns, name)
        raw, body = body, body if isinstance(body, dict) else {}
        with self.store.lock:
            if verb in subresources.VOLUME_VERBS:
                kind = "VirtualMachine" if plural == "virtualmachines" else "VirtualMachineInstance"
                subresources.volume_verb(self.store, kind, ns, name, verb, raw)
            elif plural == "virtualmachines":
                subresources.vm_verb(self.store, ns, name, verb, body)
            else:
                subresources.vmi_verb(self.store, ns, name, verb, body)
                if verb == "softreboot":
                    vmi = self.store.lookup("VirtualMachineInstance", name, ns)
                    if vmi is not None:
                        self.lifecycle.launchers.rebooted(vmi)
            self.store.writes.append(("PUT", f"/apis/{SUBRESOURCES_GROUP}/v1/{'/'.join(rest)}", params))
        return 202, b"", {}

    def console(self, handler: _Handler, path: str) -> None:
        """A websocket to a VMI's VNC display or serial console (consoles.py)."""
        prefix = f"/apis/{SUBRESOURCES_GROUP}/v1/"
        rest = path[len(prefix):].split("/") if path.startswith(prefix) else []
        if len(rest) != 5 or rest[0] != "namespaces" or rest[2] != "virtualmachineinstances" \
                or rest[4] not in consoles.CONSOLE_VERBS:
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        ns, name, verb = rest[1], rest[3], rest[4]
        self._api_fault("GET", "virtualmachineinstances", ns, name)
        with self.store.lock:
            vmi = self.store.lookup("VirtualMachineInstance", name, ns)
            consoles.check_running(vmi, ns, name)

        def lines() -> list[str]:
            with self.store.lock:
                current = self.store.lookup("VirtualMachineInstance", name, ns)
                pod = self.lifecycle.launchers.pod_of(current) if current is not None else None
                if pod is None:
                    return []
                return list(self.lifecycle.launchers.consoles.get(pod["metadata"]["uid"], []))

        consoles.serve(handler.connection, handler.headers, verb, lines, self._stopped)

    def _faults_endpoint(self, method: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        if method == "GET":
            with self.store.lock:
                return 200, {"faults": [f.to_json() for f in self.faults]}, {}
        if method == "DELETE":
            self.clear_faults()
            return 200, {"faults": []}, {}
        if method == "POST":
            try:
                fault = Fault.from_json(body if isinstance(body, dict) else {})
            except (TypeError, ValueError) as exc:
                raise ApiError(400, str(exc)) from None
            try:
                affected = self.inject(fault)
            except ValueError as exc:
                raise ApiError(400, str(exc)) from None
            return 201, {"fault": fault.to_json(), "affected": affected}, {}
        raise ApiError(405, f"the server does not allow this method on the requested resource ({method})",
                       reason="MethodNotAllowed")

    def _discovery(self, group: str | None, version: str | None) -> dict[str, Any]:
        if group == "" and version is None:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}]}
        groups: dict[str, list[str]] = {}
        for res in RESOURCES:
            if res.group:
                groups.setdefault(res.group, [])
                if res.version not in groups[res.group]:
                    groups[res.group].append(res.version)
        groups[SUBRESOURCES_GROUP] = ["v1"]
        if group is None:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                for g, vs in sorted(groups.items())]}
        if version is None:
            if group not in groups:
                raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
            vs = groups[group]
            return {"kind": "APIGroup", "apiVersion": "v1", "name": group,
                    "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{group}/{vs[0]}", "version": vs[0]}}
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        listing = []
        for res in RESOURCES:
            if (res.group, res.version) != (group, version):
                continue
            entry: dict[str, Any] = {"name": res.plural, "singularName": res.singular or res.kind.lower(),
                                     "namespaced": res.namespaced, "kind": res.kind, "verbs": verbs}
            if res.short_names:  # kubectl resolves `get vm,vmi,dv` and `get all` from these
                entry["shortNames"] = list(res.short_names)
            if res.categories:
                entry["categories"] = list(res.categories)
            listing.append(entry)
            if res.status_subresource:
                listing.append({"name": f"{res.plural}/status", "singularName": "", "namespaced": True,
                                "kind": res.kind, "verbs": ["get", "patch", "update"]})
        if group == "" and version == "v1":
            listing.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                            "verbs": ["get"]})
        if group == SUBRESOURCES_GROUP and version == "v1":
            for plural, kind, names in (("virtualmachines", "VirtualMachine", subresources.VM_VERBS),
                                        ("virtualmachineinstances", "VirtualMachineInstance",
                                         subresources.VMI_VERBS)):
                listing += [{"name": f"{plural}/{verb}", "singularName": "", "namespaced": True, "kind": kind,
                             "verbs": ["update"]} for verb in names]
            listing += [{"name": f"virtualmachineinstances/{verb}", "singularName": "", "namespaced": True,
                         "kind": "VirtualMachineInstance", "verbs": ["get"]} for verb in guest.AGENT_VERBS]
        if not listing:
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": listing}
