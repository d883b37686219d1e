"""Migration 0003 (key pairs, quotas, quota classes, node zones) on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import keypairs, quotas
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database

NEW = {"key_pairs", "quotas", "project_user_quotas", "quota_classes", "node_zones"}


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    with throwaway_database(request.param, tmp_path) as url:
        engine = db_api.make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


def test_0003_upgrades_downgrades_to_0002_and_upgrades_again(engine):
    migration.sync(engine)
    assert NEW <= set(sa.inspect(engine).get_table_names())
    migration.downgrade(engine, "0002")
    tables = set(sa.inspect(engine).get_table_names())
    assert not NEW & tables
    assert "instances" in tables
    migration.sync(engine)
    assert migration.current(engine) == migration.head()


def test_key_pair_names_are_unique_per_user_and_exact(engine, tmp_path):
    migration.sync(engine)
    with db_api.transaction(engine) as conn:
        keypairs.create(conn, "u1", "Key", "ssh", "pk", "fp")
        keypairs.create(conn, "u1", "key", "ssh", "pk", "fp")  # names compare by code point everywhere
        keypairs.create(conn, "u2", "Key", "ssh", "pk", "fp")
    with pytest.raises(keypairs.KeyPairExists, match="Key pair 'Key' already exists."), \
            db_api.transaction(engine) as conn:
        keypairs.create(conn, "u1", "Key", "ssh", "pk", "fp")
    with db_api.reader(engine) as conn:
        assert [k["name"] for k in keypairs.list_for_user(conn, "u1")] == ["Key", "key"]
        assert [k["name"] for k in keypairs.list_for_user(conn, "u1", limit=1, marker="Key")] == ["key"]


def test_limits_resolve_user_then_project_then_class_then_option(engine, tmp_path):
    migration.sync(engine)
    conf = make_conf(tmp_path, quota={"cores": 7})
    with db_api.transaction(engine) as conn:
        assert quotas.project_quotas(conn, conf, "p")["cores"]["limit"] == 7
        quotas.set_class_limit(conn, "default", "cores", 9)
        assert quotas.project_quotas(conn, conf, "p")["cores"]["limit"] == 9
        quotas.set_project_limit(conn, "p", "cores", 5)
        quotas.set_project_limit(conn, "p", "cores", 6)  # an update, not a second row
        assert quotas.project_quotas(conn, conf, "p")["cores"]["limit"] == 6
        quotas.set_project_limit(conn, "p", "cores", 2, user_id="u")
        assert quotas.user_quotas(conn, conf, "p", "u")["cores"]["limit"] == 2
        assert quotas.user_quotas(conn, conf, "p", "v")["cores"]["limit"] == 6
        assert quotas.settable(conn, conf, "p", "v")["cores"] == {"minimum": 0, "maximum": 4}
    with db_api.transaction(engine) as conn:
        quotas.lock_project(conn, "p")  # first in its transaction; on MariaDB a sentinel row, never a limit
        assert set(quotas.project_quotas(conn, conf, "p")) == set(quotas.RESOURCES)
        assert quotas.project_quotas(conn, conf, "p")["cores"]["limit"] == 6
        quotas.destroy_project(conn, "p")
        assert quotas.user_quotas(conn, conf, "p", "u")["cores"]["limit"] == 9
    with db_api.reader(engine) as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(models.PROJECT_USER_QUOTAS)).scalar()
    assert rows == 0


def test_a_resize_needs_room_only_for_what_grows(tmp_path):

    conf = make_conf(tmp_path, quota={"cores": 4})
    engine = db_api.make_engine(f"sqlite:///{tmp_path}/r.sqlite")
    migration.sync(engine)
    now = models.utcnow()
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.INSTANCES).values(uuid="u-1", project_id="p", user_id="u", vcpus=3,
                                                        memory_mb=512, locked=False, created_at=now, deleted=0,
                                                        vm_state="active"))
        quotas.check_upsize(conn, conf, "p", "u", {"vcpus": 3, "memory_mb": 512}, {"vcpus": 1, "memory_mb": 4096})
        quotas.check_upsize(conn, conf, "p", "u", {"vcpus": 3, "memory_mb": 512}, {"vcpus": 4, "memory_mb": 512})
        with pytest.raises(quotas.OverQuota) as refused:
            quotas.check_upsize(conn, conf, "p", "u", {"vcpus": 3, "memory_mb": 512}, {"vcpus": 5, "memory_mb": 512})
    assert refused.value.message == "Quota exceeded for cores: Requested 2, but already used 3 of 4 cores"
    engine.dispose()


@pytest.mark.parametrize(("from_placement", "expected"), [(False, (3, 6, 1536)), (True, (3, 2, 512))])
def test_usage_from_placement_counts_only_what_holds_resources(tmp_path, from_placement, expected):
    conf = make_conf(tmp_path, quota={"count_usage_from_placement": str(from_placement).lower()})
    engine = db_api.make_engine(f"sqlite:///{tmp_path}/u.sqlite")
    migration.sync(engine)
    now = models.utcnow()
    rows = [("a", "active", "node-1"), ("b", "shelved_offloaded", None), ("c", "error", None),
            ("d", "soft-delete", "node-1")]
    with db_api.transaction(engine) as conn:
        for uuid, vm_state, node_name in rows:
            conn.execute(sa.insert(models.INSTANCES).values(
                uuid=uuid, project_id="p", user_id="u", vcpus=2, memory_mb=512, vm_state=vm_state, node=node_name,
                locked=False, created_at=now, deleted=0))
    with db_api.reader(engine) as conn:
        used = quotas.counts(conn, conf, "p")
    assert (used["instances"], used["cores"], used["ram"]) == expected
    engine.dispose()
