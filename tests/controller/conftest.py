"""Fixtures: the built-in cluster on a real port (the emulator), a migrated database, the controller and
its loops. The helpers they use are tests/controller/helpers.py."""

from __future__ import annotations

import pytest

from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator import Delays, Emulator
from tests.conftest import make_conf
from tests.controller.helpers import FAST_RETRY, Both, Catalogue, controller_for
from tests.databases import ENGINES, throwaway_database


@pytest.fixture
def apiserver():
    server = Emulator(delays=Delays.fast(), tick=0.01, read_images=False).start()  # image URLs never served
    yield server
    server.stop()


@pytest.fixture
def kube(apiserver):
    """A lightkube client of the built-in cluster."""
    client = make_client(apiserver.kubeconfig())
    yield client
    client.close()


@pytest.fixture(params=ENGINES)
def conf(request, tmp_path):
    """The controller's configuration on a migrated database of each engine: every test of the controller
    writes server state, and PostgreSQL and MariaDB enforce what SQLite does not (lengths, types)."""
    with throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"}, database={"connection": url})
        migration.sync(db_api.get_engine(conf))
        yield conf
        db_api.dispose_all()


@pytest.fixture
def db(conf):
    return db_api.get_engine(conf)


@pytest.fixture
def cat(db):
    return Catalogue(db)


@pytest.fixture
def ctl(conf, apiserver):
    controller = controller_for(conf, apiserver)
    yield controller
    controller.backend.close()


@pytest.fixture
def loop(kube, db, ctl):
    """The flavor pass and a server loop, run together."""
    servers = make_loop(kube, db, retry=FAST_RETRY)
    yield Both(ctl, servers)
    servers.close()
