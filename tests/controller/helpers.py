"""Shared helpers of the controller's tests: the catalogue and server rows as the API writes them, the
two loops run together, waits on a server's row, and a controller on the built-in cluster.

Test modules import these (and the fixtures of conftest.py), never each other.
"""

from __future__ import annotations

import time
import uuid as uuidlib
from typing import Any

import pytest
from sqlalchemy import select

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import preconditions
from openkeel_compute.compute.instances import cas, store, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.conf.kubevirt import mapping_options
from openkeel_compute.controller.engine import Controller
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.kube import Retry, make_client
from openkeel_compute.controller.servers import ServerLoop
from openkeel_compute.controller.settings import Settings
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.emulator import Emulator
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database

MANAGED = {"app.kubernetes.io/managed-by": "openkeel"}
CIT, CPREF = "VirtualMachineClusterInstancetype", "VirtualMachineClusterPreference"
IT, PREF = "VirtualMachineInstancetype", "VirtualMachinePreference"
OWNER = Actor("user-1", "project-1", request_id="req-1")
IMAGE = "6e0a6c4e-3a69-4c5f-9f57-1f6b0d7c8a10"
#: the gateway's retry policy in tests: an outage test must not wait out production back-offs
FAST_RETRY = Retry(3, 0.01)


@pytest.fixture(params=ENGINES, name="conf")
def every_engine_conf(request, tmp_path):
    """The fixture ``conf`` on each supported database (import it into a module to run that module's tests
    on every engine): the loop's compare-and-swap, outbox and JSON columns are engine-bound."""
    with throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"}, database={"connection": url})
        migration.sync(db_api.get_engine(conf))
        yield conf
        db_api.dispose_all()


class Catalogue:
    """Catalogue changes through the catalogue functions the API uses: each writes its outbox row."""

    def __init__(self, engine) -> None:
        self.engine = engine

    def create(self, flavorid: str, *, public: bool = True, access: tuple[str, ...] = (), vcpus: int = 1,
               ram: int = 512, description: str | None = None, specs: dict | None = None) -> None:
        with db_api.transaction(self.engine) as conn:
            flavor = catalog.create(conn, name=f"name-{flavorid}", memory_mb=ram, vcpus=vcpus, root_gb=1,
                                    flavorid=flavorid, is_public=public, description=description)
            for project in access:
                catalog.add_access(conn, flavor, project)
            if specs:
                catalog.set_extra_specs(conn, flavor, specs)

    def _flavor(self, conn, flavorid):
        return catalog.get(conn, flavorid)

    def add_access(self, flavorid: str, project: str) -> None:
        with db_api.transaction(self.engine) as conn:
            catalog.add_access(conn, self._flavor(conn, flavorid), project)

    def remove_access(self, flavorid: str, project: str) -> None:
        with db_api.transaction(self.engine) as conn:
            catalog.remove_access(conn, self._flavor(conn, flavorid), project)

    def describe(self, flavorid: str, description: str | None) -> None:
        with db_api.transaction(self.engine) as conn:
            catalog.update_description(conn, flavorid, description)

    def delete(self, flavorid: str) -> None:
        with db_api.transaction(self.engine) as conn:
            catalog.destroy(conn, flavorid)

    def pending(self) -> list:
        from openkeel_compute.controller import outbox

        return outbox.pending_for(self.engine)


def backend_for(server: Emulator, retries: int = 3) -> Gateway:
    return Gateway(make_client(server.kubeconfig(), timeout=5), Retry(retries, 0.01))


def controller_for(conf, server: Emulator, **kwargs) -> Controller:
    engine = db_api.get_engine(conf)
    return Controller(engine, backend_for(server), mapping_options(conf), Settings.from_conf(conf), **kwargs)


def add_namespaces(server: Emulator, *names: str) -> None:
    for name in names:
        server.handler.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


class Both:
    """The controller's two loops, flavors first: a server's VM refers to its flavor's instancetype."""

    def __init__(self, flavors, servers: ServerLoop) -> None:
        self.flavors, self.servers = flavors, servers

    def run_once(self) -> dict[str, str]:
        self.flavors.run_once()
        return self.servers.run_once()

    def process_outbox(self) -> dict[str, str]:
        self.flavors.run_once()
        return self.servers.process_outbox()


def boot(engine, **system_metadata) -> str:
    """A server row in BUILD with its create row, as POST /servers writes them (a flavor of its own)."""
    flavorid = f"f-{uuidlib.uuid4().hex[:8]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=512, vcpus=1, root_gb=1, flavorid=flavorid)
        flavor = catalog.get(conn, flavorid)
        row = store.create(conn, actor=OWNER, flavor=flavor, extra_specs={}, display_name="web 1",
                           image_ref=IMAGE,
                           system_metadata={"image_min_disk": "1", "image_disk_format": "qcow2",
                                            **system_metadata})
        updates.outbox(conn, row["uuid"], ops.CREATE, OWNER)
    return row["uuid"]


def action(engine, uuid: str, name: str, operation: str) -> None:
    """What the API does for an action: the compare-and-swap on task_state and the outbox row."""
    with db_api.transaction(engine) as conn:
        if name == "delete":
            cas.begin_delete(conn, uuid, OWNER)
        else:
            cas.begin_action(conn, uuid, preconditions.precondition(name), OWNER)
        updates.outbox(conn, uuid, operation, OWNER)


def row_of(engine, uuid: str) -> dict[str, Any]:
    with db_api.reader(engine) as conn:
        return store.get(conn, uuid, read_deleted="yes")


def until(loop: Any, engine, uuid: str, done, timeout: float = 20.0) -> dict[str, Any]:
    """Run ``loop`` until the server's row satisfies ``done`` (or the time is up); its row."""
    deadline = time.monotonic() + timeout
    while True:
        loop.run_once()
        row = row_of(engine, uuid)
        if done(row) or time.monotonic() > deadline:
            return row
        time.sleep(0.05)


def pending(engine) -> list:
    with db_api.reader(engine) as conn:
        return list(conn.execute(select(models.OUTBOX.c.id).where(models.OUTBOX.c.kind == ops.SERVER,
                                                                  models.OUTBOX.c.done_at.is_(None))))


def outbox_rows(engine, uuid: str) -> list[dict[str, Any]]:
    """The server's outbox rows, in order: operation, attempts, last_error, done."""
    table = models.OUTBOX
    with db_api.reader(engine) as conn:
        return [{"operation": r.operation, "attempts": r.attempts, "last_error": r.last_error,
                 "done": r.done_at is not None}
                for r in conn.execute(select(table).where(table.c.object_id == uuid).order_by(table.c.id))]


def active(row) -> bool:
    return row["vm_state"] == states.ACTIVE and row["task_state"] is None
