"""The handler engine: how one API operation's contract is stated and executed.

Every operation is declared with ``@operation(...)``: the microversion range it exists in, its
request-body and query schemas per version range, its success status and the errors it may
answer. ``Endpoint`` runs the contract in Nova's order:

  microversion (400 malformed / 406 unsupported) → Content-Type (415) → body JSON (400)
  → ``{project_id}`` in the URL vs the token (400) → method exists at this version (404)
  → query schema (400) → body schema (400) → the handler (its policy check, 403, comes first
  inside it) → serialisation.

Every answer after a successful version parse carries both version headers and both Vary lines.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Callable
from typing import Any

import falcon
import orjson

from openkeel_compute.api import faults, microversion, stored_text, validation
from openkeel_compute.api.microversion import Version

LOG = logging.getLogger(__name__)

SUPPORTED_CONTENT_TYPES = ("application/json", "application/vnd.openstack.compute+json")
SUCCESS_CONTENT_TYPE = "application/json"


@dataclasses.dataclass(frozen=True)
class Operation:
    """One API operation's whole contract."""

    func: Callable
    versions: tuple[Version, Version]
    body: tuple[tuple[Version, Version, object], ...]
    query: tuple[tuple[Version, Version, object], ...]
    success: int
    expected: tuple[int, ...]
    # How the operation stands against Nova's (docs/api.md): served; removed from Nova (its 410, or
    # os-getRDPConsole's 400); or answered as Nova answers when ``without`` (a service) is absent.
    removed: bool = False
    without: str | None = None

    @property
    def standing(self) -> str:
        if self.removed:
            return "removed"
        return f"without {self.without}" if self.without else "served"

    def available(self, version: Version) -> bool:
        low, high = self.versions
        return low <= version <= high

    def schema_for(self, table, version: Version):
        for low, high, schema in table:
            if low <= version <= high:
                return schema
        return None


def _compile(table: dict | None):
    compiled = []
    for spec, schema in (table or {}).items():
        low, high = microversion.parse_range(spec)
        compiled.append((low, high, schema))
    return tuple(compiled)


def operation(*, versions: str = "2.0-", body: dict | None = None, query: dict | None = None,
              success: int = 200, expected: tuple[int, ...] = (), removed: bool = False,
              without: str | None = None):
    """Declare a handler's contract. Version ranges are 'low-high' (either side open), '2.0' is /v2.

    ``removed``: an operation Nova removed (it answers as Nova's removed handler does);
    ``without``: the service whose absence the answer reproduces (e.g. "Ironic").
    """

    def decorator(func):
        func.operation = Operation(
            func=func,
            versions=microversion.parse_range(versions),
            body=_compile(body),
            query=_compile(query),
            success=success,
            expected=tuple(expected),
            removed=removed,
            without=without,
        )
        return func

    return decorator


class Request:
    """What a handler sees: context, version, parsed query and body, URL helpers."""

    __slots__ = ("body", "context", "environ", "falcon", "query", "version")

    def __init__(self, freq: falcon.Request, context, version: Version):
        self.falcon = freq
        self.environ = freq.env
        self.context = context
        self.version = version
        self.query: dict[str, list[str]] = {}
        self.body = None

    @property
    def legacy_v2(self) -> bool:
        return self.version == microversion.LEGACY_V2

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= (major, minor)

    @property
    def application_url(self) -> str:
        """scheme://host[:port] + the script name (/v2.1 or /v2), as webob computes it."""
        return self.host_url + self.environ.get("SCRIPT_NAME", "")

    @property
    def host_url(self) -> str:
        env = self.environ
        scheme = env.get("wsgi.url_scheme", "http")
        host = env.get("HTTP_HOST")
        if not host:
            host = env.get("SERVER_NAME", "localhost")
            port = env.get("SERVER_PORT")
            if port and not ((scheme == "http" and port == "80") or (scheme == "https" and port == "443")):
                host += ":" + port
        else:
            if scheme == "http" and host.endswith(":80"):
                host = host[:-3]
            elif scheme == "https" and host.endswith(":443"):
                host = host[:-4]
        return f"{scheme}://{host}"

    @property
    def url(self) -> str:
        qs = self.environ.get("QUERY_STRING")
        path = self.environ.get("openkeel.original_path")
        if path is None:
            path = self.environ.get("SCRIPT_NAME", "") + self.environ.get("PATH_INFO", "")
        return self.host_url + path + ("?" + qs if qs else "")


