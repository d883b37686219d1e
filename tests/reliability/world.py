"""The cloud the reliability runs attack: the API app on one database with a few objects of each
kind (public and private flavors, an extra spec, a key pair, servers of two projects with a tag and
metadata), which ``restock()`` puts back after a run deleted them."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import tempfile
import threading
import time
from collections.abc import Iterator

import sqlalchemy as sa

from openkeel_compute import policies
from openkeel_compute.api.deploy import build_services, deploy
from openkeel_compute.compute import console
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.db.models import INSTANCES
from tests.conftest import make_conf
from tests.processes import children, stop_group
from tests.wsgi_client import Client

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
IMAGE = "7f0b5a52-33a6-4b8e-9d3c-5e1a2b3c4d5e"



def _dbapi_errors() -> tuple[type[BaseException], ...]:
    """The database drivers' own error base classes (those installed)."""
    errors: list[type[BaseException]] = []
    for module, name in (("pymysql", "Error"), ("MySQLdb", "Error"), ("psycopg", "Error"), ("psycopg2", "Error")):
        try:
            errors.append(getattr(__import__(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


_DBAPI_ERRORS = _dbapi_errors()

class Answer:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


def call(app, method: str, path: str, *, query: str = "", headers: dict | None = None, body: bytes = b"",
         chunked: bool = False) -> Answer:
    """One WSGI request; ``path`` is the decoded path (any Unicode), as a server would pass it."""
    raw_path = path.encode("utf-8", "surrogatepass").decode("latin-1")  # WSGI's str-of-bytes
    result = Client(app, host="127.0.0.1:8774").request(method, raw_path, query=query or "", headers=headers,
                                                        body=body, chunked=chunked)
    return Answer(result.status_code, result.header_list, result.content)


def api(app, method: str, path: str, token: str = ADMIN, body=None, version: str = "2.latest") -> Answer:
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version.replace('2.latest', 'latest')}"}
    raw = b""
    if body is not None:
        raw = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    return call(app, method, "/v2.1" + path, headers=headers, body=raw)


@dataclasses.dataclass
class WriteLoad:
    """What the writers of an outage run counted: requests, acknowledged writes, the slowest answer."""

    requests: int = 0
    slowest_answer_seconds: float = 0.0
    acknowledged_ids: list[str] = dataclasses.field(default_factory=list, repr=False)

    @property
    def acknowledged(self) -> int:
        return len(self.acknowledged_ids)

    def heard(self, flavorid: str | None, status: int, seconds: float) -> None:
        """Count one answer (under the caller's lock)."""
        self.requests += 1
        self.slowest_answer_seconds = max(self.slowest_answer_seconds, seconds)
        if status == 200 and flavorid is not None:
            self.acknowledged_ids.append(flavorid)


def create_flavors(world: World, prefix: str, stop, record, pause: float = 0.0) -> None:
    """Create flavors ``prefix-0``, ``prefix-1``, … until ``stop`` is set; ``record(flavorid, status,
    sent_at, seconds)`` hears of each answer (a writer thread of the outage runs)."""
    n = 0
    while not stop.is_set():
        flavorid = f"{prefix}-{n}"
        n += 1
        sent_at = time.monotonic()
        answer = api(world.app, "POST", "/flavors", body={"flavor": {"name": flavorid, "id": flavorid, "ram": 64,
                                                                     "vcpus": 1, "disk": 0}})
        record(flavorid, answer.status, sent_at, time.monotonic() - sent_at)
        if pause or answer.status != 200:
            time.sleep(pause or 0.05)


def server_writes(world: World, prefix: str, stop, record, pause: float = 0.0) -> None:
    """Server writes until ``stop`` is set, as a writer thread of the outage runs: boot a server
    (``prefix-0``, …; acknowledged: 202, heard by its uuid), then set a metadata item on it and
    stop it; ``record(id, status, sent_at, seconds)`` hears of each answer. The owner's quota must
    allow it (``unlimited_quota``)."""
    n = 0
    while not stop.is_set():
        name = f"{prefix}-{n}"
        n += 1
        sent_at = time.monotonic()
        answer = api(world.app, "POST", "/servers", token=OWNER, version="2.37", body={"server": {
            "name": name, "imageRef": IMAGE, "flavorRef": FLAVOR, "networks": "none"}})
        uuid = answer.json()["server"]["id"] if answer.status == 202 else name
        record(uuid, 200 if answer.status == 202 else answer.status, sent_at, time.monotonic() - sent_at)
        if answer.status == 202:
            for method, path, body in (("PUT", f"/servers/{uuid}/metadata/k", {"meta": {"k": name}}),
                                       ("POST", f"/servers/{uuid}/action", {"os-stop": None})):
                sent_at = time.monotonic()
                got = api(world.app, method, path, token=OWNER, body=body)
                record(None, got.status, sent_at, time.monotonic() - sent_at)
        if pause or answer.status != 202:
            time.sleep(pause or 0.05)


def unlimited_quota(world: World, project: str = "demo") -> None:
    got = api(world.app, "PUT", f"/os-quota-sets/{project}", body={"quota_set": {
        "instances": -1, "cores": -1, "ram": -1}})
    assert got.status == 200, got.body


class World:
    """An app on ``database_url`` with its objects; ``engine`` is the service's own engine."""

    def __init__(self, database_url: str, state: pathlib.Path, **sections):
        policies.reset()
        self.database_url, self.state = database_url, state
        # an image service for the image proxy (/images) and boots: the development one, with one image
        self.images = _image_service(state / "images")
        sections.setdefault("glance", {"api_servers": self.images_url, "num_retries": "0"})
        self.conf = make_conf(state, database={"connection": database_url}, **sections)
        self.engine = db_api.get_engine(self.conf)
        migration.sync(self.engine)
        self.services = build_services(self.conf)
        self.app = deploy(self.conf, self.services)
        self.restock()
        # The controller's half of os-getConsoleOutput (the API waits for it): the console log read from
        # the cluster, here a fixed text answered as compute/console.py answers it.
        self._stop = threading.Event()
        self._console = threading.Thread(target=self._answer_consoles, daemon=True)
        self._console.start()

    def _answer_consoles(self) -> None:
        text = b"[    0.000000] Linux version 6.1.0\r\nsrv login: \r\n"
        while not self._stop.wait(0.01):
            for uuid in (SERVER, SERVER_OTHER):
                try:
                    with db_api.reader(self.engine) as conn:
                        request = console.pending(conn, uuid)
                    if request is not None:
                        with db_api.transaction(self.engine) as conn:
                            console.answer(conn, request, output=console.as_text(console.tail(text, request.length)))
                except (sa.exc.SQLAlchemyError, OSError, *_DBAPI_ERRORS):
                    # A database stopped under a restart run: answered once it is back. A connection
                    # that died while it was returned to the pool raises the driver's own error
                    # (pymysql's OperationalError from the isolation-level reset), not SQLAlchemy's;
                    # it ended this thread, and every console request after it waited in vain.
                    continue

    def restock(self) -> None:
        """Create what a run may have deleted; what exists already answers 409 and stays."""
        from tests.api.servers import oracle_state as servers

        app = self.app
        _register_image(self.state / "images")
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
        # no task (a run's DELETE leaves "deleting": no controller finishes it), active, unlocked
        with db_api.transaction(self.engine) as conn:
            conn.execute(sa.update(INSTANCES).where(INSTANCES.c.uuid.in_((SERVER, SERVER_OTHER)),
                                                    INSTANCES.c.deleted == 0)
                         .values(task_state=None, vm_state="active", locked=False, locked_by=None))

    @property
    def images_url(self) -> str:
        return f"http://127.0.0.1:{self.images.server_port}"

    def close(self) -> None:
        self.images.shutdown()
        self.images.server_close()
        self._stop.set()
        self._console.join(2)
        if self.services.notifier is not None:  # its broker connections and their heartbeat thread
            self.services.notifier.close(0)
        db_api.dispose_all()
        policies.reset()


def _register_image(directory: pathlib.Path) -> None:
    from openkeel_compute.images import local

    disk = directory.parent / "image.raw"
    if not disk.exists():
        disk.write_bytes(b"\0" * 4096)
    if not (directory / f"{IMAGE}.json").exists():
        local.register(directory, disk, name="fz-image", image_id=IMAGE, properties={"fz-prop": "v"})


def _image_service(directory: pathlib.Path):
    from openkeel_compute.images import local

    _register_image(directory)
    server = local.serve(str(directory), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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


@contextlib.contextmanager
def served(world: World, port: int, workers: int = 2, extra: str = "") -> Iterator[tuple[str, int]]:
    """``openkeel-compute serve`` with ``workers`` workers on the world's database; yields (host, port).

    The world's objects are the server's (one database); ``world.restock()`` restocks both.
    """
    import os
    import subprocess
    import sys
    import urllib.request

    conf = world.state / f"serve-{port}.conf"
    conf.write_text(f"[DEFAULT]\nstate_path = {world.state}\n[api]\nauth_strategy = noauth2\n"
                    f"[database]\nconnection = {world.database_url}\n"
                    f"[glance]\napi_servers = {world.images_url}\nnum_retries = 0\n{extra}")
    log = world.state / f"serve-{port}.log"
    command = [sys.executable, "-m", "openkeel_compute.cmd.main", "serve", "--config-file", str(conf),
               "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    with open(log, "wb") as out:
        # the tree under test (pytest's path), not whichever copy the environment installed
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"serve did not answer on {port}") from None
                time.sleep(0.2)
        if workers > 1:  # the supervisor and its workers, all up (each answers on the one port)
            deadline = time.monotonic() + 60
            while len(children(proc.pid)) < workers:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"serve started {len(children(proc.pid))} of {workers} workers")
                time.sleep(0.1)
        world.serve_process = proc  # for a run that kills it
        yield "127.0.0.1", port
    finally:
        stop_group(proc, timeout=30)
