#!/usr/bin/env python3
"""Differential check of the servers API: the Nova 34.0.0 servers oracle against OpenKeel.

Generates a seeded sequence of requests over the servers routes (boot, list, detail, show,
update, delete, metadata, tags, instance actions and the power, lock, console and resize actions:
resize to a larger flavor, confirmResize, revertResize; the ROUTES table lists them, one entry
per route), with valid and invalid bodies and queries,
microversions 2.1..2.104 with every boundary the servers API has, and several callers: admin,
members of the server's project, a member of another project, a project-less token and none.
The sequence is fixed by the seed alone (never by what a server answered), so both sides, each
started fresh, see the same requests in the same order. The two sides are driven at the same
time, each by its own thread.

The fake driver makes Nova's builds and power actions instantaneous, and OpenKeel's controller
runs servers on its built-in cluster: after each request that starts a task (boot, delete, an
action) the runner waits, on each side, until no server has a task and none is in BUILD
(admin ``GET /servers/detail?all_tenants=1``, not compared), so the next request finds the
same state on both sides.

A response pair is identical when status, ``OpenStack-API-Version``,
``X-OpenStack-Nova-API-Version``, the ``Vary`` lines, the content type, ``Location`` and the
body agree after this normalisation, and nothing else:

- ids: a server booted by the sequence becomes ``<server-N>`` (N: the boot's place in the
  sequence) on each side; request ids become ``<request-id>``; any other UUID becomes ``<uuid>``,
  except the oracle's fixture image ids, which OpenKeel's image service is given too;
- times: ISO 8601 date-times become ``<time>``;
- host names: ``http://127.0.0.1:PORT`` in links and Location becomes ``<endpoint>``; the values of
  ``OS-EXT-SRV-ATTR:host``, ``OS-EXT-SRV-ATTR:hypervisor_hostname``, ``hostId``, an instance
  action event's ``host`` and ``hostId`` become ``<host>`` when not empty;
- what is random per boot: ``adminPass``, ``reservation_id`` (``r-xxxxxxxx``);
- what the fixtures make differ: a server's ``addresses`` keep their shape but the network name,
  the address and the MAC become ``<network>``, ``<ip>``, ``<mac>`` (Nova's Neutron fixture hands
  out 192.168.1.x on ``private``; OpenKeel's pods get cluster addresses).

Answers that differ only where OpenKeel documents a deliberate difference from a Nova cloud
(docs/servers.md) or where the fake driver does what no hypervisor does are counted as
"explained", each with its reason, not as identical: ``security_groups`` absent from server
bodies (no Neutron ports), the ``OS-EXT-SRV-ATTR:instance_name`` (the VirtualMachine's name),
``OS-EXT-SRV-ATTR:root_device_name`` (the fake driver's /dev/sda, KubeVirt's /dev/vda), the
power state of a paused server (the fake driver leaves it RUNNING), the addresses of a server
booted before 2.37 without ``networks``, or with an empty list (Nova's Neutron fixture offers the
project no network, OpenKeel's pod network is always there) and the text ``os-getConsoleOutput``
answers (the guest's console log; the fake driver prints a fixed text). A list whose only difference is the
order of servers sorted by ``uuid`` (random on each side) also counts as explained.

    .venv/bin/python tools/server_api_differential.py                  # starts everything, 2,000 requests
    .venv/bin/python tools/server_api_differential.py --count 300 --seed 7

Without --oracle it runs ``../shared/nova-oracle/run-servers-oracle.sh start PORT`` (--oracle-port,
default 35020) and stops it at the end. Without --openkeel it starts, on a temp SQLite state dir,
the local image service with the oracle's fixture images, ``openkeel-compute serve`` (noauth2) and
``openkeel-compute controller`` (built-in cluster, no delays), and copies the oracle's flavors into
OpenKeel. Prints the result line, a per-route summary, then each difference (``--max-print`` caps
the detail; ``--json FILE`` writes all). Exit status 0 only when nothing is mismatched.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
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

# ---------------------------------------------------------------- fixtures

# Nova's Glance fixture images the generator boots from (id, name, disk/container format, properties).
FIXTURE_IMAGES = [
    ("155d900f-4e14-4e4c-a73d-069cbf4541e6", "fakeimage123456", "raw", "raw",
     {"kernel_id": "nokernel", "ramdisk_id": "nokernel", "architecture": "x86_64"}),
    ("a2459075-d96c-40d5-893e-577ff92e721c", "fakeimage123456", "ami", "ami",
     {"kernel_id": "nokernel", "ramdisk_id": "nokernel"}),
    ("76fa36fc-c930-4bf3-8c8a-ea2a2420deb6", "fakeimage123456", "raw", "bare",
     {"kernel_id": "nokernel", "ramdisk_id": "nokernel", "architecture": "x86_64"}),
]
IMAGE_IDS = [i[0] for i in FIXTURE_IMAGES]

# ---------------------------------------------------------------- generation

BOUNDARY_VERSIONS = ["2.1", "2.2", "2.3", "2.8", "2.9", "2.15", "2.16", "2.18", "2.19", "2.20", "2.21",
                     "2.25", "2.26", "2.36", "2.37", "2.46", "2.47", "2.50", "2.51", "2.52", "2.56",
                     "2.57", "2.58", "2.62", "2.63", "2.65", "2.66", "2.70", "2.71", "2.72", "2.73",
                     "2.74", "2.75", "2.83", "2.84", "2.89", "2.90", "2.95", "2.96", "2.97", "2.98",
                     "2.99", "2.100", "2.101", "2.102", "2.103", "2.104"]
ODD_VERSION_HEADERS = [
    {},
    {"OpenStack-API-Version": "compute latest"},
    {"X-OpenStack-Nova-API-Version": "2.47"},
    {"OpenStack-API-Version": "compute 2.105"},
    {"OpenStack-API-Version": "compute 2.a"},
]
# (token, weight): admin, members of the servers' projects, a member of another project, none
TOKENS = [("admin:admin", 30), ("admin:demo", 4), ("demo:demo", 35), ("demo2:demo", 8), ("other:other", 15),
          ("demo", 2), (None, 2)]
OWNERS = ["demo:demo", "demo:demo", "demo2:demo", "other:other", "admin:admin"]

NAMES = ["web-1", "db", "Server Name", "a_b.c", "ünïcode", "x" * 255, "x" * 256, "", " lead", "trail ",
         "日本語", "tab\tname", 5, None]
META_KEYS = ["a", "role", "k" * 255, "k" * 256, "", "with space", "ключ"]
META_VALUES = ["1", "v", "", "v" * 255, "v" * 256, 5, None, True]
TAGS = ["t1", "tag-2", "web", "x" * 60, "x" * 61, "a,b", "a/b", "", "ñ", "T1"]
ODD_IDS = ["nope", "00000000-0000-0000-0000-000000000000", "1", "x" * 40]
SORT_KEYS = ["access_ip_v4", "access_ip_v6", "auto_disk_config", "availability_zone", "config_drive",
             "created_at", "display_description", "display_name", "host", "hostname", "image_ref",
             "instance_type_id", "kernel_id", "key_name", "launch_index", "launched_at", "locked_by", "node",
             "power_state", "progress", "project_id", "ramdisk_id", "root_device_name", "task_state",
             "terminated_at", "updated_at", "user_id", "uuid", "vm_state", "locked", "id", "vcpus",
             "memory_mb", "bogus"]
FILTERS = {
    "name": ["web", "^db", "-1$", ".", "ñ", "zzz"],
    "status": ["ACTIVE", "SHUTOFF", "PAUSED", "BUILD", "ERROR", "DELETED", "active", "bogus", "SOFT_DELETED"],
    "image": IMAGE_IDS[:2] + ["nope"],
    "flavor": ["1", "2", "42"],
    "ip": ["172.31.", "^8\\."],  # addresses differ by fixture: only filters that match none
    "ip6": ["fe80::", "::9"],
    "changes-since": ["2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z", "yesterday", "2020-01-01"],
    "changes-before": ["2099-01-01T00:00:00Z", "2020-01-01T00:00:00Z", "bad"],
    "all_tenants": ["1", "true", "0", "False", "", "maybe"],
    "deleted": ["true", "false", "1"],
    "locked": ["true", "false", "maybe"],
    "tags": ["t1", "t1,web"], "tags-any": ["web,t1"], "not-tags": ["t1"], "not-tags-any": ["web"],
    "project_id": ["demo", "other"], "tenant_id": ["demo"], "user_id": ["demo", "demo2"],
    "vm_state": ["active", "stopped"], "task_state": ["deleting"], "power_state": ["1", "4", "x"],
    "description": ["d", "^$"], "availability_zone": ["nova", "zone-x"], "hostname": ["web", "^db"],
    "host": ["nohost"], "node": ["nonode"],  # host names differ by side: only filters that match none
    "key_name": ["k"], "launch_index": ["0", "1"],
    "config_drive": ["True"], "progress": ["0", "100"], "uuid": ["nope"], "locked_by": ["owner", "admin"],
    "created_at": ["2026"], "launched_at": ["2026"], "terminated_at": ["2026"],
    "kernel_id": [""], "ramdisk_id": [""], "reservation_id": ["r-nope"], "soft_deleted": ["true"],
    "access_ip_v4": ["1.2.3.4"], "auto_disk_config": ["True"], "root_device_name": ["/dev/nope"],
    "display_name": ["web"], "display_description": ["d"], "image_ref": IMAGE_IDS[:1],
    "foo": ["bar"], "limit": ["0", "1", "2", "3", "-1", "abc", "1000"], "sort_dir": ["asc", "desc", "bogus"],
}
SETTLE_KINDS = {"POST /servers", "DELETE /servers/{id}", "POST /servers/{id}/action"}
REF_RE = re.compile(r"\{(server|req)-(\d+)\}")


def missing_server(n: int) -> str:
    """The id a server the sequence failed to boot has in later paths, the same on both sides."""
    return f"00000000-0000-4000-8000-{n:012d}"


@dataclasses.dataclass
class Request:
    kind: str
    method: str
    path: str  # after /v2.1, percent-encoded, may carry ?query and {server-N} / {req-N} references
    headers: dict
    body: bytes | None = None
    boots: int | None = None  # a boot: the id it answers is {server-N}
    request_ref: int | None = None  # its request id is {req-N} in later paths
    settle: bool = False  # wait for no task and no BUILD on that side afterwards

    def describe(self) -> str:
        hdrs = {k: v for k, v in self.headers.items() if k != "Content-Type"}
        body = "" if self.body is None else " " + self.body.decode("utf-8", "replace")[:300]
        return f"{self.method} {self.path} {hdrs}{body}"


class Generator:
    """The request sequence; its state (servers booted, deleted, stopped...) follows the requests,
    assuming each succeeds, never the answers."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.n_servers = 0
        self.n_reqs = 0
        self.servers: dict[int, dict] = {}  # live in the model: ref -> {"owner", "state", "locked"}
        self.deleted: list[int] = []
        self.requests_of: list[tuple[int, int]] = []  # (server ref, request ref) of actions on it
        self.no_networks: set[int] = set()  # booted before 2.37 without "networks"
        self.no_networks_names: set[str] = set()  # their unique names (web-N), for the other servers of a boot
        self.no_networks_multi: set[str] = set()  # names of such boots whose answer may not name the servers
        self.queued: list[Request] = []  # the rest of a scenario: sent before anything else is drawn
        self.n_flavors = 0

    # -- small pieces
    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def version(self, low: str = "2.1") -> dict:
        r = self.rng.random()
        if r < 0.05:
            return dict(self.pick(ODD_VERSION_HEADERS))
        lo = int(low.split(".")[1])
        if r < 0.6:
            choices = [v for v in BOUNDARY_VERSIONS if int(v.split(".")[1]) >= lo] or [low]
            v = self.pick(choices)
        else:
            v = f"2.{self.rng.randint(lo, 104)}"
        return {"OpenStack-API-Version": f"compute {v}"}

    def token(self, owner: str | None = None) -> dict:
        if owner and self.chance(0.55):
            return {"X-Auth-Token": owner}
        token = self.rng.choices([t for t, _ in TOKENS], weights=[w for _, w in TOKENS])[0]
        return {} if token is None else {"X-Auth-Token": token}

    def headers(self, owner: str | None = None, low: str = "2.1") -> dict:
        return {**self.version(low), **self.token(owner)}

    def server(self, live_bias: float = 0.9) -> tuple[str, dict | None]:
        """A server reference for a path and its model (None when deleted or never booted)."""
        r = self.rng.random()
        if self.servers and r < live_bias:
            ref = self.pick(sorted(self.servers))
            return f"{{server-{ref}}}", self.servers[ref]
        if self.deleted and r < live_bias + 0.06:
            return f"{{server-{self.pick(self.deleted)}}}", None
        return self.pick(ODD_IDS), None

    def body(self, obj) -> tuple[bytes, dict]:
        r = self.rng.random()
        if r < 0.015:
            return b"{not json", {"Content-Type": "application/json"}
        if r < 0.025:
            return b"", {"Content-Type": "application/json"}
        return json.dumps(obj, ensure_ascii=False).encode(), {"Content-Type": "application/json"}

    def req(self, kind, method, path, headers, obj=None, **kw) -> Request:
        if obj is not None or method in ("POST", "PUT"):
            body, ctype = self.body(obj)
            headers = {**headers, **ctype}
        else:
            body = None
        req = Request(kind, method, path, headers, body, **kw)
        req.settle = kind in SETTLE_KINDS
        return req

    def next(self) -> Request:
        if self.queued:
            return self.queued.pop(0)
        weights = {kind: w(self) if callable(w) else w for kind, (w, _) in ROUTES.items()}
        kinds = list(weights)
        kind = self.rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        return ROUTES[kind][1](self)

    # -- boot
    def _create(self):
        self.n_servers += 1
        n = self.n_servers
        owner = self.pick(OWNERS)
        headers = {**self.version(), "X-Auth-Token": owner}
        version = headers.get("OpenStack-API-Version", "compute 2.1").split()[-1]
        minor = int(version.split(".")[1]) if re.fullmatch(r"2\.\d+", version) else 1
        server: dict = {"name": f"web-{n}" if self.chance(0.7) else self.pick(NAMES[:6]),
                        "imageRef": self.pick(IMAGE_IDS) if self.chance(0.9) else self.pick(["nope", ""]),
                        "flavorRef": self.pick(["1", "1", "2", "6", "http://x/flavors/1"])}
        if minor >= 37 or self.chance(0.3):
            server["networks"] = self.pick(["auto", "auto", "none", "auto"])
        if self.chance(0.2):
            server["metadata"] = {self.pick(["a", "role"]): self.pick(["1", "web"])}
        if self.chance(0.1):
            server["user_data"] = base64.b64encode(b"#cloud-config\n").decode()
        if self.chance(0.15):
            server["description"] = self.pick(["d", "a server", None, ""])
        if self.chance(0.12):
            server["tags"] = self.pick([["t1"], ["t1", "web"], ["x" * 61], []])
        if self.chance(0.1):
            server["hostname"] = self.pick(["host-a", "Host_B", "bad host", "h" * 64])
        if self.chance(0.08):
            server["availability_zone"] = self.pick(["nova", "zone-x", "a:b:c:d"])
        if self.chance(0.08):
            server["personality"] = [{"path": "/etc/motd", "contents": base64.b64encode(b"hi").decode()}]
        if self.chance(0.1):
            server["min_count"] = self.pick([1, 2, "2", 0])
            server["max_count"] = self.pick([2, 3, 1])
        if self.chance(0.06):
            server["return_reservation_id"] = self.pick([True, "false", "x"])
        if self.chance(0.05):
            server["key_name"] = self.pick(["nokey", ""])
        if self.chance(0.06):
            server["adminPass"] = self.pick(["secret", "", 5])
        if self.chance(0.06):
            server["block_device_mapping_v2"] = [{"boot_index": 0, "uuid": server.pop("imageRef", IMAGE_IDS[0]),
                                                  "source_type": "image", "destination_type": "local",
                                                  "delete_on_termination": True}]
        if self.chance(0.05):
            # (a network neither side has: the oracle's Neutron fixture network is not OpenKeel's)
            server["networks"] = self.pick([[{"uuid": "5b0d8a8e-0c0a-4b4e-9d44-4f6f6a1c3a00"}],
                                            [{"port": "nope"}], "bogus", [], None])
        if self.chance(0.08):
            what = self.rng.randrange(5)
            if what == 0:
                server.pop(self.pick(["name", "flavorRef", "imageRef"]), None)
            elif what == 1:
                server["name"] = self.pick(NAMES)
            elif what == 2:
                server["foo"] = 1
            elif what == 3:
                server["accessIPv4"] = self.pick(["1.2.3.4", "bad"])
            else:
                server["OS-DCF:diskConfig"] = self.pick(["AUTO", "MANUAL", "bogus"])
        if server.get("networks") in (None, []):  # absent, null or empty: no network asked for
            self.no_networks.add(n)
            if isinstance(server.get("name"), str) and server["name"] == f"web-{n}":
                self.no_networks_names.add(server["name"])
            elif isinstance(server.get("name"), str) and ("max_count" in server or "return_reservation_id" in server):
                # servers whose ids the boot's answer may not name (the others of a multiple boot, named
                # "<name>-<i>", or all of a boot answering with its reservation id only)
                self.no_networks_multi.add(server["name"])
        obj = {"server": server}
        if self.chance(0.02):
            obj = self.pick([{}, {"server": None}, [], {"servr": server}])
        self.servers[n] = {"owner": owner, "state": "active", "locked": False}
        return self.req("POST /servers", "POST", "/servers", headers, obj, boots=n)

    # -- lists
    def _query(self, detail: bool) -> str:
        params: list[tuple[str, str]] = []
        for _ in range(self.rng.choice([0, 1, 1, 2, 3])):
            name = self.pick(list(FILTERS) + ["sort_key", "sort_key", "marker", "limit", "all_tenants"])
            if name == "sort_key":
                value = self.pick(SORT_KEYS)
            elif name == "marker":
                value, _ = self.server(0.8)
            else:
                value = self.pick(FILTERS[name])
            params.append((name, value))
        return ("?" + urllib.parse.urlencode(params, safe="{}")) if params else ""

    def _list(self):
        return self.req("GET /servers", "GET", "/servers" + self._query(False), self.headers())

    def _detail(self):
        return self.req("GET /servers/detail", "GET", "/servers/detail" + self._query(True), self.headers())

    # -- one server
    def _show(self):
        ref, model = self.server()
        query = self.pick(["", "", "", "", "?foo=bar"])
        return self.req("GET /servers/{id}", "GET", f"/servers/{ref}{query}",
                        self.headers(model and model["owner"]))

    def _update(self):
        ref, model = self.server()
        body: dict = {}
        for _ in range(self.rng.choice([1, 1, 2])):
            what = self.pick(["name", "description", "hostname", "accessIPv4", "OS-DCF:diskConfig", "foo"])
            body[what] = {"name": self.pick(NAMES), "description": self.pick(["d", None, "x" * 256]),
                          "hostname": self.pick(["new-host", "bad host", "h" * 64]),
                          "accessIPv4": self.pick(["1.2.3.4", "x"]), "OS-DCF:diskConfig": "AUTO",
                          "foo": 1}[what]
        obj = {"server": body} if self.chance(0.95) else self.pick([{}, {"server": None}])
        return self.req("PUT /servers/{id}", "PUT", f"/servers/{ref}", self.headers(model and model["owner"]), obj)

    def _delete(self):
        ref, model = self.server()
        headers = self.headers(model and model["owner"])
        token = headers.get("X-Auth-Token", "")
        if model is not None and (token == "admin:admin" or token.split(":")[-1] == model["owner"].split(":")[-1]):
            n = int(ref.strip("{}").split("-")[1])
            if not model["locked"] or headers.get("X-Auth-Token") == "admin:admin":
                self.servers.pop(n, None)
                self.deleted.append(n)
        return self.req("DELETE /servers/{id}", "DELETE", f"/servers/{ref}", headers)

    # -- actions
    def _action(self):
        ref, model = self.server()
        name = self.pick(["os-start", "os-stop", "os-stop", "reboot", "pause", "unpause", "lock", "unlock",
                          "os-getConsoleOutput", "bogus", "resize", "resize", "confirmResize", "revertResize"])
        if name == "resize":
            # to larger flavors only (a smaller disk is refused by a real driver, not by the fake one), the
            # same flavor, unknown ones and bad bodies
            obj = {"resize": self.pick([{"flavorRef": "2"}, {"flavorRef": "3"}, {"flavorRef": "3"}, {"flavorRef": "42"},
                                        {"flavorRef": ""}, {"flavorRef": None}, {}, {"flavorRef": 3},
                                        {"flavorRef": "3", "OS-DCF:diskConfig": self.pick(["AUTO", "MANUAL", "x"])}])}
        elif name == "reboot":
            obj = {"reboot": {"type": self.pick(["SOFT", "HARD", "HARD", "soft", "bogus"])}}
            if self.chance(0.05):
                obj = {"reboot": {}}
        elif name == "lock":
            obj = {"lock": self.pick([None, None, {}, {"locked_reason": self.pick(["maint", "", "r" * 256])}])}
        elif name == "os-getConsoleOutput":
            obj = {name: self.pick([{}, {"length": 5}, {"length": -1}, {"length": "x"}, None])}
        else:
            obj = {name: None}
        headers = self.headers(model and model["owner"])
        if model is not None:
            model["state"] = {"os-stop": "shutoff", "os-start": "active", "pause": "paused",
                              "unpause": "active"}.get(name, model["state"])
            if name in ("lock", "unlock"):
                model["locked"] = name == "lock"
        self.n_reqs += 1
        if model is not None:
            self.requests_of.append((int(ref.strip("{}").split("-")[1]), self.n_reqs))
        return self.req("POST /servers/{id}/action", "POST", f"/servers/{ref}/action", headers, obj,
                        request_ref=self.n_reqs)

    # -- a flavor deleted while servers use it (its requests follow one another, bodies always valid)
    def _plain(self, kind: str, method: str, path: str, token: str, version: str, obj=None, **kw) -> Request:
        headers = {"OpenStack-API-Version": f"compute {version}", "X-Auth-Token": token}
        body = None
        if obj is not None:
            body = json.dumps(obj).encode()
            headers["Content-Type"] = "application/json"
        req = Request(kind, method, path, headers, body, **kw)
        req.settle = kind in SETTLE_KINDS
        return req

    def _flavor_deleted(self):
        """A flavor of its own, a server booted on it, the flavor deleted: the server at 2.47+ still shows
        the flavor it was built with and a resize to the deleted flavor is refused; or the server is
        resized away from it, the flavor deleted, and the resize reverted onto it."""
        self.n_flavors += 1
        flavor = f"s4-{self.n_flavors}"
        self.n_servers += 1
        n = self.n_servers
        owner = self.pick(["demo:demo", "demo2:demo"])
        ref = f"{{server-{n}}}"
        late = lambda: f"2.{self.rng.randint(47, 104)}"
        reverted = self.chance(0.5)
        steps = [
            self._plain("POST /flavors", "POST", "/flavors", "admin:admin", "2.1",
                        {"flavor": {"name": f"scenario-{self.n_flavors}", "ram": 512, "vcpus": 1, "disk": 1,
                                    "id": flavor}}),
            self._plain("POST /servers", "POST", "/servers", owner, "2.37",
                        {"server": {"name": f"web-{n}", "imageRef": IMAGE_IDS[0], "flavorRef": flavor,
                                    "networks": "auto"}}, boots=n),
        ]
        if reverted:
            self.n_reqs += 1
            steps.append(self._plain("POST /servers/{id}/action", "POST", f"/servers/{ref}/action", owner,
                                     "2.1", {"resize": {"flavorRef": "2"}}, request_ref=self.n_reqs))
            self.requests_of.append((n, self.n_reqs))
            steps.append(self._plain("GET /servers/{id}", "GET", f"/servers/{ref}", owner, late()))
        steps.append(self._plain("DELETE /flavors/{id}", "DELETE", f"/flavors/{flavor}", "admin:admin", "2.1"))
        steps.append(self._plain("GET /servers/{id}", "GET", f"/servers/{ref}", owner, late()))
        if reverted:
            self.n_reqs += 1
            steps.append(self._plain("POST /servers/{id}/action", "POST", f"/servers/{ref}/action", owner,
                                     "2.1", {"revertResize": None}, request_ref=self.n_reqs))
            self.requests_of.append((n, self.n_reqs))
            steps.append(self._plain("GET /servers/{id}", "GET", f"/servers/{ref}", owner, late()))
        self.n_reqs += 1
        steps.append(self._plain("POST /servers/{id}/action", "POST", f"/servers/{ref}/action", owner,
                                 self.pick(["2.1", late()]), {"resize": {"flavorRef": flavor}},
                                 request_ref=self.n_reqs))
        steps.append(self._plain("GET /servers/{id}", "GET", f"/servers/{ref}", "admin:admin", late()))
        self.servers[n] = {"owner": owner, "state": "active", "locked": False}
        self.queued.extend(steps[1:])
        return steps[0]

    # -- metadata
    def _meta_path(self, ref: str, key: str | None = None) -> str:
        path = f"/servers/{ref}/metadata"
        return path if key is None else path + "/" + urllib.parse.quote(key, safe="")

    def _meta_list(self):
        ref, model = self.server()
        return self.req("GET /servers/{id}/metadata", "GET", self._meta_path(ref), self.headers(model and model["owner"]))

    def _meta_body(self):
        meta = {}
        for _ in range(self.rng.choice([0, 1, 1, 2])):
            meta[self.pick(META_KEYS[:3] if self.chance(0.8) else META_KEYS)] = (
                self.pick(META_VALUES[:2]) if self.chance(0.8) else self.pick(META_VALUES))
        return {"metadata": meta} if self.chance(0.93) else self.pick([{}, {"metadata": None}, {"meta": {}}])

    def _meta_merge(self):
        ref, model = self.server()
        return self.req("POST /servers/{id}/metadata", "POST", self._meta_path(ref),
                        self.headers(model and model["owner"]), self._meta_body())

    def _meta_replace(self):
        ref, model = self.server()
        return self.req("PUT /servers/{id}/metadata", "PUT", self._meta_path(ref),
                        self.headers(model and model["owner"]), self._meta_body())

    def _meta_show(self):
        ref, model = self.server()
        return self.req("GET /servers/{id}/metadata/{key}", "GET", self._meta_path(ref, self.pick(["a", "role", "zz"])),
                        self.headers(model and model["owner"]))

    def _meta_set(self):
        ref, model = self.server()
        key = self.pick(["a", "role", "k" * 256])
        obj = {"meta": {key: self.pick(META_VALUES[:3])}}
        if self.chance(0.1):
            obj = self.pick([{"meta": {"other": "v"}}, {"meta": {key: "v", "b": "w"}}, {"meta": {}}, {}])
        return self.req("PUT /servers/{id}/metadata/{key}", "PUT", self._meta_path(ref, key),
                        self.headers(model and model["owner"]), obj)

    def _meta_delete(self):
        ref, model = self.server()
        return self.req("DELETE /servers/{id}/metadata/{key}", "DELETE",
                        self._meta_path(ref, self.pick(["a", "role", "zz"])), self.headers(model and model["owner"]))

    # -- tags
    def _tags_path(self, ref: str, tag: str | None = None) -> str:
        path = f"/servers/{ref}/tags"
        return path if tag is None else path + "/" + urllib.parse.quote(tag, safe="")

    def _tags_list(self):
        ref, model = self.server()
        return self.req("GET /servers/{id}/tags", "GET", self._tags_path(ref), self.headers(model and model["owner"]))

    def _tags_replace(self):
        ref, model = self.server()
        tags = self.rng.sample(TAGS, self.rng.choice([0, 1, 2, 3]))
        obj = {"tags": tags} if self.chance(0.93) else self.pick([{}, {"tags": "t1"}, {"tags": ["t1", "t1"]}])
        return self.req("PUT /servers/{id}/tags", "PUT", self._tags_path(ref), self.headers(model and model["owner"]), obj)

    def _tags_delete_all(self):
        ref, model = self.server()
        return self.req("DELETE /servers/{id}/tags", "DELETE", self._tags_path(ref),
                        self.headers(model and model["owner"]))

    def _tag_check(self):
        ref, model = self.server()
        return self.req("GET /servers/{id}/tags/{tag}", "GET", self._tags_path(ref, self.pick(TAGS)),
                        self.headers(model and model["owner"]))

    def _tag_add(self):
        ref, model = self.server()
        return self.req("PUT /servers/{id}/tags/{tag}", "PUT", self._tags_path(ref, self.pick(TAGS)),
                        self.headers(model and model["owner"]), None)

    def _tag_delete(self):
        ref, model = self.server()
        return self.req("DELETE /servers/{id}/tags/{tag}", "DELETE", self._tags_path(ref, self.pick(TAGS)),
                        self.headers(model and model["owner"]))

    # -- instance actions
    def _ia_list(self):
        ref, model = self.server(0.85)
        params = []
        if self.chance(0.3):
            params.append(("limit", self.pick(["1", "2", "0", "x"])))
        if self.chance(0.2):
            params.append(("changes-since", self.pick(["2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z"])))
        if self.chance(0.15):
            params.append(("changes-before", self.pick(["2099-01-01T00:00:00Z", "bad"])))
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        return self.req("GET /servers/{id}/os-instance-actions", "GET", f"/servers/{ref}/os-instance-actions{query}",
                        self.headers(model and model["owner"]))

    def _ia_show(self):
        if self.requests_of and self.chance(0.85):
            n, r = self.pick(self.requests_of)
            ref, model = f"{{server-{n}}}", self.servers.get(n)
            req_id = f"{{req-{r}}}"
        else:
            ref, model = self.server()
            req_id = self.pick(["req-nope", "req-00000000-0000-0000-0000-000000000000"])
        owner = model["owner"] if model else "demo:demo"
        return self.req("GET /servers/{id}/os-instance-actions/{request_id}", "GET",
                        f"/servers/{ref}/os-instance-actions/{req_id}", self.headers(owner))


