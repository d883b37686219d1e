#!/usr/bin/env python3
"""Differential check of the whole flavor API: the Nova 34.0.0 oracle against OpenKeel.

Generates a seeded sequence of requests over the 13 flavor route+verb pairs (list, detail,
show, create, update, delete, access list, the access action, extra-specs list/create/show/
update/delete), with valid and invalid bodies, queries, flavor ids, extra-spec keys and values,
microversions 2.1..2.104 (plus none, legacy, ``latest``, malformed and out-of-range headers),
admin, member and anonymous callers. The sequence is fixed by the seed alone (never by what a
server answered), so both servers, each started fresh, see exactly the same requests in the same
order. A response pair is identical when status, ``OpenStack-API-Version``,
``X-OpenStack-Nova-API-Version``, the ``Vary`` lines, the content type and the body agree, after
normalising UUIDs (generated flavor ids, request ids) and the host:port in links. A list answer
whose only difference is where flavors with server-generated (random) ids sort counts as
identical, and the result line says how many there were. Answers that differ where
docs/differential.md documents a deliberate difference count as "explained", each with its
reason: a NUL or an invalid Unicode character in the URL, the query string, the body or the token
is a 400 in OpenKeel on every engine and before the policy (Nova: 404, 403 or 500 by route and
database).

    .venv/bin/python tools/flavor_api_differential.py                 # starts both, 2,000 requests
    .venv/bin/python tools/flavor_api_differential.py --count 5000 --seed 7
    .venv/bin/python tools/flavor_api_differential.py --oracle http://127.0.0.1:18776 \\
        --openkeel http://127.0.0.1:8774                              # servers you started (fresh!)

Without --oracle it runs ``../shared/nova-oracle/run-oracle.sh start PORT`` (--oracle-port,
default 18776) and stops it at the end; without --openkeel it starts ``openkeel-compute serve``
on a temp SQLite state dir (noauth2) and stops it. Prints the result line, then each mismatch
(``--max-print`` caps the detail; ``--json FILE`` writes all of them). Not part of the test suite.
Exit status 0 only when every response pair is identical or explained.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("OPENKEEL_SHARED", ROOT.parent / "shared"))

# ---------------------------------------------------------------- generation

BOUNDARY_VERSIONS = ["2.1", "2.6", "2.7", "2.46", "2.47", "2.54", "2.55", "2.60", "2.61", "2.74", "2.75",
                     "2.85", "2.86", "2.101", "2.102", "2.103", "2.104"]
ODD_VERSION_HEADERS = [
    {},  # no header: 2.1
    {"OpenStack-API-Version": "compute latest"},
    {"X-OpenStack-Nova-API-Version": "2.61"},
    {"X-OpenStack-Nova-API-Version": "2.102"},
    {"OpenStack-API-Version": "compute 2.75", "X-OpenStack-Nova-API-Version": "2.1"},
    {"OpenStack-API-Version": "compute 2.105"},
    {"OpenStack-API-Version": "compute 3.0"},
    {"OpenStack-API-Version": "compute 2.0"},
    {"OpenStack-API-Version": "compute 2.a"},
    {"OpenStack-API-Version": "volume 3.50"},
    {"OpenStack-API-Version": "compute 2.86, volume 3.50"},
]
TOKENS = [("admin:admin", 55), ("admin:demo", 5), ("demo:demo", 15), ("other:other", 10), ("demo", 5),
          (None, 3), ("reader:demo", 7)]
PROJECTS = ["demo", "other", "admin", "third-project"]

SPEC_KEYS: dict[str, list] = {
    "hw:cpu_policy": ["dedicated", "shared", "mixed", "bogus", ""],
    "hw:mem_page_size": ["large", "small", "any", "2048", "2MB", "bogus"],
    "hw:numa_nodes": ["1", "2", 2, "0", "x", 1.5],
    "hw:cpu_realtime_mask": ["^0-1", "x"],
    "hw:cpu_max_sockets": ["2", -1, "many"],
    "quota:cpu_shares": [100, "100", "-1", "abc"],
    "quota:disk_read_bytes_sec": ["1000", "x"],
    "resources:VCPU": ["1", "0", "x"],
    "resources1:CUSTOM_GPU": ["1", "2"],
    "resources:NOT_A_CLASS": ["1"],
    "trait:HW_CPU_X86_AVX": ["required", "forbidden", "bogus"],
    "trait1:CUSTOM_FOO": ["required"],
    "hw_rng:allowed": ["true", "True", True, "maybe"],
    "hw:boot_menu": ["yes", "no", "maybe"],
    "aggregate_instance_extra_specs:zone": ["east", ""],
    "capabilities:hypervisor_type": ["QEMU"],
    "hw:no_such_thing": ["1"],
    "openkeel:thing": ["anything", 7],
    "powervm:proc_units": ["1"],
    "plain": ["value", ""],
    "with space": ["v"],
    "a.b-c_d": ["v"],
}
BAD_SPEC_KEYS = ["bad/key", "", "k" * 256, "ключ", "a?b"]
ODD_SPEC_VALUES = [None, True, False, [], {}, "v" * 255, "v" * 256, 1e300, -0.0, 12345678901234567890]

NAME_VARIANTS = [" lead", "trail ", "", "n" * 255, "n" * 256, "ñandú", "emoji 😀", "tab\tname", "a  b",
                 "new\nline", "x", "日本語", "\u200b", 5, None]
ID_VARIANTS = [42, 7.5, None, "with space", " lead", "trail ", "bad/slash", "i" * 255, "i" * 256, "", True,
               "dots.and-dash_es", "ünï", -1, "0"]
INT_VARIANTS = [0, -1, 1, "512", "abc", 1.5, "1.5", 2147483647, 2147483648, True, None, "", " 1", "0x10", [1]]
RXTX_VARIANTS = [1.0, 0, -1, "2.5", "abc", 3.5e38, 3.4e38, True, 1, "1", "1.", ".5", None]
PUBLIC_VARIANTS = [True, False, "false", "True", "yes", "no", "maybe", 1, 0, None, "on", "OFF", "t"]
DESC_VARIANTS = ["a flavor", None, "", "line\nbreak", "tab\there", "ñandú", "d" * 65535, "d" * 65536, 5,
                 "emoji 😀", "   spaced   "]
NAME_REGEXES = ["f-1", "^f", "2$", "[0-9]{2}", "vor", "ñ", ".*", "F-1"]
SORT_KEYS = ["created_at", "description", "disabled", "ephemeral_gb", "flavorid", "id", "is_public",
             "memory_mb", "name", "root_gb", "rxtx_factor", "swap", "updated_at", "vcpu_weight", "vcpus",
             "bogus", "ram"]
NOID_RE = re.compile(r"\{noid-(\d+)\}")
WEIRD_PATH_IDS = ["nope", "%20x", "caf%C3%A9", "i" * 300, "..", "a%2Fb", "-1", "0", "%00", "x%20y"]


@dataclasses.dataclass
class Request:
    kind: str
    method: str
    path: str  # after /v2.1, already percent-encoded, may carry ?query
    headers: dict
    body: bytes | None = None
    noid: int | None = None  # an id-less create: its generated id is "{noid-N}" in later paths
    root: str = "/v2.1"  # or the legacy "/v2", or "/v2.1/<project id>"

    def render(self, ids: dict[int, str]) -> str:
        """The path for one server: "{noid-N}" becomes the id that server generated (if any)."""
        return NOID_RE.sub(lambda m: urllib.parse.quote(ids.get(int(m.group(1)), f"noid-{m.group(1)}"),
                                                        safe=""), self.path)

    def describe(self) -> str:
        hdrs = {k: v for k, v in self.headers.items() if k != "Content-Type"}
        body = "" if self.body is None else " " + self.body.decode("utf-8", "replace")[:300]
        root = "" if self.root == "/v2.1" else self.root
        return f"{self.method} {root}{self.path} {hdrs}{body}"


class Generator:
    """The request sequence; its state (ids created, keys set) follows the requests, not the answers."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.n = 0
        self.ids: list[str] = []  # flavor ids a create in the sequence may have made
        self.deleted: list[str] = []
        self.names: list[str] = []
        self.keys: list[str] = list(SPEC_KEYS)
        self.noids = 0
        self.pending: list[Request] = []

    # -- small pieces
    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def version_headers(self) -> dict:
        r = self.rng.random()
        if r < 0.08:
            return dict(self.pick(ODD_VERSION_HEADERS))
        if r < 0.55:
            version = self.pick(BOUNDARY_VERSIONS)
        else:
            version = f"2.{self.rng.randint(1, 104)}"
        return {"OpenStack-API-Version": f"compute {version}"}

    def token_headers(self) -> dict:
        total = sum(w for _, w in TOKENS)
        r = self.rng.uniform(0, total)
        for token, weight in TOKENS:
            r -= weight
            if r <= 0:
                break
        if token is None:
            return {}
        if token == "reader:demo":
            return {"X-Auth-Token": "reader:demo"}
        return {"X-Auth-Token": token}

    def headers(self, admin_bias: float = 0.0) -> dict:
        headers = self.version_headers()
        if self.chance(admin_bias):
            headers["X-Auth-Token"] = "admin:admin"
        else:
            headers.update(self.token_headers())
        return headers

    def flavor_id(self) -> str:
        r = self.rng.random()
        if self.ids and r < 0.78:
            return urllib.parse.quote(self.pick(self.ids), safe="")
        if self.deleted and r < 0.86:
            return urllib.parse.quote(self.pick(self.deleted), safe="")
        return self.pick(WEIRD_PATH_IDS)

    def spec_key(self) -> str:
        if self.chance(0.08):
            return self.pick(BAD_SPEC_KEYS)
        return self.pick(self.keys)

    def spec_value(self, key: str):
        if self.chance(0.1):
            return self.pick(ODD_SPEC_VALUES)
        return self.pick(SPEC_KEYS.get(key, ["v"]))

    @staticmethod
    def json_body(obj) -> bytes:
        return json.dumps(obj, ensure_ascii=False).encode()

    def raw_body(self, obj) -> tuple[bytes, dict]:
        """Mostly JSON; sometimes broken, empty or sent as text/plain."""
        r = self.rng.random()
        if r < 0.02:
            return b"{not json", {"Content-Type": "application/json"}
        if r < 0.03:
            return b"", {"Content-Type": "application/json"}
        if r < 0.05:
            return self.json_body(obj), {"Content-Type": "text/plain"}
        return self.json_body(obj), {"Content-Type": "application/json"}

    # -- requests per route
    def list_query(self) -> str:
        params: list[tuple[str, str]] = []
        for _ in range(self.rng.choice([0, 0, 1, 1, 2, 3])):
            name = self.pick(["is_public", "minRam", "minDisk", "limit", "marker", "sort_key", "sort_dir",
                              "name", "foo", "limit"])
            if name == "is_public":
                value = self.pick(["true", "false", "none", "None", "maybe", "1", "", "NO"])
            elif name in ("minRam", "minDisk"):
                value = self.pick(["0", "512", "1024", "abc", "-1", "", "1.5"])
            elif name == "limit":
                value = self.pick(["0", "1", "2", "3", "-1", "abc", "", "1000", "1001"])
            elif name == "marker":
                value = self.pick(self.ids) if self.ids and self.chance(0.8) else "nope"
            elif name == "sort_key":
                value = self.pick(SORT_KEYS)
            elif name == "sort_dir":
                value = self.pick(["asc", "desc", "ASC", "bogus"])
            elif name == "name":
                value = self.pick(NAME_REGEXES)
            else:
                value = "bar"
            params.append((name, value))
        return ("?" + urllib.parse.urlencode(params)) if params else ""

    def page_query(self) -> str:
        """Paging with any sort key: the marker has to be found and compared per key."""
        params = [("sort_key", self.pick(SORT_KEYS[:15])), ("limit", self.pick(["1", "2", "3"]))]
        if self.chance(0.7):
            params.append(("sort_dir", self.pick(["asc", "desc"])))
        if self.ids and self.chance(0.9):
            params.append(("marker", self.pick(self.ids)))
        if self.chance(0.2):
            params.append(("is_public", self.pick(["none", "false"])))
        self.rng.shuffle(params)
        return "?" + urllib.parse.urlencode(params)

    def show_query(self) -> str:
        return self.pick(["", "", "", "", "?foo=bar", "?is_public=none"])

    def create_body(self) -> tuple[dict | list | str | None, str | None]:
        self.n += 1
        fid = f"f-{self.n}"
        name = f"flavor-{self.n}"
        flavor: dict = {"name": name, "ram": self.pick([512, 1024, 2048, "256"]),
                        "vcpus": self.pick([1, 2, 4]), "disk": self.pick([0, 1, 10, 20])}
        if self.chance(0.9):
            flavor["id"] = fid
        if self.chance(0.4):
            flavor["os-flavor-access:is_public"] = self.pick([False, False, True, "false"])
        if self.chance(0.2):
            flavor["OS-FLV-EXT-DATA:ephemeral"] = self.pick([0, 1, 5])
        if self.chance(0.2):
            flavor["swap"] = self.pick([0, 512, "128"])
        if self.chance(0.15):
            flavor["rxtx_factor"] = self.pick([1.0, 2.5, "1.5"])
        if self.chance(0.3):
            flavor["description"] = self.pick(["a flavor", None, "ñandú"])
        created_id = flavor.get("id")
        for _ in range(self.rng.choice([0, 0, 0, 1, 1, 2])):
            what = self.rng.randrange(9)
            if what == 0:
                flavor.pop(self.pick(["name", "ram", "vcpus", "disk"]), None)
            elif what == 1:
                flavor["name"] = self.pick(NAME_VARIANTS + (self.names[-3:] if self.names else []))
            elif what == 2:
                flavor["id"] = self.pick(ID_VARIANTS + (self.ids[-3:] if self.ids else []))
                created_id = str(flavor["id"]) if isinstance(flavor["id"], (str, int)) else None
            elif what == 3:
                flavor[self.pick(["ram", "vcpus", "disk", "swap", "OS-FLV-EXT-DATA:ephemeral"])] = \
                    self.pick(INT_VARIANTS)
            elif what == 4:
                flavor["rxtx_factor"] = self.pick(RXTX_VARIANTS)
            elif what == 5:
                flavor["os-flavor-access:is_public"] = self.pick(PUBLIC_VARIANTS)
            elif what == 6:
                flavor["description"] = self.pick(DESC_VARIANTS)
            elif what == 7:
                flavor[self.pick(["foo", "extra_specs", "OS-FLV-DISABLED:disabled", "links"])] = 1
            else:
                r = self.rng.randrange(5)
                if r == 0:
                    return self.pick([[], "flavor", None, 5]), None
                if r == 1:
                    return {"flavor": self.pick([[], "x", None])}, None
                if r == 2:
                    return {"flavour": flavor}, None
                if r == 3:
                    return {"flavor": flavor, "extra": 1}, None
                return {}, None
        if isinstance(flavor.get("name"), str):
            self.names.append(flavor["name"])
        return {"flavor": flavor}, created_id

    def rooted(self, req: Request) -> Request:
        """Now and then the legacy /v2 endpoint (no microversion), or a /v2.1/{project_id}/ prefix
        that matches the token's project, does not, or is not hex."""
        r = self.rng.random()
        if r < 0.05:
            req.root = "/v2"
            req.headers.pop("OpenStack-API-Version", None)
            req.headers.pop("X-OpenStack-Nova-API-Version", None)
        elif r < 0.10:
            req.headers["X-Auth-Token"] = self.pick(["hexuser:0123abcd", "admin:0123abcd"])
            req.root = "/v2.1/" + self.pick(["0123abcd", "0123abcd", "4567ef", "not-hex"])
        return req

    def next(self) -> Request:
        if self.pending:
            return self.pending.pop(0)
        # Early on, mostly creates so that the other routes have flavors to work on.
        weights = {
            "list": 8, "detail": 8, "show": 10, "create": 14 if len(self.ids) > 15 else 40, "update": 6,
            "delete": 3, "access_list": 6, "access_action": 10, "specs_list": 6, "specs_create": 10,
            "specs_show": 6, "specs_update": 7, "specs_delete": 5,
        }
        kinds = list(weights)
        kind = self.rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        req = getattr(self, "_" + kind)()
        if kind not in ("list", "detail") and req.root == "/v2.1" and self.chance(0.5):
            req = self.rooted(req)
        return req

    def _list(self):
        query = self.page_query() if self.chance(0.3) else self.list_query()
        return self.rooted(Request("GET /flavors", "GET", "/flavors" + query, self.headers()))

    def _detail(self):
        query = self.page_query() if self.chance(0.3) else self.list_query()
        return self.rooted(Request("GET /flavors/detail", "GET", "/flavors/detail" + query, self.headers()))

    def _show(self):
        return Request("GET /flavors/{id}", "GET", f"/flavors/{self.flavor_id()}" + self.show_query(),
                       self.headers())

    def _create(self):
        obj, created_id = self.create_body()
        body, ctype = self.raw_body(obj)
        headers = self.headers(admin_bias=0.6)
        headers.update(ctype)
        if created_id and created_id not in self.ids:
            self.ids.append(created_id)
        req = Request("POST /flavors", "POST", "/flavors", headers, body)
        flavor = obj.get("flavor") if isinstance(obj, dict) else None
        if isinstance(flavor, dict) and flavor.get("id") is None:
            # Nova and OpenKeel each generate a random UUID: both are normalised in bodies, but
            # they would sort differently in lists. So an id-less flavor lives for a few requests
            # only, addressed per server by the id it generated, and is then deleted.
            self.noids += 1
            req.noid = self.noids
            path = f"/flavors/{{noid-{self.noids}}}"
            admin = {"X-Auth-Token": "admin:admin"}
            self.pending = [
                Request("GET /flavors/{id}", "GET", path, {**self.version_headers(), **admin}),
                Request("POST /flavors/{id}/os-extra_specs", "POST", path + "/os-extra_specs",
                        {**self.version_headers(), **admin, "Content-Type": "application/json"},
                        self.json_body({"extra_specs": {"hw:cpu_policy": "dedicated"}})),
                Request("GET /flavors/{id}/os-extra_specs", "GET", path + "/os-extra_specs",
                        {**self.version_headers(), **admin}),
                Request("DELETE /flavors/{id}", "DELETE", path, {**self.version_headers(), **admin}),
            ]
        return req

    def _update(self):
        r = self.rng.randrange(8)
        if r < 5:
            obj = {"flavor": {"description": self.pick(DESC_VARIANTS)}}
        elif r == 5:
            obj = {"flavor": {"name": "renamed"}}
        elif r == 6:
            obj = {"flavor": {"description": "d", "name": "x"}}
        else:
            obj = self.pick([{}, {"flavor": {}}, [], {"flavor": None}])
        body, ctype = self.raw_body(obj)
        headers = self.headers(admin_bias=0.5)
        headers.update(ctype)
        return Request("PUT /flavors/{id}", "PUT", f"/flavors/{self.flavor_id()}", headers, body)

    def _delete(self):
        headers = self.headers(admin_bias=0.4)
        fid = self.flavor_id()
        raw = urllib.parse.unquote(fid)
        if raw in self.ids and self.chance(0.5):
            # keep a few flavors alive: deleting is rarer than creating
            self.ids.remove(raw)
            self.deleted.append(raw)
        return Request("DELETE /flavors/{id}", "DELETE", f"/flavors/{fid}", headers)

    def _access_list(self):
        return Request("GET /flavors/{id}/os-flavor-access", "GET",
                       f"/flavors/{self.flavor_id()}/os-flavor-access" + self.show_query(), self.headers())

    def _access_action(self):
        action = self.pick(["addTenantAccess", "addTenantAccess", "removeTenantAccess"])
        r = self.rng.randrange(12)
        if r < 8:
            obj = {action: {"tenant": self.pick(PROJECTS)}}
        elif r == 8:
            obj = {action: {"tenant": self.pick(["", "t" * 255, "t" * 256, 5, None, "ünï", " sp"])}}
        elif r == 9:
            obj = self.pick([{action: {}}, {action: "demo"}, {action: {"tenant": "demo", "x": 1}},
                             {"addTenantAccess": {"tenant": "demo"}, "removeTenantAccess": {"tenant": "demo"}}])
        elif r == 10:
            obj = self.pick([{"foo": {"tenant": "demo"}}, {}, [], None])
        else:
            obj = {action: {"tenant": "demo"}, "extra": True}
        body, ctype = self.raw_body(obj)
        headers = self.headers(admin_bias=0.6)
        headers.update(ctype)
        return Request("POST /flavors/{id}/action", "POST", f"/flavors/{self.flavor_id()}/action", headers, body)

    def _specs_list(self):
        return Request("GET /flavors/{id}/os-extra_specs", "GET",
                       f"/flavors/{self.flavor_id()}/os-extra_specs" + self.show_query(), self.headers())

    def _specs_create(self):
        r = self.rng.randrange(10)
        if r < 8:
            specs = {}
            for _ in range(self.rng.choice([1, 1, 2, 3])):
                key = self.spec_key()
                specs[key] = self.spec_value(key)
            obj = {"extra_specs": specs}
        elif r == 8:
            obj = self.pick([{"extra_specs": {}}, {"extra_specs": []}, {"extra_specs": "x"}, {}])
        else:
            obj = self.pick([{"extra_specs": {"hw:cpu_policy": "dedicated"}, "x": 1}, [], {"specs": {}}])
        body, ctype = self.raw_body(obj)
        headers = self.headers(admin_bias=0.6)
        headers.update(ctype)
        return Request("POST /flavors/{id}/os-extra_specs", "POST",
                       f"/flavors/{self.flavor_id()}/os-extra_specs", headers, body)

    def _key_path(self, key: str) -> str:
        return urllib.parse.quote(key, safe=":") if key else ""

    def _specs_show(self):
        key = self.spec_key()
        return Request("GET /flavors/{id}/os-extra_specs/{key}", "GET",
                       f"/flavors/{self.flavor_id()}/os-extra_specs/{self._key_path(key)}" + self.show_query(),
                       self.headers())

    def _specs_update(self):
        key = self.spec_key()
        r = self.rng.randrange(10)
        if r < 7:
            obj = {key: self.spec_value(key)}
        elif r == 7:
            other = self.spec_key()
            obj = {other: self.spec_value(other)}
        elif r == 8:
            obj = {key: self.spec_value(key), "another": "v"}
        else:
            obj = self.pick([{}, [], {"extra_specs": {key: "v"}}, "v"])
        body, ctype = self.raw_body(obj)
        headers = self.headers(admin_bias=0.6)
        headers.update(ctype)
        return Request("PUT /flavors/{id}/os-extra_specs/{key}", "PUT",
                       f"/flavors/{self.flavor_id()}/os-extra_specs/{self._key_path(key)}", headers, body)

    def _specs_delete(self):
        key = self.spec_key()
        return Request("DELETE /flavors/{id}/os-extra_specs/{key}", "DELETE",
                       f"/flavors/{self.flavor_id()}/os-extra_specs/{self._key_path(key)}",
                       self.headers(admin_bias=0.5))


