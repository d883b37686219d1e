"""Fixtures of the key pair, quota and zone tests."""

from __future__ import annotations

import pytest

from tests.conftest import conf_on


@pytest.fixture
def conf(db_engine, tmp_path):
    """The API's configuration on each engine: these tests write server state, and PostgreSQL and MariaDB
    enforce what SQLite does not (lengths, types, orders of ties)."""
    with conf_on(db_engine, tmp_path) as conf:
        yield conf
