"""A seeded fuzzer over every route the router serves, every method and body action, microversions
and query parameters, with hostile path segments, query values, bodies, headers and encodings.

The routes come from ``api.router.ROUTES`` and each operation's own schemas (query parameters,
body properties), so routes and parameters added later are fuzzed without a change here. An answer
fails when its status is 500 or more (Nova's own 501 "not implemented" fault aside), or when a 4xx is not in Nova's format: a JSON fault
``{"<name>": {"code": <status>, "message": "..."}}`` (webob's own pages for the 401, 404, 405 and
413 that Nova answers outside its API router).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import random
import socket
from urllib.parse import quote

from openkeel_compute.api import router
from openkeel_compute.api.wsgi import Operation
from tests.reliability import world as w

VERSIONS = ["2.1", "2.19", "2.47", "2.55", "2.61", "2.75", "2.90", "2.96", "2.100", "2.102", "latest"]
# the owner and another project, and ids past the 255-character columns (a user of the owning
# project, a project of its own): their writes must be refused, not fail in the database
TOKENS = [w.ADMIN, w.OWNER, w.OTHER, w.ADMIN, w.OWNER, w.OTHER, "u" * 256 + ":demo", "demo:" + "p" * 256]

# Text that broke something once, or that the engines disagree on.
HOSTILE_TEXT = [
    "", "a\x00b", "\x00", "\n", "\r\n", " ", "x" * 256, "x" * 70000, "\u00e9", "\U0001f600", "\ud800",
    "%", "%00", "../..", "-1", "0", "2147483648", "-2147483649", "9223372036854775808", "1e400", "NaN",
    "Infinity", "true", "None", "null", "(.*.*)*X", "(?P<n>x)", "(?a)x", "x++", "(?>a)", "\\N{DIGIT ONE}",
    "\\u00e9", "(", "[", "(a)\\1", "(?=a)", "a{1000}{1000}", "\\", "'; DROP TABLE flavors; --",
]
HOSTILE_JSON = [
    None, True, False, 0, -1, 1.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 63, 10 ** 30, -(10 ** 30), 1e308,
    float("nan"), float("inf"), float("-inf"), [], {}, [None], {"": None}, {"a": {"b": {}}},
]
RAW_BODIES = [
    b"", b"{", b"null", b"[]", b"\"x\"", b"\xff\xfe", b"{\"a\": NaN}", b"{\"a\": Infinity}",
    b"[" * 5000 + b"1234567890123456789" + b"]" * 5000, b"{\"a\":" * 3000 + b"1" + b"}" * 3000,
    b"[" * 100000, b"{\"x\": \"\\ud800\"}", b"{\"x\": \"\\u0000\"}", b"\x00",
]
HEADERS = [
    {}, {"Content-Type": "text/plain"}, {"Content-Type": "application/xml"},
    {"Content-Type": "application/json; charset=latin-1"}, {"Content-Type": ""},
    {"OpenStack-API-Version": "compute 2.a"}, {"OpenStack-API-Version": "compute 9.9"},
    {"OpenStack-API-Version": "compute \x00"}, {"X-OpenStack-Nova-API-Version": "2.1000"},
    {"Accept": "application/xml"}, {"Accept-Language": "\x00;q=x"}, {"X-Auth-Token": "\x00:\x00"},
    {"X-Auth-Token": ":"}, {"X-Auth-Token": "a" * 5000},
]

_WEBOB_PAGES = {401, 404, 405, 413}


@dataclasses.dataclass
class Probe:
    method: str
    path: str
    query: str
    headers: dict
    body: bytes
    chunked: bool = False

    def describe(self) -> str:
        body = self.body[:120] + (b"..." if len(self.body) > 120 else b"")
        return f"{self.method} {self.path!r}?{self.query[:120]} headers={self.headers} body={body!r}"


@dataclasses.dataclass
class Report:
    requests: int = 0
    errors: list[tuple[Probe, int, bytes]] = dataclasses.field(default_factory=list)
    bad_faults: list[tuple[Probe, int, bytes]] = dataclasses.field(default_factory=list)
    statuses: dict[int, int] = dataclasses.field(default_factory=dict)
    http_refusals: int = 0  # over HTTP: requests the HTTP server itself refused (not valid HTTP, URL too long)

    def line(self, engine: str) -> str:
        refused = f" refused-by-http-server={self.http_refusals}" if self.http_refusals else ""
        return (f"fuzz[{engine}]: requests={self.requests} 5xx={len(self.errors)} "
                f"bad-faults={len(self.bad_faults)}{refused} statuses={dict(sorted(self.statuses.items()))}")


def is_nova_fault(status: int, headers, body: bytes) -> bool:
    """A 4xx in Nova's shape: its JSON fault, or webob's page where Nova answers outside its router."""
    content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
    if content_type.startswith("application/json"):
        try:
            decoded = json.loads(body)
        except ValueError:
            return False
        if not isinstance(decoded, dict) or len(decoded) != 1:
            return False
        fault = next(iter(decoded.values()))
        return (isinstance(fault, dict) and fault.get("code") == status and isinstance(fault.get("message"), str))
    return status in _WEBOB_PAGES and bool(content_type)


def _not_implemented(answer: w.Answer) -> bool:
    """Nova's 501 for what the cloud does not offer (changePassword, console output without a
    console): a contract answer in Nova's fault format, not a failure."""
    return answer.status == 501 and is_nova_fault(501, answer.headers, answer.body)