# Sent only inside a route's sequence (the flavor deleted while a server uses it), never drawn alone.
SEQUENCE_ONLY = ("DELETE /flavors/{id}",)

# One entry per route: kind -> (weight, or a function of the generator giving it; the method making one).
ROUTES = {
    "POST /servers": (lambda g: 40 if len(g.servers) < 4 else (8 if len(g.servers) < 12 else 1),
                      Generator._create),
    "GET /servers": (6, Generator._list),
    "GET /servers/detail": (6, Generator._detail),
    "GET /servers/{id}": (10, Generator._show),
    "PUT /servers/{id}": (5, Generator._update),
    "DELETE /servers/{id}": (lambda g: 6 if len(g.servers) > 8 else 1.5, Generator._delete),
    "POST /servers/{id}/action": (18, Generator._action),
    "GET /servers/{id}/metadata": (3, Generator._meta_list),
    "POST /servers/{id}/metadata": (3, Generator._meta_merge),
    "PUT /servers/{id}/metadata": (2, Generator._meta_replace),
    "GET /servers/{id}/metadata/{key}": (2, Generator._meta_show),
    "PUT /servers/{id}/metadata/{key}": (3, Generator._meta_set),
    "DELETE /servers/{id}/metadata/{key}": (2, Generator._meta_delete),
    "GET /servers/{id}/tags": (2, Generator._tags_list),
    "PUT /servers/{id}/tags": (2, Generator._tags_replace),
    "DELETE /servers/{id}/tags": (1, Generator._tags_delete_all),
    "GET /servers/{id}/tags/{tag}": (2, Generator._tag_check),
    "PUT /servers/{id}/tags/{tag}": (3, Generator._tag_add),
    "DELETE /servers/{id}/tags/{tag}": (2, Generator._tag_delete),
    "GET /servers/{id}/os-instance-actions": (3, Generator._ia_list),
    "GET /servers/{id}/os-instance-actions/{request_id}": (3, Generator._ia_show),
    # scenario 4 of the flavors: several requests in a row, the first is a flavor's creation
    "POST /flavors": (lambda g: 1.5 if len(g.servers) < 10 else 0, Generator._flavor_deleted),
}

