"""compute/resize.py on its own, on every database: the rows a resize, a confirm and a revert write
(the flavor copy's cur/old/new, the migration's status, the old vm_state kept in system metadata, the
outbox) and the controller's ends of them, without the API or a cluster. The end-to-end resize tests
are tests/controller/test_server_resize.py and tests/api/servers/test_resize.py."""

from __future__ import annotations

import json
import uuid as uuidlib

import pytest
from sqlalchemy import select

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import errors, resize
from openkeel_compute.compute.instances import cas, instance_sysmeta, store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import operations, states
from openkeel_compute.model.states import task_states as ts
from openkeel_compute.model.sysmeta import OLD_VM_STATE
from tests.databases import ENGINES, throwaway_database

OWNER = Actor("demo", "demo", request_id="req-resize")
RUNNING, SHUTDOWN = states.power_state.RUNNING, states.power_state.SHUTDOWN


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, tmp_path_factory):
    with throwaway_database(request.param, tmp_path_factory.mktemp("db")) as url:
        engine = db_api.make_engine(url)
        migration.sync(engine)
        yield engine
        engine.dispose()


def _flavor(engine, *, ram: int, vcpus: int) -> dict:
    flavorid = f"f-{uuidlib.uuid4().hex[:12]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=ram, vcpus=vcpus, root_gb=1, flavorid=flavorid)
        return catalog.get(conn, flavorid)


@pytest.fixture
def server(engine):
    """A launched server of a 512 MB, 1 vCPU flavor; ACTIVE on node-1."""
    flavor = _flavor(engine, ram=512, vcpus=1)
    with db_api.transaction(engine) as conn:
        row = store.create(conn, actor=OWNER, flavor=flavor, extra_specs={}, display_name="srv")
        cas.save_state(conn, row["uuid"], vm_state=states.ACTIVE, task_state=None, power_state=RUNNING,
                       launched_at=models.utcnow(), host="openkeel", node="node-1")
    return row["uuid"]


def _row(engine, uuid: str) -> dict:
    with db_api.reader(engine) as conn:
        return store.get(conn, uuid)


def _migration(engine, uuid: str) -> dict:
    with db_api.reader(engine) as conn:
        found = conn.execute(select(models.MIGRATIONS).where(models.MIGRATIONS.c.uuid == uuid)).mappings().one()
        return dict(found)


def _start(engine, uuid: str, *, ram: int = 1024, vcpus: int = 2) -> tuple[str, dict]:
    new = _flavor(engine, ram=ram, vcpus=vcpus)
    with db_api.transaction(engine) as conn:
        migration_uuid = resize.start(conn, _row(engine, uuid), new, {}, OWNER, auto_disk_config=False)
    return migration_uuid, new


def _to_resize_finish(engine, uuid: str) -> None:
    """The controller's way from resize_prep to the step that ends a resize."""
    with db_api.transaction(engine) as conn:
        assert cas.save_state(conn, uuid, expected_task_state=ts.RESIZE_PREP, task_state=ts.RESIZE_FINISH)


def _finished(engine, uuid: str, *, ram: int = 1024, vcpus: int = 2) -> tuple[str, dict]:
    migration_uuid, new = _start(engine, uuid, ram=ram, vcpus=vcpus)
    _to_resize_finish(engine, uuid)
    with db_api.transaction(engine) as conn:
        assert resize.finish(conn, uuid, migration_uuid, power_state=RUNNING, host="node-2")
    return migration_uuid, new


def _copy(engine, uuid: str) -> dict:
    return json.loads(_row(engine, uuid)["flavor"])


def test_start_records_the_request_for_the_controller(engine, server):
    migration_uuid, new = _start(engine, server)
    row = _row(engine, server)
    assert (row["vm_state"], row["task_state"], row["progress"]) == (states.ACTIVE, ts.RESIZE_PREP, 0)
    copy = _copy(engine, server)
    assert copy["old"] == copy["cur"] and copy["new"]["nova_object.data"]["flavorid"] == new["flavorid"]
    assert row["memory_mb"] == 512  # the server keeps its sizes until the resize ends
    migration_row = _migration(engine, migration_uuid)
    assert (migration_row["status"], migration_row["migration_type"], migration_row["new_instance_type_id"]) \
        == ("pre-migrating", "resize", new["id"])
    assert migration_row["source_node"] == migration_row["dest_node"] == "node-1"
    with db_api.reader(engine) as conn:
        assert instance_sysmeta.system_metadata_item(conn, server, OLD_VM_STATE) == states.ACTIVE
        outbox = conn.execute(select(models.OUTBOX).where(models.OUTBOX.c.object_id == server)
                              .order_by(models.OUTBOX.c.id.desc())).mappings().first()
    assert outbox["operation"] == operations.RESIZE
    assert outbox["payload"]["migration"] == migration_uuid and outbox["payload"]["old_vm_state"] == states.ACTIVE


def test_a_second_start_loses_the_compare_and_swap(engine, server):
    _start(engine, server)
    with pytest.raises(errors.InstanceInvalidState):
        _start(engine, server)


