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


def test_every_change_of_the_flavor_tables_raises_the_generation_and_nothing_else_does(engine):
    import sqlalchemy as sa

    from openkeel_compute.catalog import flavors as catalog
    from openkeel_compute.db import models

    migration.sync(engine)

    def generation():
        with db_api.reader(engine) as conn:
            return catalog.generation(conn)

    def changes(statement):
        before = generation()
        with db_api.transaction(engine) as conn:
            conn.execute(statement)
        return generation() - before

    f, s, p = models.FLAVORS, models.FLAVOR_EXTRA_SPECS, models.FLAVOR_PROJECTS
    assert generation() == 0
    assert changes(sa.insert(f).values(flavorid="a", name="a", memory_mb=1, vcpus=1, root_gb=0, ephemeral_gb=0,
                                       swap=0, rxtx_factor=1.0, disabled=False, is_public=True)) > 0
    with db_api.reader(engine) as conn:
        internal = conn.execute(sa.select(f.c.id)).scalar()
    assert changes(sa.insert(s).values(flavor_id=internal, key="k", value="v")) > 0
    assert changes(sa.insert(p).values(flavor_id=internal, project_id="p")) > 0
    assert changes(sa.update(f).values(disabled=True)) > 0
    assert changes(sa.update(s).values(value="w")) > 0
    assert changes(sa.delete(p)) > 0
    assert changes(sa.delete(s)) > 0
    assert changes(sa.delete(f)) > 0
    # a table the flavor lists do not show leaves it alone
    assert changes(sa.insert(models.OUTBOX).values(kind="flavor", object_id="a", operation="upsert",
                                                   created_at=models.utcnow(), attempts=0)) == 0
    migration.downgrade(engine, "0004")
    with engine.connect() as conn:
        conn.execute(sa.insert(f).values(flavorid="b", name="b", memory_mb=1, vcpus=1, root_gb=0, ephemeral_gb=0,
                                         swap=0, rxtx_factor=1.0, disabled=False, is_public=True))
        conn.commit()
    assert revision.current(engine) == "0004"