# ---------------------------------------------------------------- sending

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
UUID_RE = re.compile(UUID)
REQ_RE = re.compile("req-" + UUID)
ENDPOINT_RE = re.compile(r"https?://127\.0\.0\.1:\d+")
TIME_RE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
RESERVATION_RE = re.compile(r"\br-[0-9a-z]{8}\b")
COMPARED_HEADERS = ("openstack-api-version", "x-openstack-nova-api-version", "vary", "content-type", "location")
HOST_KEYS = {"OS-EXT-SRV-ATTR:host", "OS-EXT-SRV-ATTR:hypervisor_hostname", "hostId", "host"}


@dataclasses.dataclass
class Answer:
    status: int
    headers: dict  # lower-case name -> list of values
    body: object
    elapsed: float = 0.0

    def view(self) -> dict:
        return {"status": self.status, **{h: self.headers.get(h) for h in COMPARED_HEADERS}, "body": self.body}


class Side:
    """One API under test: its base URL and the ids its answers gave to the sequence's references."""

    def __init__(self, name: str, url: str):
        self.name = name
        self.url = url.rstrip("/")
        self.servers: dict[int, str] = {}
        self.labels: dict[str, str] = {}
        self.request_ids: dict[int, str] = {}
        self.settle_time = 0.0
        self.stuck: dict[str, tuple] = {}  # server id -> (status, task_state) it stayed in
        self.last_boot: tuple[int, str] | None = None  # (N, name) of the last boot answered 202

    def render(self, path: str) -> str:
        def one(m):
            kind, n = m.group(1), int(m.group(2))
            if kind == "server":
                return self.servers.get(n, missing_server(n))
            return self.request_ids.get(n, f"req-{n:08d}")
        return REF_RE.sub(one, path)

    def _http(self, method: str, path: str, headers: dict, body: bytes | None, timeout: float = 120):
        parts = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        try:
            headers = dict(headers)
            if body is not None:
                headers["Content-Length"] = str(len(body))
            conn.request(method, "/v2.1" + path, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            return resp.status, resp.getheaders(), raw
        finally:
            conn.close()

    def send(self, req: Request) -> Answer:
        started = time.monotonic()
        status, raw_headers, raw = self._http(req.method, self.render(req.path), req.headers, req.body)
        elapsed = time.monotonic() - started
        hdrs: dict[str, list[str]] = {}
        for name, value in raw_headers:
            hdrs.setdefault(name.lower(), []).append(value)
        if "vary" in hdrs:
            hdrs["vary"] = [v.strip() for line in hdrs["vary"] for v in line.split(",")]
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = text
        if req.boots is not None and status == 202 and isinstance(body, dict) and isinstance(body.get("server"), dict):
            uuid = body["server"].get("id")
            if uuid:
                self.servers[req.boots] = uuid
                self.labels[uuid] = f"<server-{req.boots}>"
                try:
                    name = json.loads(req.body or b"{}")["server"]["name"]
                except (ValueError, KeyError, TypeError):
                    name = None
                self.last_boot = (req.boots, name) if isinstance(name, str) else None
        if req.request_ref is not None and hdrs.get("x-openstack-request-id"):
            self.request_ids[req.request_ref] = hdrs["x-openstack-request-id"][0]
        hdrs = {k: [self.normalise(v) for v in vals] for k, vals in hdrs.items()}
        return Answer(status, hdrs, self.normalise(body), elapsed)

    def normalise(self, value, key: str | None = None):
        if isinstance(value, str):
            if key in HOST_KEYS and value:
                return "<host>"
            if key == "adminPass":
                return "<password>"
            text = ENDPOINT_RE.sub("<endpoint>", value)
            text = REQ_RE.sub("<request-id>", text)
            text = UUID_RE.sub(lambda m: self.labels.get(m.group(0), m.group(0) if m.group(0) in IMAGE_IDS
                                                         else "<uuid>"), text)
            text = TIME_RE.sub("<time>", text)
            return RESERVATION_RE.sub("<reservation>", text)
        if isinstance(value, list):
            return [self.normalise(v, key) for v in value]
        if isinstance(value, dict):
            if key == "addresses":
                return {"<network>": [dict(self.normalise(a), addr="<ip>", **{"OS-EXT-IPS-MAC:mac_addr": "<mac>"})
                                      if isinstance(a, dict) else a for ips in value.values() for a in ips]} \
                    if value else {}
            return {self.normalise(k): self.normalise(v, k) for k, v in value.items()}
        return value

    def _label_members(self, servers: list[dict]) -> None:
        """The other servers of the last multiple boot (``name-K``, K from 2; only the first one's id is
        in the boot's answer) become ``<server-N-K>`` on each side alike."""
        if self.last_boot is None:
            return
        n, name = self.last_boot
        for s in servers:
            m = re.fullmatch(re.escape(name) + r"-(\d+)", str(s.get("name")))
            if m and s.get("id") not in self.labels and m.group(1) != "1":
                self.labels[s["id"]] = f"<server-{n}-{m.group(1)}>"
        self.last_boot = None

    def settle(self, timeout: float = 30.0) -> None:
        """Until no server has a task and none is building (admin detail list, every project).

        A server still busy after ``timeout`` is reported as stuck (in ``self.stuck``, with its
        state) and not waited for again in that state: one stuck server must not stall the run."""
        started = time.monotonic()
        deadline = started + timeout
        busy: dict[str, tuple] = {}
        while True:
            status, _, raw = self._http("GET", "/servers/detail?all_tenants=1",
                                        {"X-Auth-Token": "admin:admin"}, None)
            if status == 200:
                servers = json.loads(raw)["servers"]
                self._label_members(servers)
                busy = {s["id"]: (s.get("status"), s.get("OS-EXT-STS:task_state")) for s in servers
                        if (s.get("OS-EXT-STS:task_state") is not None or s.get("status") == "BUILD")
                        and self.stuck.get(s["id"]) != (s.get("status"), s.get("OS-EXT-STS:task_state"))}
                if not busy:
                    break
            if time.monotonic() > deadline:
                self.stuck.update(busy)
                break
            time.sleep(0.1)
        self.settle_time += time.monotonic() - started


def drive(side: Side, requests: list[Request], progress=None) -> list[Answer]:
    answers = []
    for i, req in enumerate(requests):
        answer = side.send(req)
        answers.append(answer)
        if req.settle and answer.status < 300:
            side.settle()
        if progress is not None and (i + 1) % 250 == 0:
            progress(side.name, i + 1)
    return answers


# ---------------------------------------------------------------- comparing

# Where OpenKeel deliberately answers differently from a Nova cloud (docs/servers.md): a reason and
# what to set aside, per key of a server body.
KNOWN_DIFFERENCES = [
    ("security_groups", "security_groups: OpenKeel servers have no Neutron ports", None),
    ("OS-EXT-SRV-ATTR:instance_name", "instance_name: the VirtualMachine's name", "<instance-name>"),
    ("no-networks", ("addresses of a server booted before 2.37 without networks: Nova's Neutron fixture has no "
                     "network the project may use, so it got none; OpenKeel's pod network is always there"), None),
    ("paused-power-state", ("power_state of a paused server: Nova's fake driver does not pause (RUNNING, 1); "
                            "a paused KubeVirt VM is PAUSED (3), as on Nova's libvirt"), None),
    ("OS-EXT-SRV-ATTR:root_device_name", ("root_device_name: the hypervisor's choice (the fake driver's /dev/sda, "
                                          "a KubeVirt virtio disk's /dev/vda)"), "<root-device>"),
]


# Servers booted before 2.37 without "networks" (their labels; set by run()).
NO_NETWORKS: set[str] = set()
MEMBER_RE = re.compile(r"<server-(\d+)-\d+>")
NO_NETWORKS_NAMES: set[str] = set()
NO_NETWORKS_MULTI: set[str] = set()


def _no_networks(body):
    if isinstance(body, dict):
        out = {k: _no_networks(v) for k, v in body.items()}
        name = body.get("name")
        named = isinstance(name, str) and (name in NO_NETWORKS_NAMES or name.rpartition("-")[0] in NO_NETWORKS_NAMES
                                           or (body.get("id") == "<uuid>"
                                               and (name in NO_NETWORKS_MULTI
                                                    or name.rpartition("-")[0] in NO_NETWORKS_MULTI)))
        member = MEMBER_RE.fullmatch(str(body.get("id")))  # another server of the same multiple boot
        ident = f"<server-{member.group(1)}>" if member else body.get("id")
        if (ident in NO_NETWORKS or named) and "addresses" in body:
            out["addresses"] = "<no networks asked>"
        return out
    if isinstance(body, list):
        return [_no_networks(v) for v in body]
    return body


def _set_aside(body, key, placeholder):
    if key == "paused-power-state":
        return _paused_power_state(body)
    if key == "no-networks":
        return _no_networks(body)
    if isinstance(body, dict):
        out = {}
        for k, v in body.items():
            if k == key and (isinstance(v, list) or (isinstance(v, str) and v.startswith(("/dev/", "instance-", "<")))):
                if placeholder is not None:
                    out[k] = placeholder
                continue
            out[k] = _set_aside(v, key, placeholder)
        return out
    if isinstance(body, list):
        return [_set_aside(v, key, placeholder) for v in body]
    return body


def _paused_power_state(body):
    if isinstance(body, dict):
        out = {k: _paused_power_state(v) for k, v in body.items()}
        if body.get("OS-EXT-STS:vm_state") == "paused" and body.get("OS-EXT-STS:power_state") in (1, 3):
            out["OS-EXT-STS:power_state"] = "<paused>"
        return out
    if isinstance(body, list):
        return [_paused_power_state(v) for v in body]
    return body


def _explain(req: Request, want: dict, got: dict, uuids: tuple[dict, dict] | None = None) -> str | None:
    if "os-getConsoleOutput" in (req.body or b"").decode("utf-8", "replace") and got["status"] == 200 \
            and want["status"] == 200 and set(want["body"] or {}) == set(got["body"] or {}) == {"output"}:
        return "os-getConsoleOutput: the text is the guest's console log (the fake driver prints a fixed text)"
    if {k for k in want if want[k] != got[k]} != {"body"}:
        return None
    a, b = want["body"], got["body"]
    reasons = []
    if _enum_order_only(a, b):
        return "the values Nova lists in this message come from a Python set: their order changes per process"
    for key, reason, placeholder in KNOWN_DIFFERENCES:
        a2, b2 = _set_aside(a, key, placeholder), _set_aside(b, key, placeholder)
        if (a2 != a or b2 != b) and _changed_something(a, b, a2, b2):
            reasons.append(reason)
        a, b = a2, b2
    if a == b:
        return "; ".join(reasons) if reasons else None
    if _one_boot_order(a) == _one_boot_order(b):
        return "; ".join([*reasons, ONE_BOOT_ORDER])
    if "sort_key=uuid" in req.path and isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        def key(body):
            return sorted(json.dumps(s, sort_keys=True) for s in body.get("servers", []))
        if key(a) == key(b):
            return "; ".join(reasons + ["sorted by uuid: ids are random on each side"])
    if uuids is not None and _uuid_ties(a, b, uuids):
        return "; ".join(reasons + [UUID_TIES])
    return None


UUID_TIES = "servers whose sort values tie: Nova and OpenKeel order them by uuid, random on each side"


def _uuid_ties(a, b, uuids: tuple[dict, dict]) -> bool:
    """Two lists of the same servers whose order differs only within runs holding the same servers on
    both sides, each run in uuid order (the same direction on both sides) by each side's real ids."""
    if not (isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("servers"), list)
            and isinstance(b.get("servers"), list) and len(a["servers"]) == len(b["servers"])):
        return False
    if {k: v for k, v in a.items() if k != "servers"} != {k: v for k, v in b.items() if k != "servers"}:
        return False
    sa, sb = a["servers"], b["servers"]
    if sorted(json.dumps(s, sort_keys=True) for s in sa) != sorted(json.dumps(s, sort_keys=True) for s in sb):
        return False
    start, seen_a, seen_b = 0, set(), set()
    for i, (x, y) in enumerate(zip(sa, sb, strict=True)):
        seen_a.add(json.dumps(x, sort_keys=True))
        seen_b.add(json.dumps(y, sort_keys=True))
        if seen_a != seen_b:
            continue
        if i > start:  # a run of two servers or more
            ids = [[uuids[side].get(str(s.get("id"))) for s in run[start:i + 1]] for side, run in ((0, sa), (1, sb))]
            if any(None in side for side in ids):
                # a server the sequence did not boot by reference (another of a multiple boot): its real id,
                # hence its place in the run, is unknown on both sides; the run holds the same servers
                start, seen_a, seen_b = i + 1, set(), set()
                continue
            ways = [("asc" if side == sorted(side) else "desc" if side == sorted(side, reverse=True) else None)
                    for side in ids]
            if ways[0] is None or ways[0] != ways[1]:
                return False
        start, seen_a, seen_b = i + 1, set(), set()
    return True