def operations() -> list[tuple[str, str, str | None, Operation]]:
    """(template, method, body action or None, operation) for every route the router serves."""
    found = []
    for template, methods in router.ROUTES.items():
        for method, target in methods.items():
            if isinstance(target, dict):
                found.extend((template, method, name, f.operation) for name, f in target.items())
            else:
                found.append((template, method, None, target.operation))
    return found


def _real_values() -> dict[str, list[str]]:
    return {
        "flavor_id": [w.FLAVOR, w.FLAVOR_PRIVATE], "key": [w.SPEC, w.META], "keypair_name": [w.KEYPAIR],
        "project_id": ["demo", "other"], "class_name": ["default"], "server_id": [w.SERVER, w.SERVER_OTHER],
        "tag": [w.TAG], "request_id": ["req-x"], "network_label": ["private"], "migration_id": ["1"],
        "id": ["v2.1", "v2.0"], "image_id": [w.IMAGE], "tenant_id": ["demo", "other"],
        "alias": ["os-volumes", "OS-EXT-VIF-NET"], "before_timestamp": ["2026-12-01 00:00:00"],
        "share_id": ["3fa85f64-5717-4562-b3fc-2c963f66afa6"],
    }


def _schemas(op: Operation, table) -> list:
    return [schema for _, _, schema in table] if table else []


def _sample_value(schema, rng: random.Random, depth: int = 0):
    """A plausible value for a JSON schema (the fuzzer then spoils one part of it)."""
    if not isinstance(schema, dict) or depth > 6:
        return "x"
    for combinator in ("oneOf", "anyOf"):
        if combinator in schema:
            return _sample_value(rng.choice(schema[combinator]), rng, depth + 1)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object":
        properties = schema.get("properties", {})
        required = list(schema.get("required", []))
        chosen = required + [k for k in properties if k not in required and rng.random() < 0.3]
        value = {k: _sample_value(properties.get(k, {}), rng, depth + 1) for k in chosen}
        if not properties and schema.get("patternProperties"):
            value = {"fz:k": "v"}
        return value
    if kind == "array":
        return [_sample_value(schema.get("items", {}), rng, depth + 1)]
    if kind == "integer":
        return rng.choice([0, 1, 512])
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if schema.get("format") == "uuid":
        return w.SERVER
    return rng.choice(["fz", "demo", "active", "HARD"])


