"""An audit log of the emulated API server: one JSON line per request, in the terms RBAC authorizes.

Opt-in: ``Emulator(audit_log=PATH)`` or the environment variable ``OPENKEEL_EMULATOR_AUDIT_LOG=PATH``
(every emulator started in that process appends to the file). Each line carries what kube-apiserver's
authorizer sees for the request: ``verb`` (get, list, watch, create, update, patch, delete,
deletecollection), ``apiGroup`` ("" for the core group), ``resource``, ``subresource``,
``namespace`` and ``name``, and also the client's ``userAgent`` and the answer's ``code``. Requests
outside the resource API (discovery, /healthz, the faults endpoint) are not logged.

tools/rbac_calls.py runs the controller's tests with it and keeps the distinct calls of the
controller's own client; tests/deploy checks the deployment's RBAC against them.
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from typing import Any

import orjson

ENV = "OPENKEEL_EMULATOR_AUDIT_LOG"
# Namespace subresources addressed as /api/v1/namespaces/NAME/SUB (not a namespaced resource called SUB).
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def attributes(method: str, path: str, params: dict[str, str]) -> dict[str, Any] | None:
    """The authorizer's view of a request (kube-apiserver's RequestInfo), or None outside the resource API."""
    parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = "/".join(rest[2:]) or None
    if method == "GET":
        verb = "watch" if params.get("watch") in ("true", "1") else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return {"verb": verb, "apiGroup": group, "resource": resource, "subresource": subresource,
            "namespace": namespace, "name": name}


class AuditLog:
    """Append-only JSON lines; each line is one write(2) on an O_APPEND file, so processes can share it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, path: str | None = None) -> AuditLog | None:
        path = path or os.environ.get(ENV)
        return cls(path) if path else None

    def record(self, method: str, path: str, params: dict[str, str], user_agent: str, code: int) -> None:
        entry = attributes(method, path, params)
        if entry is None:
            return
        entry.update(userAgent=user_agent, code=code)
        line = orjson.dumps(entry) + b"\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