# ---------------------------------------------------------------- sending and comparing

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HOST_RE = re.compile(r"https?://127\.0\.0\.1:\d+")
COMPARED_HEADERS = ("openstack-api-version", "x-openstack-nova-api-version", "vary", "content-type")


@dataclasses.dataclass
class Answer:
    status: int
    headers: dict  # lower-case name -> list of values
    body: object

    def view(self) -> dict:
        return {"status": self.status, **{h: self.headers.get(h) for h in COMPARED_HEADERS}, "body": self.body}


def normalise(value):
    if isinstance(value, str):
        return UUID_RE.sub("<uuid>", HOST_RE.sub("<host>", value))
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, dict):
        return {normalise(k): normalise(v) for k, v in value.items()}
    return value


def send(base: str, req: Request, ids: dict[int, str], timeout: float = 60) -> Answer:
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        headers = dict(req.headers)
        if req.body is not None:
            headers["Content-Length"] = str(len(req.body))
        conn.request(req.method, req.root + req.render(ids), body=req.body, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        hdrs: dict[str, list[str]] = {}
        for name, value in resp.getheaders():
            hdrs.setdefault(name.lower(), []).append(value)
    finally:
        conn.close()
    # one Vary header holding both names equals two Vary lines of one name each
    if "vary" in hdrs:
        hdrs["vary"] = [v.strip() for line in hdrs["vary"] for v in line.split(",")]
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text) if text else None
    except ValueError:
        body = text
    answer = Answer(resp.status, hdrs, normalise(body))
    if req.noid is not None and resp.status == 200 and isinstance(body, dict):
        ids[req.noid] = body["flavor"]["id"]
    return answer