def _spoil(value, rng: random.Random):
    """``value`` with one leaf (or itself) replaced by a hostile value."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        if rng.random() < 0.1:
            spoiled = dict(value)
            spoiled[rng.choice(HOSTILE_TEXT)] = spoiled.pop(key)
            return spoiled
        return {**value, key: _spoil(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        index = rng.randrange(len(value))
        return [*value[:index], _spoil(value[index], rng), *value[index + 1:]]
    return rng.choice(HOSTILE_JSON + HOSTILE_TEXT)


def _encode_query(params: list[tuple[str, str]]) -> str:
    def encode(text: str) -> str:
        return quote(text.encode("utf-8", "surrogatepass"), safe="")

    return "&".join(f"{encode(k)}={encode(v)}" for k, v in params)


def server_operations() -> list[tuple[str, str, str | None, Operation]]:
    """Every operation on servers: the collection, one server, its actions and its sub-resources."""
    return [op for op in operations() if op[0].startswith("/servers")]


def probes(rng: random.Random, count: int, ops=None, spoil: float = 0.85):
    """``count`` hostile requests over ``ops`` (every operation by default), drawn with ``rng``;
    ``spoil``: the share of schema-built bodies with one part made hostile (the others are valid,
    and reach the handler's own checks and writes)."""
    ops = ops or operations()
    real = _real_values()
    for i in range(count):
        template, method, action, op = ops[i % len(ops)] if i < len(ops) * 2 else rng.choice(ops)
        path = template
        for name, values in real.items():
            placeholder = "{" + name + "}"
            if placeholder in path:
                value = rng.choice(values) if rng.random() < 0.7 else rng.choice(HOSTILE_TEXT) or "x"
                path = path.replace(placeholder, value)
        prefix = rng.choice(["/v2.1", "/v2.1", "/v2.1", "/v2", "/v2.1/demo"])
        headers = {"X-Auth-Token": rng.choice(TOKENS),
                   "OpenStack-API-Version": f"compute {rng.choice(VERSIONS)}"}
        if rng.random() < 0.15:
            headers.update(rng.choice(HEADERS))
        params: list[tuple[str, str]] = []
        query_schemas = _schemas(op, op.query)
        if query_schemas and rng.random() < 0.8:
            names = list(rng.choice(query_schemas).get("properties", {}))
            for name in rng.sample(names, min(len(names), rng.randint(1, 3))):
                params.append((name, rng.choice(HOSTILE_TEXT) if rng.random() < 0.7 else "1"))
        if rng.random() < 0.1:
            params.append((rng.choice(["limit", "marker", "name", "minRam", "all_tenants"]), rng.choice(HOSTILE_TEXT)))
        query = _encode_query(params)
        if rng.random() < 0.05:
            query = rng.choice(["limit=%0A", "marker=%00", "%ff=%fe", "a=%", "&&=&", "limit=1&limit=%00"])
        body = b""
        if method in ("POST", "PUT"):
            body_schemas = _schemas(op, op.body)
            if rng.random() < 0.15:
                body = rng.choice(RAW_BODIES)
            else:
                sample = _sample_value(rng.choice(body_schemas), rng) if body_schemas else {}
                if action is not None and not isinstance(sample, dict) or (action and action not in sample):
                    sample = {action: sample}
                body = json.dumps(_spoil(sample, rng) if rng.random() < spoil else sample).encode()
            headers.setdefault("Content-Type", "application/json")
        yield Probe(method, prefix + path, query, headers, body, chunked=bool(body) and rng.random() < 0.1)


_PATH_SAFE = "/:@!$&'()*+,;=-._~"
# What may stand in a request line's query as it is (the fuzzer's own %-escapes stay as they are).
_QUERY_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "#")


# The request line granian reads at most; a longer one is its own 414, before any application.
_HTTP_LINE_LIMIT = 8192
_HTTP_SERVER_REFUSALS = {400, 414, 431}


