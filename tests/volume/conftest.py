from __future__ import annotations

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.databases import ENGINES, throwaway_database
from tests.server_world import image_service, server_world
from tests.volume.fake_cinder import FakeCinder


@pytest.fixture
def cinder():
    """The fake Cinder on a free port; ``cinder.url`` is its v3 endpoint (no project in the path)."""
    fake = FakeCinder()
    server, url = fake.serve()
    fake.url = url
    yield fake
    server.shutdown()
    server.server_close()


@pytest.fixture(params=ENGINES)
def volume_world(request, tmp_path, cinder):
    """(client, controller, cluster) of a controller with the fake Cinder, on each database engine, with a
    flavor ``small``; both notification formats go to oslo.messaging's in-memory driver."""
    from oslo_messaging.notify import _impl_test as in_memory_driver

    from openkeel_compute.notifications import sender, server_events

    policies.reset()
    in_memory_driver.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url},
                         cinder={"auth_type": "admin_token", "endpoint": cinder.url, "token": "cinder-admin",
                                 "endpoint_template": cinder.url + "/v3/%(project_id)s"},
                         notifications={"notification_format": "both"},
                         oslo_messaging_notifications={"driver": "test", "transport_url": "fake:/"})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            got = client.post("/v2.1/flavors", headers=admin(), json_body={
                "flavor": {"name": "small", "ram": 512, "vcpus": 1, "disk": 1, "id": "small"}})
            assert got.status_code == 200, got.text
            yield client, controller, cluster
    server_events.install(None)
    sender.close_all(0)
    in_memory_driver.reset()


@pytest.fixture
def notified():
    """The event types and payloads the in-memory notification driver got so far."""
    from oslo_messaging.notify import _impl_test as in_memory_driver

    from openkeel_compute.notifications import sender

    def read() -> list[tuple[str, str, dict]]:
        assert sender.drain_all(10)
        return [(m["event_type"], priority, m["payload"]) for _ctx, m, priority, _retry in in_memory_driver.NOTIFICATIONS]

    return read


@pytest.fixture(params=ENGINES)
def controller_world(request, tmp_path, cinder):
    """The API and the controller on the built-in cluster, Cinder the fake one, on each engine; a
    flavor ``small``. Yields (client, controller, cluster, conf); ``request.param`` options of
    [DEFAULT] come from the test's ``volume_options`` marker."""
    from openkeel_compute import policies
    from openkeel_compute.controller.service import server_loop_from
    from openkeel_compute.db import api as db_api
    from openkeel_compute.db import migration
    from tests.conftest import admin, make_conf
    from tests.databases import throwaway_database
    from tests.server_world import image_service, server_world

    marker = request.node.get_closest_marker("volume_options")
    options = marker.kwargs if marker else {}
    policies.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url},
                         cinder={"auth_type": "admin_token", "endpoint": cinder.url, "token": "cinder-admin",
                                 "endpoint_template": cinder.url + "/v3/%(project_id)s"}, **options)
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            got = client.post("/v2.1/flavors", headers=admin(), json_body={
                "flavor": {"name": "small", "ram": 512, "vcpus": 1, "disk": 1, "id": "small"}})
            assert got.status_code == 200, got.text
            yield client, controller, cluster, conf
    db_api.dispose_all()
    policies.reset()


def pytest_configure(config):
    config.addinivalue_line("markers", "volume_options(**groups): configuration of controller_world")


@pytest.fixture(scope="session")
def real_cinder_dir():
    """cinder-up.sh's services dir of a real Cinder 29: OPENKEEL_TEST_CINDER_DIR's, or one started once for
    the session from ../shared's recipes (tests/volume/shared_cinder.py); skips with the reason when there
    is none."""
    from tests.volume.shared_cinder import session_cinder

    yield from session_cinder()