def differences(oracle: Answer, ours: Answer) -> dict:
    want, got = oracle.view(), ours.view()
    return {k: (want[k], got[k]) for k in want if want[k] != got[k]}


UNSTORABLE_MESSAGE = re.compile(r"Invalid input received: (the URL|the query string|the request body|the token's user "
                                r"or project) contains a NUL character or an invalid Unicode character\.")
UNSTORABLE_REASON = ("a NUL or an invalid Unicode character in {place}: OpenKeel answers 400 on every engine "
                     "(Nova: 404 or 403 by route on SQLite, 500 on PostgreSQL); docs/differential.md, hostile input")


def _unstorable(text: str) -> bool:
    return "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text) or "\ufffd" in text


def _carries_unstorable(req: Request, place: str, ids: dict[int, str]) -> bool:
    """Whether ``req`` really carries a NUL or text that is not Unicode in ``place``."""
    path, _, query = req.render(ids).partition("?")
    if place == "the URL":
        return _unstorable(urllib.parse.unquote(path, errors="replace"))
    if place == "the query string":
        return _unstorable(urllib.parse.unquote(query, errors="replace"))
    if place == "the request body":
        text = (req.body or b"").decode("utf-8", "replace")
        return _unstorable(text) or "\\u0000" in text.lower() or re.search(r"\\ud[89a-f]", text.lower()) is not None
    token = req.headers.get("X-Auth-Token", "")
    return _unstorable(token)