def _http_server_refusal(probe: Probe, answer: w.Answer) -> bool:
    """An answer of the HTTP server itself to a request that is not one it takes: a header value
    with a control character (NUL, CR, LF) or a request line beyond its limit. The application
    never saw it (no request id), so Nova's fault format cannot apply; Nova behind any HTTP server
    gets that server's refusal too."""
    if answer.status not in _HTTP_SERVER_REFUSALS:
        return False
    if any(k.lower() in ("x-openstack-request-id", "x-compute-request-id") for k, _ in answer.headers):
        return False
    bad_header = any(any(ord(c) < 0x20 and c != "\t" for c in value) for value in probe.headers.values())
    target = quote(probe.path.encode("utf-8", "surrogatepass"), safe=_PATH_SAFE) + "?" + probe.query
    return bad_header or len(target) > _HTTP_LINE_LIMIT


def http_call(base: tuple[str, int], method: str, path: str, *, query: str = "", headers: dict | None = None,
              body: bytes = b"", chunked: bool = False, timeout: float = 120.0) -> w.Answer:
    """The probe as one HTTP/1.1 request on its own connection to a real server at ``base`` (host, port).

    The decoded path goes out %-encoded (UTF-8, lone surrogates as they are), so the server hands
    the application the same path ``w.call`` does; the query goes out as the fuzzer built it.
    Header values go out as UTF-8 bytes, hostile ones included: what the HTTP server does with them
    is part of the answer.
    """
    target = quote(path.encode("utf-8", "surrogatepass"), safe=_PATH_SAFE)
    if query:
        target += "?" + quote(query.encode("utf-8", "surrogatepass"), safe=_QUERY_SAFE)
    lines = [f"{method} {target} HTTP/1.1".encode("latin-1"), f"Host: {base[0]}:{base[1]}".encode("latin-1"),
             b"Connection: close"]
    for name, value in (headers or {}).items():
        lines.append(name.encode("latin-1") + b": " + value.encode("utf-8", "surrogatepass"))
    if chunked:
        lines.append(b"Transfer-Encoding: chunked")
        half = len(body) // 2
        payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:]) if part)
        payload += b"0\r\n\r\n"
    else:
        if body or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body)}".encode("latin-1"))
        payload = body
    with socket.create_connection(base, timeout=timeout) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + payload)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        content = response.read()
        return w.Answer(response.status, list(response.getheaders()), content)


def run(app, *, seed: int, count: int, restock=None, restock_every: int = 300, server=None, ops=None,
        spoil: float = 0.85) -> Report:
    """Send ``count`` probes (over ``ops``, every operation by default); every answer is checked.

    ``server`` (host, port): send them over HTTP to a server (e.g. ``openkeel-compute serve`` with
    several workers) instead of calling ``app`` in this process.
    """
    rng = random.Random(seed)
    report = Report()
    for n, probe in enumerate(probes(rng, count, ops, spoil)):
        if restock is not None and n and n % restock_every == 0:
            restock()
        if server is not None:
            answer = http_call(server, probe.method, probe.path, query=probe.query, headers=probe.headers,
                               body=probe.body, chunked=probe.chunked)
        else:
            answer = w.call(app, probe.method, probe.path, query=probe.query, headers=probe.headers,
                            body=probe.body, chunked=probe.chunked)
        report.requests += 1
        report.statuses[answer.status] = report.statuses.get(answer.status, 0) + 1
        if server is not None and _http_server_refusal(probe, answer):
            report.http_refusals += 1
        elif answer.status >= 500 and not _not_implemented(answer):
            report.errors.append((probe, answer.status, answer.body[:300]))
        elif answer.status >= 400 and not is_nova_fault(answer.status, answer.headers, answer.body):
            report.bad_faults.append((probe, answer.status, answer.body[:300]))
    return report