ONE_BOOT_ORDER = "the order of the servers of one multiple boot: Nova's conductor creates them in no fixed order"
_BOOT_MEMBER_RE = re.compile(r"^(.*)-(\d+)$")


def _one_boot_order(body):
    """A list with each run of adjacent servers of one multiple boot ("name-1", "name-2"...) sorted by name."""
    if not (isinstance(body, dict) and isinstance(body.get("servers"), list)):
        return body
    servers, out, i = body["servers"], [], 0
    while i < len(servers):
        m = _BOOT_MEMBER_RE.match(str(servers[i].get("name", ""))) if isinstance(servers[i], dict) else None
        j = i + 1
        while m and j < len(servers) and isinstance(servers[j], dict) and \
                (_BOOT_MEMBER_RE.match(str(servers[j].get("name", ""))) or [None, None])[1] == m.group(1):
            j += 1
        out.extend(sorted(servers[i:j], key=lambda s: json.dumps(s, sort_keys=True)))
        i = j
    return dict(body, servers=out)


_ENUM_RE = re.compile(r"is not one of \[(.*)\]$")


def _enum_order_only(a, b) -> bool:
    """Two faults whose messages differ only in the order of the "is not one of [...]" list."""
    if not (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and len(a) == 1):
        return False
    (fa,), (fb,) = a.values(), b.values()
    if not (isinstance(fa, dict) and isinstance(fb, dict) and fa.get("code") == fb.get("code")):
        return False
    ma, mb = str(fa.get("message")), str(fb.get("message"))
    xa, xb = _ENUM_RE.search(ma), _ENUM_RE.search(mb)
    return bool(xa and xb) and ma[:xa.start()] == mb[:xb.start()] and \
        sorted(xa.group(1).split(", ")) == sorted(xb.group(1).split(", "))


