"""Fixtures: the built-in cluster on a real port (the emulator), a migrated database, catalogue helpers."""

from __future__ import annotations

import pytest

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.conf.kubevirt import mapping_options
from openkeel_compute.controller.engine import Controller
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.kube import Retry, make_client
from openkeel_compute.controller.service import settings_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator import Delays, Emulator
from tests.conftest import make_conf

MANAGED = {"app.kubernetes.io/managed-by": "openkeel"}
CIT, CPREF = "VirtualMachineClusterInstancetype", "VirtualMachineClusterPreference"
IT, PREF = "VirtualMachineInstancetype", "VirtualMachinePreference"


@pytest.fixture
def apiserver():
    server = Emulator(delays=Delays.fast(), tick=0.01).start()
    yield server
    server.stop()


@pytest.fixture
def kube(apiserver):
    """A lightkube client of the built-in cluster."""
    client = make_client(apiserver.kubeconfig())
    yield client
    client.close()


@pytest.fixture
def conf(tmp_path):
    conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"})
    migration.sync(db_api.get_engine(conf))
    yield conf
    db_api.dispose_all()


@pytest.fixture
def db(conf):
    return db_api.get_engine(conf)


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


@pytest.fixture
def cat(db):
    return Catalogue(db)


def backend_for(server: Emulator, retries: int = 3) -> Gateway:
    return Gateway(make_client(server.kubeconfig(), timeout=5), Retry(retries, 0.01))


def controller_for(conf, server: Emulator, **kwargs) -> Controller:
    engine = db_api.get_engine(conf)
    return Controller(engine, backend_for(server), mapping_options(conf), settings_from(conf), **kwargs)


@pytest.fixture
def ctl(conf, apiserver):
    controller = controller_for(conf, apiserver)
    yield controller
    controller.backend.close()


def add_namespaces(server: Emulator, *names: str) -> None:
    for name in names:
        server.handler.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
