"""serve's schema check without Alembic answers what Alembic answers, on every engine."""

from __future__ import annotations

import pytest

from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, revision
from tests.databases import ENGINES, throwaway_database


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    with throwaway_database(request.param, tmp_path) as url:
        engine = db_api.make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


def test_head_is_alembics_head():
    assert revision.head() == migration.head()


def test_current_follows_alembic_from_empty_to_head(engine):
    assert revision.current(engine) is None
    assert migration.current(engine) is None
    migration.sync(engine, "0002")
    assert revision.current(engine) == migration.current(engine) == "0002"
    migration.sync(engine)
    assert revision.current(engine) == migration.current(engine) == revision.head()


def _script(path, rev, down):
    path.write_text(f"revision: str = {rev!r}\ndown_revision: str | None = {down!r}\n")


def test_head_of_a_chain_and_of_a_split(tmp_path):
    _script(tmp_path / "a.py", "a", None)
    _script(tmp_path / "b.py", "b", "a")
    (tmp_path / "notes.txt").write_text("revision = 'x'\n")
    assert revision.head(str(tmp_path)) == "b"
    _script(tmp_path / "c.py", "c", "a")
    with pytest.raises(RuntimeError, match="2 heads"):
        revision.head(str(tmp_path))
    (tmp_path / "m.py").write_text("revision = 'm'\ndown_revision = ('b', 'c')\n")
    assert revision.head(str(tmp_path)) == "m"