def test_finish_makes_the_new_flavor_current_and_keeps_the_old_for_a_revert(engine, server):
    migration_uuid, new = _finished(engine, server, ram=2048, vcpus=4)
    row = _row(engine, server)
    assert (row["vm_state"], row["task_state"]) == (states.RESIZED, None)
    assert (row["memory_mb"], row["vcpus"], row["instance_type_id"]) == (2048, 4, new["id"])
    copy = _copy(engine, server)
    assert copy["cur"] == copy["new"] and copy["old"]["nova_object.data"]["memory_mb"] == 512
    migration_row = _migration(engine, migration_uuid)
    assert (migration_row["status"], migration_row["dest_compute"], migration_row["dest_node"]) \
        == ("finished", "node-2", "node-2")


def test_finish_changes_nothing_once_the_task_moved_on(engine, server):
    migration_uuid, _ = _start(engine, server)
    with db_api.transaction(engine) as conn:  # still resize_prep: not this step's task
        assert not resize.finish(conn, server, migration_uuid, power_state=RUNNING, host="node-2")
    assert _row(engine, server)["task_state"] == ts.RESIZE_PREP
    assert _migration(engine, migration_uuid)["status"] == "pre-migrating"


@pytest.mark.parametrize(("power", "vm_state"), [(RUNNING, states.ACTIVE), (SHUTDOWN, states.STOPPED)])
def test_confirm_then_confirmed_drops_the_old_flavor(engine, server, power, vm_state):
    migration_uuid, new = _finished(engine, server)
    with db_api.transaction(engine) as conn:
        assert resize.confirm(conn, _row(engine, server), OWNER) == migration_uuid
    assert _migration(engine, migration_uuid)["status"] == "confirming"
    with db_api.transaction(engine) as conn:
        assert resize.confirmed(conn, server, migration_uuid, power_state=power)
    row = _row(engine, server)
    assert (row["vm_state"], row["task_state"], row["instance_type_id"]) == (vm_state, None, new["id"])
    copy = _copy(engine, server)
    assert copy["old"] is None and copy["new"] is None
    assert _migration(engine, migration_uuid)["status"] == "confirmed"
    with db_api.reader(engine) as conn:
        assert instance_sysmeta.system_metadata_item(conn, server, OLD_VM_STATE) is None


def test_a_second_confirm_finds_no_finished_resize(engine, server):
    _finished(engine, server)
    with db_api.transaction(engine) as conn:
        resize.confirm(conn, _row(engine, server), OWNER)
    with pytest.raises(resize.NotResized, match="Instance has not been resized."), \
            db_api.transaction(engine) as conn:
        resize.confirm(conn, _row(engine, server), OWNER)


def test_confirm_and_revert_need_a_finished_resize(engine, server):
    for step in (resize.confirm, resize.revert):
        with pytest.raises(errors.InstanceInvalidState), db_api.transaction(engine) as conn:
            step(conn, _row(engine, server), OWNER)  # ACTIVE: not resized


def test_revert_then_reverted_brings_the_old_flavor_back(engine, server):
    migration_uuid, _ = _finished(engine, server)
    old_type = _copy(engine, server)["old"]["nova_object.data"]["id"]
    with db_api.transaction(engine) as conn:
        assert resize.revert(conn, _row(engine, server), OWNER) == migration_uuid
    assert _row(engine, server)["task_state"] == ts.RESIZE_REVERTING
    assert _migration(engine, migration_uuid)["status"] == "reverting"
    with db_api.transaction(engine) as conn:
        assert resize.reverted(conn, server, migration_uuid, power_state=RUNNING)
    row = _row(engine, server)
    assert (row["vm_state"], row["task_state"], row["memory_mb"], row["vcpus"], row["instance_type_id"]) \
        == (states.ACTIVE, None, 512, 1, old_type)
    assert _copy(engine, server)["old"] is None
    assert _migration(engine, migration_uuid)["status"] == "reverted"


def test_a_revert_of_a_server_stopped_before_the_resize_ends_stopped(engine, server):
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, server, vm_state=states.STOPPED, power_state=SHUTDOWN)
    migration_uuid, _ = _finished(engine, server)
    with db_api.transaction(engine) as conn:
        resize.revert(conn, _row(engine, server), OWNER)
        assert resize.reverted(conn, server, migration_uuid, power_state=SHUTDOWN)
    assert _row(engine, server)["vm_state"] == states.STOPPED


def test_failed_puts_the_server_back_as_it_was(engine, server):
    migration_uuid, _ = _start(engine, server)
    with db_api.transaction(engine) as conn:
        assert resize.failed(conn, server, migration_uuid, expected_task_state=ts.RESIZE_PREP)
    row = _row(engine, server)
    assert (row["vm_state"], row["task_state"], row["memory_mb"]) == (states.ACTIVE, None, 512)
    copy = _copy(engine, server)
    assert copy["old"] is None and copy["new"] is None
    assert _migration(engine, migration_uuid)["status"] == "error"
    with db_api.transaction(engine) as conn:  # a second time: the task is no longer resize_prep
        assert not resize.failed(conn, server, migration_uuid, expected_task_state=ts.RESIZE_PREP)


def test_record_failed_leaves_a_migration_in_error(engine, server):
    new = _flavor(engine, ram=256, vcpus=1)
    with db_api.transaction(engine) as conn:
        migration_uuid = resize.record_failed(conn, _row(engine, server), new, OWNER)
    found = _migration(engine, migration_uuid)
    assert (found["status"], found["instance_uuid"], found["new_instance_type_id"]) == ("error", server, new["id"])
    assert _row(engine, server)["task_state"] is None