def _changed_something(a, b, a2, b2) -> bool:
    """Whether setting a key aside removed a difference (not merely a key both sides had alike)."""
    return json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True) and (
        _diff_paths(a, b) != _diff_paths(a2, b2))


def _diff_paths(want, got, path="body", out=None, limit=8):
    """The places two JSON values differ: (path, oracle's, ours), at most ``limit``."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got), key=str):
            if k not in want:
                out.append((f"{path}.{k}", "<absent>", got[k]))
            elif k not in got:
                out.append((f"{path}.{k}", want[k], "<absent>"))
            elif want[k] != got[k]:
                _diff_paths(want[k], got[k], f"{path}.{k}", out, limit)
            if len(out) >= limit:
                break
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (x, y) in enumerate(zip(want, got)):
            if x != y:
                _diff_paths(x, y, f"{path}[{i}]", out, limit)
        return out
    out.append((path, want, got))
    return out


def _short(value, limit: int = 600) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def compare(requests: list[Request], oracle: list[Answer], ours: list[Answer],
            uuids: tuple[dict, dict] | None = None) -> dict:
    """``uuids``: each side's real server ids by the sequence's labels (oracle, OpenKeel)."""
    result = {"identical": 0, "explained": [], "mismatches": [], "per_kind": {}}
    for i, (req, a, b) in enumerate(zip(requests, oracle, ours)):
        stats = result["per_kind"].setdefault(req.kind, [0, 0, 0])
        stats[0] += 1
        want, got = a.view(), b.view()
        if want == got:
            result["identical"] += 1
            stats[1] += 1
            continue
        reason = _explain(req, want, got, uuids)
        if reason:
            result["explained"].append({"index": i, "kind": req.kind, "reason": reason})
            stats[2] += 1
            continue
        diff = {k: (want[k], got[k]) for k in want if want[k] != got[k] and k != "body"}
        if want["body"] != got["body"]:
            for where, w, g in _diff_paths(want["body"], got["body"]):
                diff[where] = (w, g)
        result["mismatches"].append({"index": i, "kind": req.kind, "request": req.describe(), "diff": diff})
    return result


# ---------------------------------------------------------------- the two clouds

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
        time.sleep(0.3)
    raise SystemExit(f"{url} did not answer within {seconds} s")


def _json_call(url: str, method: str, path: str, body=None, version: str = "2.61"):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = None if body is None else json.dumps(body).encode()
    headers = {"X-Auth-Token": "admin:admin", "OpenStack-API-Version": f"compute {version}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, "/v2.1" + path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, (json.loads(raw) if raw else None)


class OpenKeel:
    """The local image service with the fixture images, the API and the controller on its built-in cluster."""

    def __init__(self, port: int | None = None):
        """``port``: the API's; the image service and the built-in cluster take the next two (else free ones)."""
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="okc-server-differential-"))
        self.port = port or _free_port()
        self.image_port = port + 1 if port else _free_port()
        self.cluster_port = port + 2 if port else 0
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen:
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        proc = subprocess.Popen(args, stdout=(self.dir / log).open("wb"), stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self, flavors: list[dict]) -> None:
        bindir = pathlib.Path(sys.executable).parent
        exe = str(bindir / "openkeel-compute")
        images = self.dir / "images"
        disk = self.dir / "disk.raw"
        disk.write_bytes(b"\0" * 4096)
        sys.path.insert(0, str(ROOT / "src"))
        from openkeel_compute.images import local

        for image_id, name, disk_format, container_format, properties in FIXTURE_IMAGES:
            local.register(images, disk, name=name, image_id=image_id, disk_format=disk_format,
                           container_format=container_format, properties=properties)
        image_port = self.image_port
        conf = self.dir / "openkeel-compute.conf"
        # one node in the built-in cluster: resizes stay on it (the oracle has two fake computes)
        conf.write_text(f"[DEFAULT]\nstate_path = {self.dir}\nallow_resize_to_same_host = true\n"
                        "[api]\nauth_strategy = noauth2\n"
                        f"[database]\nconnection = sqlite:///{self.dir}/x.sqlite\n"
                        f"[glance]\napi_servers = http://127.0.0.1:{image_port}\n"
                        "[controller]\nemulator_delay_scale = 0.0\npoll_interval = 0.05\nmetrics_port = 0\n"
                        f"emulator_port = {self.cluster_port}\n")
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        subprocess.run([exe, "db", "sync", "--config-file", str(conf)], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._spawn([sys.executable, "-m", "openkeel_compute.images.local", "serve", "--dir", str(images),
                     "--port", str(image_port)], "images.log")
        serve = self._spawn([exe, "serve", "--config-file", str(conf), "--host", "127.0.0.1",
                             "--port", str(self.port)], "serve.log")
        self._spawn([exe, "controller", "--config-file", str(conf)], "controller.log")
        _wait(self.url, serve, 120)
        for flavor in flavors:
            body = {"flavor": {k: flavor[k] for k in ("id", "name", "ram", "vcpus", "disk")}}
            status, _ = _json_call(self.url, "POST", "/flavors", body)
            if status != 200:
                raise SystemExit(f"could not copy flavor {flavor['id']} into OpenKeel: {status}")
            if flavor.get("extra_specs"):
                _json_call(self.url, "POST", f"/flavors/{flavor['id']}/os-extra_specs",
                           {"extra_specs": flavor["extra_specs"]})

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)


