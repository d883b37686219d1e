"""Fixtures of the operator's view: the built-in cluster with nodes, a migrated database of each engine,
the controller's publication of the nodes (compute services) and the API on that database."""

from __future__ import annotations

import pytest

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.controller import compute_services, nodes
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import gateway_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator import Delays, Emulator
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database
from tests.wsgi_client import Client


@pytest.fixture
def cluster():
    server = Emulator(delays=Delays.fast(), tick=0.01, nodes=3, read_images=False).start()  # images never served
    yield server
    server.stop()


@pytest.fixture(params=ENGINES)
def conf(request, tmp_path):
    policies.reset()
    with throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, database={"connection": url})
        migration.sync(db_api.get_engine(conf))
        yield conf
        db_api.dispose_all()
    policies.reset()


@pytest.fixture
def engine(conf):
    return db_api.get_engine(conf)


@pytest.fixture
def gateway(conf, cluster):
    gw = gateway_from(conf, make_client(cluster.kubeconfig()))
    yield gw
    gw.close()


@pytest.fixture
def publish(engine, gateway):
    """One pass of the controller over the nodes: zones and compute services (heartbeat, cordons)."""

    def run():
        nodes.sync(engine, gateway)
        return compute_services.heartbeat(engine, gateway)

    run()
    return run


@pytest.fixture
def api(conf, publish):
    return Client(deploy(conf))
