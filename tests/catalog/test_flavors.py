"""catalog/flavors.py on its own, on every database: create and the database's duplicate checks, access
lists and what a project sees, extra specs, description, destroy, lists, and the outbox row each change
writes for the controller. The API's flavor tests (tests/api/test_flavor_*.py) and the differentials
against Nova stay where they are; tests/db/test_backends.py drives the same catalogue through the API."""

from __future__ import annotations

import uuid as uuidlib

import pytest
from sqlalchemy import select

from openkeel_compute.catalog import errors
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import operations
from tests.databases import ENGINES, throwaway_database

ADMIN = catalog.Caller(project_id="admin", is_admin=True)


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, tmp_path_factory):
    with throwaway_database(request.param, tmp_path_factory.mktemp("db")) as url:
        engine = db_api.make_engine(url)
        migration.sync(engine)
        yield engine
        engine.dispose()


@pytest.fixture
def fid() -> str:
    """A flavor id (and name) of the test's own: tests share one database per engine."""
    return f"f-{uuidlib.uuid4().hex[:12]}"


def _create(engine, flavorid: str, **fields) -> dict:
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=fields.pop("name", flavorid), memory_mb=fields.pop("memory_mb", 512),
                       vcpus=1, root_gb=1, flavorid=flavorid, **fields)
        return catalog.get(conn, flavorid)


def _outbox(engine, flavorid: str) -> list[tuple[str, dict | None]]:
    with db_api.reader(engine) as conn:
        rows = conn.execute(select(models.OUTBOX.c.operation, models.OUTBOX.c.payload)
                            .where(models.OUTBOX.c.kind == operations.FLAVOR, models.OUTBOX.c.object_id == flavorid)
                            .order_by(models.OUTBOX.c.id))
        return [(r[0], r[1]) for r in rows]


def test_create_then_get_and_one_outbox_row(engine, fid):
    flavor = _create(engine, fid, memory_mb=1024, description="d")
    assert (flavor["flavorid"], flavor["name"], flavor["memory_mb"], flavor["is_public"], flavor["disabled"]) \
        == (fid, fid, 1024, True, False)
    assert _outbox(engine, fid) == [(operations.UPSERT, None)]


def test_the_database_refuses_a_second_name_or_id(engine, fid):
    _create(engine, fid)
    with pytest.raises(errors.FlavorExists), db_api.transaction(engine) as conn:
        catalog.create(conn, name=fid, memory_mb=1, vcpus=1, root_gb=1, flavorid=f"{fid}-other")
    with pytest.raises(errors.FlavorIdExists), db_api.transaction(engine) as conn:
        catalog.create(conn, name=f"{fid}-other", memory_mb=1, vcpus=1, root_gb=1, flavorid=fid)


def test_a_generated_id_when_none_is_given(engine, fid):
    with db_api.transaction(engine) as conn:
        created = catalog.create(conn, name=fid, memory_mb=1, vcpus=1, root_gb=1)
    assert uuidlib.UUID(created["flavorid"])


def test_a_private_flavor_is_seen_by_the_projects_of_its_access_list(engine, fid):
    flavor = _create(engine, fid, is_public=False)
    alice, bob = catalog.Caller("alice", False), catalog.Caller("bob", False)
    with db_api.transaction(engine) as conn:
        assert catalog.add_access(conn, flavor, "alice") == ["alice"]
    with db_api.reader(engine) as conn:
        assert catalog.get(conn, fid, alice)["flavorid"] == fid and catalog.get(conn, fid, ADMIN)
        with pytest.raises(errors.FlavorNotFound):
            catalog.get(conn, fid, bob)
        assert catalog.access_list(conn, fid)[1] == ["alice"]
    with pytest.raises(errors.FlavorAccessExists), db_api.transaction(engine) as conn:
        catalog.add_access(conn, flavor, "alice")
    with db_api.transaction(engine) as conn:
        assert catalog.remove_access(conn, flavor, "alice") == []
    with pytest.raises(errors.FlavorAccessNotFound), db_api.transaction(engine) as conn:
        catalog.remove_access(conn, flavor, "alice")
    with db_api.reader(engine) as conn, pytest.raises(errors.FlavorNotFound):
        catalog.get(conn, fid, alice)


def test_extra_specs_are_upserted_and_deleted_one_key_at_a_time(engine, fid):
    flavor = _create(engine, fid)
    with db_api.transaction(engine) as conn:
        catalog.set_extra_specs(conn, flavor, {"hw:cpu_policy": "shared", "hw:mem_page_size": "small"})
        catalog.set_extra_specs(conn, flavor, {"hw:cpu_policy": "dedicated"})
    with db_api.transaction(engine) as conn:
        catalog.delete_extra_spec(conn, flavor, "hw:mem_page_size")
    with db_api.reader(engine) as conn:
        assert catalog.extra_specs_of(conn, [flavor["id"]]) == {flavor["id"]: {"hw:cpu_policy": "dedicated"}}
    with pytest.raises(errors.ExtraSpecNotFound), db_api.transaction(engine) as conn:
        catalog.delete_extra_spec(conn, flavor, "hw:mem_page_size")


def test_a_description_set_again_changes_nothing(engine, fid):
    _create(engine, fid, description="one")
    with db_api.transaction(engine) as conn:
        changed = catalog.update_description(conn, fid, "two")
    assert changed["description"] == "two" and changed["updated_at"] is not None
    with db_api.transaction(engine) as conn:
        again = catalog.update_description(conn, fid, "two")
    assert again["updated_at"] == changed["updated_at"]


def test_destroy_returns_the_flavor_as_it_was_and_tells_the_controller(engine, fid):
    flavor = _create(engine, fid, is_public=False)
    with db_api.transaction(engine) as conn:
        catalog.add_access(conn, flavor, "alice")
        catalog.set_extra_specs(conn, flavor, {"k": "v"})
    with db_api.transaction(engine) as conn:
        gone = catalog.destroy(conn, fid)
    assert (gone["projects"], gone["extra_specs"]) == (["alice"], {"k": "v"})
    assert _outbox(engine, fid)[-1] == (operations.DELETE, {"is_public": False, "projects": ["alice"]})
    with db_api.reader(engine) as conn:
        assert catalog.get_or_none(conn, fid) is None
        assert catalog.extra_specs_of(conn, [flavor["id"]]).get(flavor["id"], {}) == {}
    with pytest.raises(errors.FlavorNotFound), db_api.transaction(engine) as conn:
        catalog.destroy(conn, fid)


def test_a_list_filters_sorts_and_pages(engine, fid):
    for i, ram in enumerate((4096, 8192, 16384)):
        _create(engine, f"{fid}-{i}", memory_mb=ram)
    _create(engine, f"{fid}-hidden", memory_mb=32768, is_public=False)
    query = catalog.ListQuery(min_memory_mb=4096, name_regex=f"^{fid}", sort_key="memory_mb", sort_dir="desc")
    with db_api.reader(engine) as conn:
        listed = [f["flavorid"] for f in catalog.list_flavors(conn, catalog.Caller("bob", False), query)]
        assert listed == [f"{fid}-2", f"{fid}-1", f"{fid}-0"]  # the private one is not bob's
        query.limit, query.marker = 1, f"{fid}-2"
        assert [f["flavorid"] for f in catalog.list_flavors(conn, catalog.Caller("bob", False), query)] \
            == [f"{fid}-1"]
        query.marker = f"{fid}-missing"
        with pytest.raises(errors.MarkerNotFound):
            catalog.list_flavors(conn, catalog.Caller("bob", False), query)