class Oracle:
    def __init__(self, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.script = SHARED / "nova-oracle" / "run-servers-oracle.sh"

    def start(self) -> None:
        subprocess.run([str(self.script), "stop", str(self.port)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run([str(self.script), "start", str(self.port)], check=True, stdout=subprocess.DEVNULL)
        _wait(self.url, None, 240)

    def stop(self) -> None:
        subprocess.run([str(self.script), "stop", str(self.port)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def oracle_flavors(url: str) -> list[dict]:
    status, body = _json_call(url, "GET", "/flavors/detail?is_public=none")
    if status != 200:
        raise SystemExit(f"the oracle's flavors: {status}")
    return body["flavors"]


# ---------------------------------------------------------------- main

def run(oracle_url: str, openkeel_url: str, count: int, seed: int, quiet: bool = True) -> dict:
    gen = Generator(seed)
    requests = [gen.next() for _ in range(count)]
    NO_NETWORKS.clear()
    NO_NETWORKS.update(f"<server-{n}>" for n in gen.no_networks)
    NO_NETWORKS_NAMES.clear()
    NO_NETWORKS_NAMES.update(gen.no_networks_names)
    NO_NETWORKS_MULTI.clear()
    NO_NETWORKS_MULTI.update(gen.no_networks_multi)
    oracle, ours = Side("oracle", oracle_url), Side("openkeel", openkeel_url)

    def progress(name, done):
        if not quiet:
            print(f"  … {name}: {done}/{count} sent", file=sys.stderr)

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        a = pool.submit(drive, oracle, requests, progress)
        b = pool.submit(drive, ours, requests, progress)
        want, got = a.result(), b.result()
    result = compare(requests, want, got, ({v: k for k, v in oracle.labels.items()},
                                           {v: k for k, v in ours.labels.items()}))
    result.update(requests=requests, elapsed=time.monotonic() - started, seed=seed, count=count,
                  settle={"oracle": oracle.settle_time, "openkeel": ours.settle_time},
                  stuck={"oracle": {oracle.normalise(k): v for k, v in oracle.stuck.items()},
                         "openkeel": {ours.normalise(k): v for k, v in ours.stuck.items()}})
    return result


def report(result: dict, max_print: int) -> None:
    mism, expl = result["mismatches"], result["explained"]
    print(f"servers API differential (seed {result['seed']}): {result['count']} requests over "
          f"{len(result['per_kind'])} route+verb pairs, {result['identical']} identical, {len(expl)} explained, "
          f"{len(mism)} mismatched ({result['elapsed']:.0f} s; waiting for tasks to end: oracle "
          f"{result['settle']['oracle']:.0f} s, OpenKeel {result['settle']['openkeel']:.0f} s)")
    for side, stuck in result["stuck"].items():
        for server, (status, task) in stuck.items():
            print(f"  STUCK on {side}: {server} stayed {status} with task {task} (waited 30 s)")
    for kind in sorted(result["per_kind"]):
        total, same, explained = result["per_kind"][kind]
        print(f"  {kind:52s} {same:5d}/{total:<5d} identical" + (f", {explained} explained" if explained else ""))
    reasons: dict[str, int] = {}
    for e in expl:
        reasons[e["reason"]] = reasons.get(e["reason"], 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"  explained {n:4d}×: {reason}")
    for m in mism[:max_print]:
        print(f"\n#{m['index']} {m['request']}")
        for field, (want, got) in m["diff"].items():
            print(f"  {field}: oracle {_short(want)}")
            print(f"  {' ' * len(field)}  ours   {_short(got)}")
    if len(mism) > max_print:
        print(f"\n… {len(mism) - max_print} more mismatches (raise --max-print or use --json)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle", help="base URL of a FRESH servers oracle (default: start one)")
    parser.add_argument("--oracle-port", type=int, default=35020, help="port for the oracle this starts")
    parser.add_argument("--openkeel", help="base URL of a FRESH OpenKeel with the fixture images and flavors "
                                           "(default: start one)")
    parser.add_argument("--openkeel-port", type=int, default=35030,
                        help="port for the OpenKeel API this starts; its image service and built-in cluster take "
                             "the next two (0: free ports)")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--max-print", type=int, default=100)
    parser.add_argument("--json", help="write every mismatch to this file")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    started = []
    try:
        oracle_url = args.oracle
        if not oracle_url:
            oracle = Oracle(args.oracle_port)
            started.append(oracle)
            oracle.start()
            oracle_url = oracle.url
        openkeel_url = args.openkeel
        if not openkeel_url:
            ours = OpenKeel(args.openkeel_port or None)
            started.append(ours)
            ours.start(oracle_flavors(oracle_url))
            openkeel_url = ours.url
        result = run(oracle_url, openkeel_url, args.count, args.seed, args.quiet)
        report(result, args.max_print)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(result["mismatches"], indent=1, ensure_ascii=False,
                                                          default=str))
        return 0 if not result["mismatches"] and not any(result["stuck"].values()) else 1
    finally:
        for server in reversed(started):
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
