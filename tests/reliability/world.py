"""The cloud the reliability runs attack: the API app on one database with a few objects of each
kind (public and private flavors, an extra spec, a key pair, servers of two projects with a tag and
metadata), which ``restock()`` puts back after a run deleted them."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import tempfile
import uuid as uuidlib
from collections.abc import Iterator

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.conf import build_conf
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration

ADMIN = "admin:admin"
OWNER = "demo:demo"  # member of the project that owns the servers and the private flavor's access
OTHER = "eve:other"
SERVER = "d75df558-90bc-45c5-bb8b-1a3198e0bf90"  # project demo
SERVER_OTHER = "5eabadee-b64e-432f-9cbf-ac05e0d66b9f"  # project admin
FLAVOR = "fz-public"
FLAVOR_PRIVATE = "fz-private"
SPEC = "fz:key"
KEYPAIR = "fz-kp"
TAG = "fz-tag"
META = "fz-meta"


def conf_for(database_url: str, state: pathlib.Path, **sections):
    """The service configuration of a run: noauth2, the given database, notifications off."""
    lines = ["[DEFAULT]", f"state_path = {state}", "[api]", "auth_strategy = noauth2",
             "[database]", f"connection = {database_url}"]
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines.extend(f"{k} = {v}" for k, v in values.items())
    path = state / f"reliability-{uuidlib.uuid4().hex[:8]}.conf"
    path.write_text("\n".join(lines) + "\n")
    return build_conf(["--config-file", str(path)])


class Answer:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name: str) -> str | None:
        found = [v for k, v in self.headers if k.lower() == name.lower()]
        return found[-1] if found else None

    def json(self):
        return json.loads(self.body)


def call(app, method: str, path: str, *, query: str = "", headers: dict | None = None, body: bytes = b"",
         chunked: bool = False) -> Answer:
    """One WSGI request; ``path`` is the decoded path (any Unicode), as a server would pass it."""
    environ = {
        "REQUEST_METHOD": method, "SCRIPT_NAME": "",
        "PATH_INFO": path.encode("utf-8", "surrogatepass").decode("latin-1"),
        "QUERY_STRING": query, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8774", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1:8774", "REMOTE_ADDR": "127.0.0.1", "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
    }
    if chunked:
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
        environ["wsgi.input_terminated"] = True
    elif body or method in ("POST", "PUT"):
        environ["CONTENT_LENGTH"] = str(len(body))
    for name, value in (headers or {}).items():
        key = name.upper().replace("-", "_")
        environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key] = value
    captured: dict = {}

    def start_response(status, response_headers, exc_info=None):
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = list(response_headers)

    chunks = app(environ, start_response)
    try:
        data = b"".join(chunks)
    finally:
        if hasattr(chunks, "close"):
            chunks.close()
    return Answer(captured["status"], captured["headers"], data)


def api(app, method: str, path: str, token: str = ADMIN, body=None, version: str = "2.latest") -> Answer:
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version.replace('2.latest', 'latest')}"}
    raw = b""
    if body is not None:
        raw = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    return call(app, method, "/v2.1" + path, headers=headers, body=raw)


class World:
    """An app on ``database_url`` with its objects; ``engine`` is the service's own engine."""

    def __init__(self, database_url: str, state: pathlib.Path, **sections):
        policies.reset()
        self.conf = conf_for(database_url, state, **sections)
        self.engine = db_api.get_engine(self.conf)
        migration.sync(self.engine)
        self.app = deploy(self.conf)
        self.restock()

    def restock(self) -> None:
        """Create what a run may have deleted; what exists already answers 409 and stays."""
        from tests.api.servers import oracle_state as servers

        app = self.app
        api(app, "POST", "/flavors", body={"flavor": {"name": FLAVOR, "id": FLAVOR, "ram": 512, "vcpus": 1,
                                                      "disk": 1}})
        api(app, "POST", "/flavors", body={"flavor": {"name": FLAVOR_PRIVATE, "id": FLAVOR_PRIVATE, "ram": 256,
                                                      "vcpus": 1, "disk": 1, "os-flavor-access:is_public": False}})
        api(app, "POST", f"/flavors/{FLAVOR_PRIVATE}/action", body={"addTenantAccess": {"tenant": "demo"}})
        api(app, "POST", f"/flavors/{FLAVOR}/os-extra_specs", body={"extra_specs": {SPEC: "v"}})
        api(app, "POST", "/os-keypairs", token=OWNER, version="2.10", body={"keypair": {"name": KEYPAIR}})
        for uuid, actor, name in ((SERVER, servers.DEMO, "srv-a"), (SERVER_OTHER, servers.ADMIN, "srv-z")):
            if api(app, "GET", f"/servers/{uuid}").status == 404:
                servers.boot(self.engine, uuid=uuid, name=name, created="2026-12-01T09:55:06Z",
                             updated="2026-12-01T09:55:08Z", launched="2026-12-01T09:55:08.573206",
                             network_info=servers.ADDRESSES, actor=actor)
        api(app, "PUT", f"/servers/{SERVER}/tags/{TAG}", token=OWNER)
        api(app, "PUT", f"/servers/{SERVER}/metadata/{META}", token=OWNER, body={"meta": {META: "v"}})
        api(app, "POST", f"/servers/{SERVER}/action", token=ADMIN, body={"os-resetState": {"state": "active"}})
        api(app, "POST", f"/servers/{SERVER}/action", token=ADMIN, body={"unlock": None})

    def close(self) -> None:
        db_api.dispose_all()
        policies.reset()


@contextlib.contextmanager
def world_on_sqlite(**sections) -> Iterator[World]:
    """A World on a SQLite file, configured with ``sections`` ({section: {option: value}}) too."""
    with tempfile.TemporaryDirectory(prefix="openkeel-reliability-") as tmp:
        state = pathlib.Path(tmp)
        world = World(f"sqlite:///{state}/openkeel.sqlite", state, **sections)
        try:
            yield world
        finally:
            world.close()


@contextlib.contextmanager
def world_on(engine: str) -> Iterator[World]:
    """A World on a throwaway database of ``engine`` (sqlite, postgresql, mariadb)."""
    from tests.databases import throwaway_database

    with tempfile.TemporaryDirectory(prefix="openkeel-reliability-") as tmp:
        state = pathlib.Path(tmp)
        with throwaway_database(engine, state) as url:
            world = World(url, state)
            try:
                yield world
            finally:
                world.close()
