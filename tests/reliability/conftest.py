"""One reliability World per database engine for the whole directory: building the schema is the
dearest step on a database server, so the fuzzer, the races and the input cases share it."""

from __future__ import annotations

import pytest

from tests.databases import ENGINES
from tests.reliability import world as w


@pytest.fixture(scope="package", params=ENGINES)
def world(request):
    with w.world_on(request.param) as built:
        built.engine_name = request.param
        yield built


@pytest.fixture(scope="package")
def sqlite_world():
    with w.world_on("sqlite") as built:
        built.engine_name = "sqlite"
        yield built