class Response:
    """A handler's successful answer: a body (dict, None, or JSON already serialised as bytes) and
    optional status override."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(self, body=None, status: int | None = None, headers: dict | None = None,
                 content_type: str | None = None):
        self.body = body
        self.status = status
        self.headers = headers
        self.content_type = content_type  # Nova's webob answers without a body say text/html


_LONG_NUMBER = re.compile(rb"\d{19,}")


def loads(raw: bytes):
    """Parse a JSON body like Nova (stdlib json): integers of any size stay integers.

    orjson is much faster but reads integers beyond 64 bits as floats, which changes how
    str(value) looks to the extra-spec rules; such bodies take the stdlib path.
    """
    if _LONG_NUMBER.search(raw):
        try:
            return json.loads(raw, parse_constant=_not_json, parse_float=_finite)
        except RecursionError:  # nesting deeper than the stack: malformed, as orjson says beyond 1,024 levels
            raise ValueError("JSON nested too deeply") from None
    return orjson.loads(raw)


def _not_json(constant: str):
    # NaN and ±Infinity are not JSON: orjson refuses them, and so does this path.
    raise ValueError(f"{constant} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: orjson refuses a number that is infinite as a double
        raise ValueError(f"{text} is infinite as a double")
    return value


def dumps(body) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # integers beyond 64 bits (echoed back by extra-spec writes)
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _parse_query(freq: falcon.Request) -> dict[str, list[str]]:
    # Nova validates multi-valued query parameters as lists (webob's dict_of_lists).
    result: dict[str, list[str]] = {}
    qs = freq.query_string
    if not qs:
        return result
    from urllib.parse import parse_qsl

    for key, value in parse_qsl(qs, keep_blank_values=True):
        result.setdefault(key, []).append(value)
    return result


def _read_body(freq: falcon.Request) -> bytes:
    """The request body; a chunked one (no Content-Length) is read to its end.

    The server has taken the chunked framing off; the body-size limiter in front of the API has
    wrapped the input in a reader that stops past the limit with webob's 413, which reaches the
    client as Nova's (api/deploy.py lets it through).
    """
    env = freq.env
    if not env.get("CONTENT_LENGTH") and "chunked" in env.get("HTTP_TRANSFER_ENCODING", "").lower():
        return env["wsgi.input"].read()
    return freq.bounded_stream.read()


def _set_version_headers(resp: falcon.Response, version: Version) -> None:
    for name, value in microversion.response_headers(version):
        resp.append_header(name, value)


def _fail(resp: falcon.Response, status: int, message: str) -> None:
    resp.status = status
    resp.content_type = faults.ERROR_CONTENT_TYPE
    resp.data = faults.fault_body(status, message)


def _request_content_type(freq: falcon.Request) -> str | None:
    if "CONTENT_TYPE" not in freq.env:
        return None
    raw = freq.env["CONTENT_TYPE"]
    content_type = raw.split(";", 1)[0].strip().lower()
    if not content_type or content_type == "text/plain":
        return None
    if content_type not in SUPPORTED_CONTENT_TYPES:
        raise faults.UnsupportedMediaType("Unsupported Content-Type")
    return content_type


class Endpoint:
    """A Falcon resource for one URI template: HTTP method (or body action) → Operation."""

    def __init__(self, methods: dict[str, Any]):  # handlers (or, by body action, dicts of them) of @operation
        self.methods = {}
        for method, target in methods.items():
            if isinstance(target, dict):
                self.methods[method] = {name: f.operation for name, f in target.items()}
            else:
                self.methods[method] = target.operation
            setattr(self, "on_" + method.lower(), self._responder)

    def _responder(self, freq: falcon.Request, resp: falcon.Response, **params) -> None:
        if "" in params.values():  # /flavors/ is not /flavors/{id}: Nova's routes need a value
            raise falcon.HTTPRouteNotFound()
        env = freq.env
        if env.get("openkeel.legacy_v2"):
            version = microversion.LEGACY_V2
        else:
            try:
                version = microversion.version_from_headers(freq.headers)
            except microversion.InvalidVersionString as exc:
                _fail(resp, 400, str(exc))
                return
            except microversion.UnsupportedVersion as exc:
                _set_version_headers(resp, exc.requested)
                _fail(resp, 406, str(exc))
                return
            _set_version_headers(resp, version)
        try:
            self._run(freq, resp, version, params)
        except faults.Fault as fault:
            _fail(resp, fault.status, fault.message)

    def _run(self, freq, resp, version: Version, params: dict) -> None:
        method = freq.method
        _request_content_type(freq)
        raw = _read_body(freq) if method in ("POST", "PUT") else b""
        target = self.methods[method]
        if isinstance(target, dict):  # POST …/action: dispatch on the body's single key
            try:
                decoded = loads(raw)
            except ValueError:
                raise faults.BadRequest("Malformed request body") from None
            try:
                if len(decoded) != 1:
                    raise faults.BadRequest("Malformed request body")
                name = next(iter(decoded.keys()))
            except (AttributeError, TypeError):
                # JSON that is not an object (null, a number, "x", ["a"]): Nova finds no method.
                raise faults.NotFound("The resource could not be found.") from None
            op = target.get(name)
            if op is None:
                raise faults.BadRequest(f"There is no such action: {name}")
            body = decoded
        else:
            op = target
            body = None
            if raw:
                try:
                    body = loads(raw)
                except ValueError:
                    raise faults.BadRequest("Malformed request body") from None
        ctx = env_context = freq.env.get("openkeel.context")
        url_project = freq.env.get("openkeel.url_project_id")
        if url_project is not None and env_context is not None and url_project != env_context.project_id:
            raise faults.BadRequest(
                f"Malformed request URL: URL's project_id '{url_project}' doesn't match "
                f"Context's project_id '{env_context.project_id}'"
            )
        if not op.available(version):
            raise faults.NotFound("The resource could not be found.")
        req = Request(freq, ctx, version)
        req.query = _parse_query(freq)
        query_schema = op.schema_for(op.query, version)
        if query_schema is not None:
            validation.validate_query(query_schema, req.query)
        body_schema = op.schema_for(op.body, version)
        if body_schema is not None:
            body = validation.validate_body(body_schema, body, legacy_v2=req.legacy_v2)
        req.body = body
        stored_text.refuse_unstorable(params, req.query, body, ctx, writes=method not in ("GET", "HEAD"))
        try:
            result = op.func(req, **params)
        except faults.Fault as fault:
            if op.expected and fault.status not in op.expected and fault.status not in (403, 404):
                LOG.error("%s answered %s, which its contract does not expect", op.func.__qualname__,
                          fault.status)
            raise
        self._serialise(resp, op, result)

    @staticmethod
    def _serialise(resp: falcon.Response, op: Operation, result) -> None:
        status = op.success
        body = result
        content_type = SUCCESS_CONTENT_TYPE
        if isinstance(result, Response):
            content_type = result.content_type or content_type
            status = result.status or status
            body = result.body
            if result.headers:
                for name, value in result.headers.items():
                    resp.set_header(name, value)
        resp.status = status
        resp.content_type = content_type
        # bytes: a body the handler serialised already (a page it keeps, api/page_cache.py)
        resp.data = body if isinstance(body, bytes) else dumps(body) if body is not None else b""