def explain(req: Request, oracle: Answer, ours: Answer, ids: dict[int, str]) -> str | None:
    """The reason a difference is one docs/differential.md documents, or None.

    Text no database can hold or compare alike (a NUL, a lone surrogate) is a 400 in OpenKeel
    whatever the route, checked before the policy; Nova answers by route and database (a 404 on
    SQLite for an id, a 403 to a caller without the right, a 500 on PostgreSQL).
    """
    body = ours.body
    if ours.status != 400 or oracle.status == 400 or not isinstance(body, dict) or set(body) != {"badRequest"}:
        return None
    match = UNSTORABLE_MESSAGE.fullmatch(str((body["badRequest"] or {}).get("message", "")))
    if match is None or not _carries_unstorable(req, match.group(1), ids):
        return None
    return UNSTORABLE_REASON.format(place=match.group(1))


def _generated_id_order_only(diff: dict) -> bool:
    """Two lists that differ only in where flavors with server-generated (random) ids sort.

    A flavor created without an id gets a random UUID on each server, and lists sort by flavor id:
    such entries (normalised to "<uuid>") can land at different places, and a page's next link,
    which names the page's last flavor, with them. Everything else, the other entries' order
    included, must match.
    """
    if set(diff) != {"body"}:
        return False
    want, got = diff["body"]
    if not (isinstance(want, dict) and isinstance(got, dict) and want.keys() == got.keys()
            and isinstance(want.get("flavors"), list) and isinstance(got.get("flavors"), list)):
        return False

    def rest(body):
        # a page's next link names its last flavor, so it moves with a generated id too
        last = body["flavors"][-1].get("id") if body["flavors"] and isinstance(body["flavors"][-1], dict) else None
        return json.dumps({k: v for k, v in body.items() if k != "flavors"}, sort_keys=True).replace(
            f"marker={last}", "marker=<last>")

    if rest(want) != rest(got):
        return False

    def split(flavors):
        generated = [f for f in flavors if isinstance(f, dict) and f.get("id") == "<uuid>"]
        others = [f for f in flavors if not (isinstance(f, dict) and f.get("id") == "<uuid>")]
        return sorted(json.dumps(f, sort_keys=True) for f in generated), others

    return split(want["flavors"]) == split(got["flavors"])


