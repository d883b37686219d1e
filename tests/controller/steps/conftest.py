"""The steps' unit tests: a small fake of the cluster gateway (tests/controller/fake_cluster.py), the context
a step runs in, on the controller tests' database (tests/controller/conftest.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from openkeel_compute.controller.compose import Composer
from openkeel_compute.controller.resize_allocations import Allocations
from openkeel_compute.controller.settings import ServerSettings
from openkeel_compute.controller.steps.base import Context
from tests.controller.fake_cluster import FakeCluster


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def ctx(db, cluster) -> Context:
    settings = ServerSettings()
    return Context(db, cluster, settings, Composer(settings.options), Allocations(None),  # type: ignore[arg-type]
                   lambda: dt.datetime(2030, 1, 1))
