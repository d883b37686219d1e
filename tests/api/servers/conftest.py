"""Fixtures of the server API tests: the database, the local image service with the oracle's images, the
recording's private flavors (a module may define its own)."""

from __future__ import annotations

import pytest

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.db import api as db_api
from tests.api.servers.helpers import local_image_service
from tests.conftest import conf_on


@pytest.fixture
def engine(app, conf):
    return db_api.get_engine(conf)


@pytest.fixture
def images(conf, tmp_path):
    """The development image service with the oracle's image (active) and a queued one."""
    with local_image_service(conf, tmp_path):
        yield


@pytest.fixture
def flavors(engine):
    """The recording's flavors: priv-small shared with demo, priv-hidden shared with nobody."""
    with db_api.transaction(engine) as conn:
        small = catalog.create(conn, name="priv.small", memory_mb=512, vcpus=1, root_gb=1, flavorid="priv-small",
                               is_public=False)
        catalog.add_access(conn, catalog.get(conn, "priv-small"), "demo")
        catalog.create(conn, name="priv.hidden", memory_mb=512, vcpus=1, root_gb=1, flavorid="priv-hidden",
                       is_public=False)
    return small


@pytest.fixture
def conf(db_engine, tmp_path):
    """The API's configuration on each engine: these tests write server state, and PostgreSQL and MariaDB
    enforce what SQLite does not (lengths, types, orders of ties)."""
    with conf_on(db_engine, tmp_path) as conf:
        yield conf
