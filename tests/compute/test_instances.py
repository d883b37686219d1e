"""Servers' rows on SQLite, PostgreSQL and MariaDB: the flavor copy, the task_state
compare-and-swap under real concurrency, lock, actions and events, faults, soft delete."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid as uuidlib

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import errors, preconditions
from openkeel_compute.compute.instances import (
    cas,
    deletion,
    instance_actions,
    instance_faults,
    listing,
    locks,
    paging,
    store,
)
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.model import states
from openkeel_compute.model.states import task_states as ts
from tests.databases import ENGINES, throwaway_database

ADMIN = Actor("admin", "admin", is_admin=True, request_id="req-admin")
# The owner of a test's servers: a project of its own per test (set by _own_project), so that
# tests can share one database per engine and module and still list only their servers.
OWNER = Actor("demo", "demo", request_id="req-owner")


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, tmp_path_factory):
    with throwaway_database(request.param, tmp_path_factory.mktemp("db")) as url:
        engine = db_api.make_engine(url, pool_size=12, max_overflow=4)
        migration.sync(engine)
        yield engine
        engine.dispose()


@pytest.fixture(autouse=True)
def _own_project():
    global OWNER
    OWNER = Actor("demo", f"p-{uuidlib.uuid4().hex[:12]}", request_id="req-owner")
    yield


def _flavor(engine):
    flavorid = f"f-{uuidlib.uuid4().hex[:12]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=512, vcpus=1, root_gb=1, flavorid=flavorid)
        flavor = catalog.get(conn, flavorid)
        catalog.set_extra_specs(conn, flavor, {"hw:cpu_policy": "shared"})
    return flavor


def _boot(engine, flavor, *, actor=None, launched=True, **columns):
    actor = actor or OWNER
    with db_api.transaction(engine) as conn:
        row = store.create(conn, actor=actor, flavor=flavor, extra_specs={"hw:cpu_policy": "shared"},
                           display_name="srv", metadata={"k": "v"}, tags=["b", "a"], **columns)
        if launched:
            cas.save_state(conn, row["uuid"], expected_task_state=[ts.SCHEDULING], vm_state=states.ACTIVE,
                           task_state=None, power_state=states.power_state.RUNNING,
                           launched_at=models.utcnow(), host="openkeel", node="node-1")
    return row["uuid"]


def _get(engine, uuid, **kw):
    with db_api.reader(engine) as conn:
        return store.get(conn, uuid, **kw)


def test_a_server_keeps_its_flavor_whatever_happens_to_the_flavor(engine):
    flavor = _flavor(engine)
    uuid = _boot(engine, flavor, launched=False)
    row = _get(engine, uuid)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == ("building", "scheduling", 0)
    assert store.status(row) == "BUILD"
    assert (row["hostname"], row["display_name"], row["launch_index"], row["progress"]) == ("srv", "srv", 0, 0)
    assert row["reservation_id"].startswith("r-") and len(row["reservation_id"]) == 10
    flavorid = flavor["flavorid"]
    with db_api.transaction(engine) as conn:
        catalog.set_extra_specs(conn, flavor, {"hw:cpu_policy": "dedicated"})
        catalog.destroy(conn, flavorid)
        catalog.create(conn, name=flavorid, memory_mb=4096, vcpus=8, root_gb=40, flavorid=flavorid)
    copy = store.flavors_of(_get(engine, uuid))
    assert (copy.cur["flavorid"], copy.cur["name"], copy.cur["memory_mb"], copy.cur["vcpus"]) == \
        (flavorid, flavorid, 512, 1)
    assert copy.cur["extra_specs"] == {"hw:cpu_policy": "shared"}
    assert copy.old is None and copy.new is None
    assert copy.sizes()["memory_mb"] == 512 and row["memory_mb"] == 512
    # Nova's instance_extra.flavor shape: serialised Flavor objects, description never kept
    raw = json.loads(row["flavor"])
    assert set(raw) == {"cur", "old", "new"}
    assert raw["cur"]["nova_object.name"] == "Flavor" and raw["cur"]["nova_object.version"] == "1.2"
    assert raw["cur"]["nova_object.data"]["description"] is None
    assert raw["cur"]["nova_object.data"]["rxtx_factor"] == 1.0
    assert raw["cur"]["nova_object.data"]["created_at"].endswith("Z")
    with db_api.reader(engine) as conn:
        assert store.metadata_of(conn, uuid) == {"k": "v"}
        assert store.tags_of(conn, uuid) == ["a", "b"]
        assert [a["action"] for a in instance_actions.actions_of(conn, uuid)] == ["create"]


def test_an_action_moves_task_state_and_is_recorded(engine):
    uuid = _boot(engine, _flavor(engine))
    with db_api.transaction(engine) as conn:
        before = cas.begin_action(conn, uuid, preconditions.precondition("stop"), OWNER)
    assert before["task_state"] is None
    row = _get(engine, uuid)
    assert (row["vm_state"], row["task_state"]) == ("active", "powering-off") and store.status(row) == "ACTIVE"
    with db_api.transaction(engine) as conn, pytest.raises(errors.InstanceInvalidState) as caught:
        cas.begin_action(conn, uuid, preconditions.precondition("stop"), OWNER)
    assert caught.value.message == f"Cannot 'stop' instance {uuid} while it is in task_state powering-off"
    # the controller finishes the stop, only if the task is still the one it was given
    with db_api.transaction(engine) as conn:
        assert not cas.save_state(conn, uuid, expected_task_state=[ts.POWERING_ON], vm_state="stopped")
        assert cas.save_state(conn, uuid, expected_task_state=[ts.POWERING_OFF], vm_state="stopped",
                              task_state=None, power_state=states.power_state.SHUTDOWN)
    assert store.status(_get(engine, uuid)) == "SHUTOFF"
    with db_api.reader(engine) as conn:
        recorded = instance_actions.actions_of(conn, uuid)
    assert [(a["action"], a["request_id"], a["user_id"]) for a in recorded] == [
        ("stop", "req-owner", "demo"), ("create", "req-owner", "demo")]


def test_a_refused_action_changes_nothing_and_records_nothing(engine):
    uuid = _boot(engine, _flavor(engine))
    with pytest.raises(errors.InstanceInvalidState) as caught, db_api.transaction(engine) as conn:
        cas.begin_action(conn, uuid, preconditions.precondition("start"), OWNER)
    assert caught.value.message == f"Cannot 'start' instance {uuid} while it is in vm_state active"
    with db_api.reader(engine) as conn:
        assert [a["action"] for a in instance_actions.actions_of(conn, uuid)] == ["create"]
    assert _get(engine, uuid)["task_state"] is None


@pytest.mark.parametrize("read", ["read-first", "read-in-transaction"])
@pytest.mark.parametrize("action", ["stop", "reboot", "pause", "mixed"])
def test_of_n_concurrent_actions_on_one_server_exactly_one_proceeds(engine, action, read):
    # read-first: every caller has read the server (as the API does for its policy check) before
    # any writes, so each one's check passes on a stale row and the UPDATE's guard alone decides,
    # on every engine. read-in-transaction: the callers race from the start.
    uuid = _boot(engine, _flavor(engine))
    n = 8
    names = ["stop", "reboot", "pause", "suspend"] * 2 if action == "mixed" else [action] * n
    barrier = threading.Barrier(n)
    outcomes: list = [None] * n

    def attempt(i):
        target = uuid
        if read == "read-first":
            target = _get(engine, uuid)
        barrier.wait()
        try:
            with db_api.transaction(engine) as conn:
                cas.begin_action(conn, target, preconditions.precondition(names[i]),
                                 Actor("demo", OWNER.project_id, request_id=f"req-{i}"))
            outcomes[i] = "ok"
        except errors.Conflict as exc:
            outcomes[i] = exc.message

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 1, outcomes
    winner = names[outcomes.index("ok")]
    task = preconditions.precondition(winner).next_task_state
    assert _get(engine, uuid)["task_state"] == task
    # every loser gets the 409 it would have got arriving after the winner
    for name, outcome in zip(names, outcomes):
        if outcome != "ok":
            assert outcome == f"Cannot '{name}' instance {uuid} while it is in task_state {task}", outcome
    with db_api.reader(engine) as conn:
        assert [a["action"] for a in instance_actions.actions_of(conn, uuid)] == [winner, "create"]


def test_lock_and_unlock_as_nova(engine):
    uuid = _boot(engine, _flavor(engine))
    with db_api.transaction(engine) as conn:
        assert locks.lock(conn, uuid, OWNER)
        assert not locks.lock(conn, uuid, OWNER), "the owner re-locking changes nothing"
    row = _get(engine, uuid)
    assert (row["locked"], row["locked_by"], row["locked_reason"]) == (True, "owner", None)
    with pytest.raises(errors.InstanceIsLocked) as caught, db_api.transaction(engine) as conn:
        cas.begin_action(conn, uuid, preconditions.precondition("stop"), OWNER)
    assert caught.value.message == f"Instance {uuid} is locked"
    with db_api.transaction(engine) as conn:
        assert locks.lock(conn, uuid, ADMIN, reason="maintenance")
    row = _get(engine, uuid)
    assert (row["locked_by"], row["locked_reason"]) == ("admin", "maintenance")
    assert not locks.is_expected_locked_by(row, OWNER) and locks.is_expected_locked_by(row, ADMIN)
    with db_api.transaction(engine) as conn:  # admins act on locked servers
        cas.begin_action(conn, uuid, preconditions.precondition("stop"), ADMIN)
        locks.unlock(conn, uuid, ADMIN)
    row = _get(engine, uuid)
    assert (row["locked"], row["locked_by"], row["locked_reason"]) == (False, None, None)
    with db_api.reader(engine) as conn:
        assert [a["action"] for a in instance_actions.actions_of(conn, uuid)] == ["unlock", "stop", "lock", "lock", "create"]
        shown = instance_actions.get_action(conn, uuid, "req-admin")
    assert shown["action"] == "unlock"
    assert [(e["event"], e["result"]) for e in shown["events"]] == [("api_unlock", "Success")]
    assert shown["updated_at"] is not None and shown["events"][0]["finish_time"] is not None


def test_unknown_action_and_server(engine):
    uuid = _boot(engine, _flavor(engine))
    with db_api.reader(engine) as conn:
        with pytest.raises(errors.InstanceActionNotFound) as caught:
            instance_actions.get_action(conn, uuid, "req-nope")
        assert caught.value.message == "Action req-nope not found"
        with pytest.raises(errors.InstanceNotFound) as missing:
            store.get(conn, "155d900f-4e14-4e4c-a73d-069cbf4541e6")
        assert missing.value.message == "Instance 155d900f-4e14-4e4c-a73d-069cbf4541e6 could not be found."


def test_faults_latest_first_details_hidden_from_non_admins_on_500(engine):
    flavor = _flavor(engine)
    a, b = _boot(engine, flavor), _boot(engine, flavor)
    with db_api.transaction(engine) as conn:
        instance_faults.add_fault(conn, a, code=500, message="old", details="trace 0")
        instance_faults.add_fault(conn, a, code=500, message="x" * 300, details="Traceback: secret")
        instance_faults.add_fault(conn, b, code=400, message="No valid host was found.", details="unschedulable")
    with db_api.reader(engine) as conn:
        latest = instance_faults.latest_faults(conn, [a, b, "nope"])
    assert set(latest) == {a, b}
    assert latest[a]["message"] == "x" * 255
    admin_view = instance_faults.fault_view(latest[a], is_admin=True)
    user_view = instance_faults.fault_view(latest[a], is_admin=False)
    assert admin_view["details"] == "Traceback: secret" and "details" not in user_view
    assert set(user_view) == {"code", "created", "message"} and user_view["created"].endswith("Z")
    assert instance_faults.fault_view(latest[b], is_admin=False)["details"] == "unschedulable"
    latest[b]["details"] = None
    assert "details" not in instance_faults.fault_view(latest[b], is_admin=True)


def test_soft_delete_as_nova_keeps_it(engine):
    flavor = _flavor(engine)
    # Taken before the boots (MariaDB keeps whole seconds, hence the second less): on a loaded
    # machine the boots may take longer than a second, and every one of them is a change.
    since = models.utcnow() - dt.timedelta(seconds=1)
    keep, gone = _boot(engine, flavor), _boot(engine, flavor)
    other = _boot(engine, flavor, actor=Actor("u2", OWNER.project_id + "-other"))
    with db_api.transaction(engine) as conn:
        instance_faults.add_fault(conn, gone, code=500, message="boom")
        assert cas.begin_delete(conn, gone, OWNER)
    deleting = _get(engine, gone)
    assert (deleting["vm_state"], deleting["task_state"], store.status(deleting)) == ("active", "deleting", "ACTIVE")
    with db_api.transaction(engine) as conn:
        assert not cas.begin_delete(conn, gone, OWNER), "a delete under way is not started twice"
        assert deletion.soft_delete(conn, gone)
        assert not deletion.soft_delete(conn, gone)
    row = _get(engine, gone, read_deleted="yes")
    assert row["deleted"] == row["id"] != 0 and row["deleted_at"] is not None and row["terminated_at"] is not None
    assert (row["vm_state"], row["task_state"], row["power_state"]) == ("deleted", None, 0)
    assert store.status(row) == "DELETED"
    with pytest.raises(errors.InstanceNotFound):
        _get(engine, gone)
    assert _get(engine, gone, read_deleted="only")["uuid"] == gone
    with pytest.raises(errors.InstanceNotFound):
        _get(engine, keep, read_deleted="only")
    with db_api.reader(engine) as conn:
        assert store.metadata_of(conn, gone) == {} and store.metadata_of(conn, keep) == {"k": "v"}
        assert store.tags_of(conn, gone) == [] and store.tags_of(conn, keep) == ["a", "b"]
        assert instance_faults.latest_faults(conn, [gone]) == {}
        assert [a["action"] for a in instance_actions.actions_of(conn, gone)] == ["delete", "create"]

        def listed(**kw):
            return [r["uuid"] for r in listing.list_instances(conn, listing.list_filter(**kw))]

        assert listed(is_admin=False, project_id=OWNER.project_id) == [keep]
        # changes-since sees the deletion (and the other live server that changed)
        assert set(listed(is_admin=False, project_id=OWNER.project_id, changes_since=since)) == {keep, gone}
        assert listed(is_admin=False, project_id=OWNER.project_id, changes_before=since) == []
        # admins list deleted servers, by ``deleted`` or ``status=DELETED`` (of every project:
        # here only this test's servers are looked at)
        mine = {keep, gone, other}
        assert mine.intersection(listed(is_admin=True, all_tenants=True, deleted=True)) == {gone}
        assert mine.intersection(listed(is_admin=True, all_tenants=True, statuses=["DELETED"])) == {gone}
        assert mine.intersection(listed(is_admin=True, all_tenants=True)) == {keep, other}
        with pytest.raises(errors.DeletedListForbidden) as forbidden:
            listed(is_admin=False, project_id=OWNER.project_id, statuses=["DELETED"])
        assert forbidden.value.message == "Only administrators may list deleted instances"


def test_status_filter_in_a_list(engine):
    flavor = _flavor(engine)
    active, stopping, building = _boot(engine, flavor), _boot(engine, flavor), _boot(engine, flavor, launched=False)
    with db_api.transaction(engine) as conn:
        cas.begin_action(conn, stopping, preconditions.precondition("reboot"), OWNER)
    with db_api.reader(engine) as conn:

        def listed(*statuses, v238=True):
            where = listing.list_filter(is_admin=False, project_id=OWNER.project_id, statuses=list(statuses),
                                        version_2_38=v238)
            return {r["uuid"] for r in listing.list_instances(conn, where)}

        assert listed("ACTIVE") == {active, stopping}
        assert listed("REBOOT") == {stopping}
        assert listed("build") == {building}
        assert listed("SHUTOFF") == set()
        with pytest.raises(errors.InvalidStatus) as invalid:
            listed("BOGUS")
        assert invalid.value.message == "Invalid status value"
        assert listed("BOGUS", v238=False) == set()


def test_code_point_order_and_metadata_uniqueness(engine):
    flavor = _flavor(engine)
    uuid = _boot(engine, flavor)
    with db_api.transaction(engine) as conn, pytest.raises(sa.exc.IntegrityError):
        conn.execute(sa.insert(models.INSTANCE_METADATA), {"instance_uuid": uuid, "key": "k", "value": "w",
                                                           "deleted": 0})
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.INSTANCE_METADATA), {"instance_uuid": uuid, "key": "K", "value": "w",
                                                           "deleted": 0})
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(display_name="b"))
    second = _boot(engine, flavor)
    with db_api.transaction(engine) as conn:
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == second).values(display_name="B"))
    with db_api.reader(engine) as conn:
        assert store.metadata_of(conn, uuid) == {"K": "w", "k": "v"}
        names = conn.execute(sa.select(models.INSTANCES.c.display_name)
                             .where(models.INSTANCES.c.uuid.in_([uuid, second]))
                             .order_by(models.INSTANCES.c.display_name)).scalars().all()
    assert names == ["B", "b"]


def test_delete_is_refused_only_by_the_lock(engine):
    flavor = _flavor(engine)
    building = _boot(engine, flavor, launched=False)
    rebooting = _boot(engine, flavor)
    with db_api.transaction(engine) as conn:
        cas.begin_action(conn, rebooting, preconditions.precondition("reboot"), OWNER)
        assert cas.begin_delete(conn, building, OWNER)  # never launched, task scheduling
        assert cas.begin_delete(conn, rebooting, OWNER)  # overrides the running task
        locks.lock(conn, rebooting, ADMIN)
    assert _get(engine, rebooting)["task_state"] == "deleting"
    with pytest.raises(errors.InstanceIsLocked), db_api.transaction(engine) as conn:
        cas.begin_delete(conn, rebooting, OWNER)
    with db_api.transaction(engine) as conn:
        assert not cas.begin_delete(conn, rebooting, ADMIN)  # admin passes the lock; already deleting
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == building)
                     .values(disable_terminate=True, task_state=None))
        assert not cas.begin_delete(conn, building, OWNER)
    assert _get(engine, building)["task_state"] is None, "termination disabled: nothing changes"


def test_a_stale_read_loses_to_a_lock_taken_since(engine):
    uuid = _boot(engine, _flavor(engine))
    stale = _get(engine, uuid)
    with db_api.transaction(engine) as conn:
        locks.lock(conn, uuid, ADMIN)
    for start in (lambda conn: cas.begin_action(conn, stale, preconditions.precondition("stop"), OWNER),
                  lambda conn: cas.begin_delete(conn, stale, OWNER)):
        with pytest.raises(errors.InstanceIsLocked), db_api.transaction(engine) as conn:
            start(conn)
    assert _get(engine, uuid)["task_state"] is None


def test_a_soft_deleted_server_is_listed_with_the_deleted_ones(engine):
    # What the Nova API answers with reclaim_instance_interval set: hidden from the default list
    # and from status=SOFT_DELETED, listed by deleted=true (admin) and by changes-since.
    flavor = _flavor(engine)
    # Taken before both boots (a second back: MariaDB keeps whole seconds): a loaded machine may
    # take over a second for the two boots, which then fell before a `since` taken after them.
    since = models.utcnow() - dt.timedelta(seconds=1)
    live, soft = _boot(engine, flavor), _boot(engine, flavor)
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, soft, vm_state=states.SOFT_DELETED, task_state=None)
    assert store.status(_get(engine, soft)) == "SOFT_DELETED"
    with db_api.reader(engine) as conn:

        def listed(**kw):
            where = listing.list_filter(is_admin=True, project_id=OWNER.project_id, **kw)
            return {r["uuid"] for r in listing.list_instances(conn, where)}

        assert listed() == {live}
        assert listed(deleted=True) == {soft}
        assert listed(changes_since=since) == {live, soft}
        # the status filter does not bring it back: Nova combines it with "not deleted"
        assert listed(statuses=["SOFT_DELETED"]) == set()


def test_the_host_check_is_in_the_guard_too(engine):
    uuid = _boot(engine, _flavor(engine))
    stale = _get(engine, uuid)
    with db_api.transaction(engine) as conn:
        cas.save_state(conn, uuid, host=None)
    with pytest.raises(errors.InstanceNotReady) as caught, db_api.transaction(engine) as conn:
        cas.begin_action(conn, stale, preconditions.precondition("stop"), OWNER)
    assert caught.value.message == f"Instance {uuid} is not ready"
    with db_api.transaction(engine) as conn:
        cas.begin_action(conn, uuid, preconditions.precondition("pause"), OWNER)


def test_a_page_of_instance_actions(engine):
    uuid = _boot(engine, _flavor(engine))
    with db_api.transaction(engine) as conn:
        for i in range(4):
            actor = Actor("demo", OWNER.project_id, request_id=f"req-{i}")
            (locks.lock if i % 2 == 0 else locks.unlock)(conn, uuid, actor)
    with db_api.reader(engine) as conn:

        def page(**kw):
            return [a["request_id"] for a in instance_actions.actions_of(conn, uuid, **kw)]

        assert page() == ["req-3", "req-2", "req-1", "req-0", "req-owner"]
        # as the Nova API pages them: the actions after the marker, newest first
        assert page(marker="req-2", limit=2) == ["req-1", "req-0"]
        assert page(limit=0) == []
        with pytest.raises(errors.MarkerNotFound) as caught:
            page(marker="req-nope")
        assert caught.value.message == "Marker None could not be found."
        assert page(changes_since=models.utcnow() + dt.timedelta(seconds=5)) == []
        assert page(changes_before=models.utcnow() - dt.timedelta(days=1)) == []
        # the create action has no event yet, so no updated_at: changes-since does not see it
        assert page(changes_since=models.utcnow() - dt.timedelta(days=1)) == ["req-3", "req-2", "req-1", "req-0"]


def test_a_page_of_servers_sorts_nulls_lowest_and_continues_after_the_marker(engine):
    flavor = _flavor(engine)
    uuids = [_boot(engine, flavor) for _ in range(4)]
    # two servers without a key name (NULL), two with: NULL is the lowest value on every engine
    with db_api.transaction(engine) as conn:
        for uuid, key in zip(uuids, [None, "b", None, "a"], strict=True):
            conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == uuid).values(key_name=key))
    where = listing.list_filter(is_admin=False, project_id=OWNER.project_id)

    def page(direction, **kw):
        with db_api.reader(engine) as conn:
            return [r["uuid"] for r in paging.list_page(conn, where, sort_keys=["key_name"],
                                                        sort_dirs=[direction], **kw)]

    ascending = page("asc")
    # created_at and id break ties, in the first direction
    assert ascending == [uuids[0], uuids[2], uuids[3], uuids[1]]
    assert page("desc") == list(reversed(ascending))
    for direction in ("asc", "desc"):
        whole = page(direction)
        walked, marker = [], None
        while True:
            got = page(direction, limit=1, marker=marker)
            if not got:
                break
            walked += got
            marker = got[-1]
        assert walked == whole
    with pytest.raises(errors.Invalid, match=r"marker \[nope\] not found"):
        page("asc", marker="nope")


def test_a_name_filter_is_a_regular_expression_on_every_engine(engine):
    flavor = _flavor(engine)
    uuid = _boot(engine, flavor)
    where = sa.and_(listing.list_filter(is_admin=False, project_id=OWNER.project_id),
                    models.INSTANCES.c.display_name.regexp_match("^s.v$"))
    with db_api.reader(engine) as conn:
        assert [r["uuid"] for r in paging.list_page(conn, where, sort_keys=[], sort_dirs=[])] == [uuid]