# ---------------------------------------------------------------- servers

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(url: str, proc: subprocess.Popen | None, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"server for {url} exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", urllib.parse.urlsplit(url).port, timeout=3)
            conn.request("GET", "/v2.1/", headers={"X-Auth-Token": "admin:admin"})
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {seconds} s")


class OpenKeelServer:
    def __init__(self, port: int | None = None):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="okc-differential-"))
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        conf = self.dir / "openkeel-compute.conf"
        conf.write_text(f"[DEFAULT]\nstate_path = {self.dir}\n[api]\nauth_strategy = noauth2\n"
                        f"[database]\nconnection = sqlite:///{self.dir}/x.sqlite\n")
        exe = str(pathlib.Path(sys.executable).parent / "openkeel-compute")
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        subprocess.run([exe, "db", "sync", "--config-file", str(conf)], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = (self.dir / "serve.log").open("wb")
        self.proc = subprocess.Popen([exe, "serve", "--config-file", str(conf), "--host", "127.0.0.1",
                                      "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        _wait(self.url, self.proc, 120)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)


class OracleServer:
    def __init__(self, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.script = SHARED / "nova-oracle" / "run-oracle.sh"

    def start(self) -> None:
        subprocess.run([str(self.script), "stop", str(self.port)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run([str(self.script), "start", str(self.port)], check=True, stdout=subprocess.DEVNULL)
        _wait(self.url, None, 180)

    def stop(self) -> None:
        subprocess.run([str(self.script), "stop", str(self.port)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---------------------------------------------------------------- main

def _short(value, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def run(oracle_url: str, openkeel_url: str, count: int, seed: int, max_print: int, json_path: str | None,
        quiet: bool) -> int:
    gen = Generator(seed)
    requests = [gen.next() for _ in range(count)]
    kinds = sorted({r.kind for r in requests})
    identical = 0
    reordered = 0
    mismatches = []
    explained = []
    per_kind: dict[str, list[int]] = {}
    oracle_ids: dict[int, str] = {}
    our_ids: dict[int, str] = {}
    started = time.monotonic()
    for i, req in enumerate(requests):
        want = send(oracle_url, req, oracle_ids)
        got = send(openkeel_url, req, our_ids)
        diff = differences(want, got)
        stats = per_kind.setdefault(req.kind, [0, 0, 0])
        stats[0] += 1
        if diff and _generated_id_order_only(diff):
            reordered += 1
            diff = {}
        reason = explain(req, want, got, our_ids) if diff else None
        if reason is not None:
            stats[2] += 1
            explained.append({"index": i, "kind": req.kind, "request": req.describe(), "reason": reason})
        elif diff:
            mismatches.append({"index": i, "kind": req.kind, "request": req.describe(), "diff": diff})
        else:
            identical += 1
            stats[1] += 1
        if not quiet and (i + 1) % 250 == 0:
            print(f"  … {i + 1}/{count} sent, {len(mismatches)} mismatches", file=sys.stderr)
    elapsed = time.monotonic() - started
    print(f"flavor API differential (seed {seed}): {count} requests over {len(kinds)} route+verb pairs, "
          f"{identical} identical, {len(explained)} explained, {len(mismatches)} unexplained ({elapsed:.0f} s)"
          + (f"; {reordered} of the identical differ only in where randomly generated flavor ids sort"
             if reordered else ""))
    for kind in kinds:
        total, same, reasoned = per_kind[kind]
        print(f"  {kind:45s} {same:5d}/{total:<5d} identical" + (f", {reasoned} explained" if reasoned else ""))
    reasons: dict[str, int] = {}
    for e in explained:
        reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda item: -item[1]):
        print(f"  explained {n:4d}×: {reason}")
    for e in explained[:max_print]:
        print(f"    #{e['index']} {e['request'][:200]}")
    for m in mismatches[:max_print]:
        print(f"\n#{m['index']} {m['request']}")
        for field, (want, got) in m["diff"].items():
            print(f"  {field}: oracle {_short(want)}")
            print(f"  {' ' * len(field)}  ours   {_short(got)}")
    if len(mismatches) > max_print:
        print(f"\n… {len(mismatches) - max_print} more mismatches (raise --max-print or use --json)")
    if json_path:
        pathlib.Path(json_path).write_text(json.dumps(mismatches, indent=1, ensure_ascii=False, default=str))
    return 0 if not mismatches else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle", help="base URL of a FRESH Nova oracle (default: start one)")
    parser.add_argument("--oracle-port", type=int, default=18776, help="port for the oracle this starts")
    parser.add_argument("--openkeel", help="base URL of a FRESH OpenKeel (default: start one)")
    parser.add_argument("--openkeel-port", type=int, help="port for the OpenKeel this starts (default: a free one)")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--max-print", type=int, default=200)
    parser.add_argument("--json", help="write every mismatch to this file")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    started = []
    try:
        oracle_url = args.oracle
        if not oracle_url:
            oracle = OracleServer(args.oracle_port)
            started.append(oracle)
            oracle.start()
            oracle_url = oracle.url
        openkeel_url = args.openkeel
        if not openkeel_url:
            ours = OpenKeelServer(args.openkeel_port)
            started.append(ours)
            ours.start()
            openkeel_url = ours.url
        return run(oracle_url.rstrip("/"), openkeel_url.rstrip("/"), args.count, args.seed, args.max_print,
                   args.json, args.quiet)
    finally:
        for server in reversed(started):
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
