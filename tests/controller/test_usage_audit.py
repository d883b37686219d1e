"""The controller's instance usage audit (issue 33.4): Nova's _instance_usage_audit, once per period and node.

Each node gets one task log row per period (RUNNING, then DONE with Nova's message and the number of
servers), os-instance_usage_audit_log's report reads them, and every server that was on the node during
the period (deleted ones too, not those launched after it or terminated before it) gets its exists
notification with the period as audit period. A second pass, or a second replica, audits nothing again.
On SQLite, PostgreSQL and MariaDB.
"""

from __future__ import annotations

import datetime as dt
import uuid as uuidlib

import pytest
from sqlalchemy import insert, select, update

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import usage_audit
from openkeel_compute.compute.instances import deletion, store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.controller import usage_audit as audit
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.db.models import INSTANCES, NODE_ZONES, TASK_LOG
from tests.databases import ENGINES, throwaway_database

NOW = dt.datetime(2026, 12, 5, 13, 20)
BEGIN, END = dt.datetime(2026, 11, 1), dt.datetime(2026, 12, 1)  # the last completed month


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    with throwaway_database(request.param, tmp_path) as url:
        engine = db_api.make_engine(url)
        migration.sync(engine)
        with db_api.transaction(engine) as conn:
            conn.execute(insert(NODE_ZONES), [{"node": n, "zone": None, "available": True, "cordoned": False,
                                               "updated_at": NOW} for n in ("node-a", "node-b")])
            catalog.create(conn, name="m1", memory_mb=512, vcpus=1, root_gb=1, flavorid="m1")
        yield engine
        engine.dispose()


def _server(engine, host, launched, terminated=None, deleted=False) -> str:
    with db_api.transaction(engine) as conn:
        row = store.create(conn, actor=Actor("u", "p", request_id="req-1"), flavor=catalog.get(conn, "m1"),
                               extra_specs={}, display_name=f"s-{uuidlib.uuid4().hex[:6]}")
        conn.execute(update(INSTANCES).where(INSTANCES.c.uuid == row["uuid"]).values(
            host=host, node=host, vm_state="active", task_state=None, launched_at=launched,
            terminated_at=terminated))
        if deleted:
            deletion.soft_delete(conn, row["uuid"])
            conn.execute(update(INSTANCES).where(INSTANCES.c.uuid == row["uuid"]).values(terminated_at=terminated))
    return row["uuid"]


class Recorder:
    def __init__(self, fail: set[str] = frozenset()) -> None:
        self.sent: list[tuple[str, dt.datetime, dt.datetime, str]] = []
        self.fail = fail

    def exists(self, uuid, begin, end, host):
        if uuid in self.fail:
            raise RuntimeError("broker away")
        self.sent.append((uuid, begin, end, host))
        return True


def _logs(engine):
    with db_api.reader(engine) as conn:
        return {r["host"]: dict(r) for r in conn.execute(select(TASK_LOG)).mappings()}


def test_each_node_is_audited_once_per_period_with_the_servers_it_had(engine) -> None:
    during = _server(engine, "node-a", dt.datetime(2026, 10, 1))
    deleted_in = _server(engine, "node-a", dt.datetime(2026, 10, 1), terminated=dt.datetime(2026, 11, 15),
                         deleted=True)
    _server(engine, "node-a", dt.datetime(2026, 10, 1), terminated=dt.datetime(2026, 10, 20), deleted=True)
    _server(engine, "node-a", dt.datetime(2026, 12, 2))  # launched after the period
    other = _server(engine, "node-b", dt.datetime(2026, 11, 30))
    notifier = Recorder()

    assert audit.run(engine, "month", notifier, now=lambda: NOW) == 2
    assert sorted(notifier.sent) == sorted([(during, BEGIN, END, "node-a"), (deleted_in, BEGIN, END, "node-a"),
                                            (other, BEGIN, END, "node-b")])
    logs = _logs(engine)
    assert {h: (r["state"], r["task_items"], r["errors"], r["period_beginning"], r["period_ending"])
            for h, r in logs.items()} == {"node-a": ("DONE", 2, 0, BEGIN, END), "node-b": ("DONE", 1, 0, BEGIN, END)}
    assert logs["node-a"]["message"].startswith("Instance usage audit ran for host node-a, 2 instances in ")
    with db_api.reader(engine) as conn:
        report = usage_audit.report(conn, BEGIN, END)
    assert (report["num_hosts_done"], report["total_instances"], report["overall_status"]) == (
        2, 3, "ALL hosts done. 0 errors.")

    notifier.sent.clear()  # the next pass (or another replica): nothing again
    assert audit.run(engine, "month", notifier, now=lambda: NOW + dt.timedelta(minutes=5)) == 0
    assert notifier.sent == []


def test_a_server_that_cannot_be_reported_is_counted_as_an_error(engine) -> None:
    broken = _server(engine, "node-a", dt.datetime(2026, 10, 1))
    assert audit.run(engine, "month", Recorder(fail={broken}), now=lambda: NOW) == 2
    assert (_logs(engine)["node-a"]["state"], _logs(engine)["node-a"]["errors"]) == ("DONE", 1)


def test_a_period_running_elsewhere_is_left_alone(engine) -> None:
    _server(engine, "node-a", dt.datetime(2026, 10, 1))
    with db_api.transaction(engine) as conn:
        usage_audit.begin_task(conn, "node-a", BEGIN, END, 1)
    notifier = Recorder()
    assert audit.audit_host(engine, "node-a", BEGIN, END, notifier) is False
    assert notifier.sent == [] and _logs(engine)["node-a"]["state"] == "RUNNING"


def test_the_audit_is_off_unless_configured() -> None:
    from openkeel_compute.conf import build_conf
    from openkeel_compute.controller.service import _with_usage_audit

    conf = build_conf([])
    assert conf.instance_usage_audit is False
    marker = object()
    assert _with_usage_audit(conf, None, None, marker) is marker


def test_the_exists_notifications_carry_the_audited_period(tmp_path) -> None:
    from oslo_messaging.notify import _impl_test as in_memory_driver

    from openkeel_compute.notifications import sender
    from openkeel_compute.notifications.server import ServerNotifier
    from tests.conftest import make_conf

    conf = make_conf(tmp_path, DEFAULT={"host": "ctl"}, notifications={"notification_format": "both"},
                     oslo_messaging_notifications={"driver": "test", "transport_url": "fake:/"})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    with db_api.transaction(engine) as conn:
        conn.execute(insert(NODE_ZONES), [{"node": "node-a", "zone": None, "available": True, "cordoned": False,
                                           "updated_at": NOW}])
        catalog.create(conn, name="m1", memory_mb=512, vcpus=1, root_gb=1, flavorid="m1")
    uuid = _server(engine, "node-a", dt.datetime(2026, 10, 1))
    in_memory_driver.reset()
    notifier = ServerNotifier(conf, host="ctl", engine=engine)
    try:
        assert audit.run(engine, "month", notifier, now=lambda: NOW) == 1
        assert sender.drain_all(10)
        sent = {m["event_type"]: (m["publisher_id"], m["payload"]) for _c, m, _p, _r in in_memory_driver.NOTIFICATIONS}
    finally:
        notifier.close(0)
        in_memory_driver.reset()
        db_api.dispose_all()
    publisher, versioned = sent["instance.exists"]
    assert publisher == "nova-compute:node-a"
    assert (versioned["nova_object.name"], versioned["nova_object.version"]) == ("InstanceExistsPayload", "2.1")
    assert versioned["nova_object.data"]["uuid"] == uuid
    assert versioned["nova_object.data"]["audit_period"]["nova_object.data"] == {
        "audit_period_beginning": "2026-11-01T00:00:00Z", "audit_period_ending": "2026-12-01T00:00:00Z"}
    publisher, legacy = sent["compute.instance.exists"]
    assert publisher == "compute.node-a"
    assert (legacy["instance_id"], legacy["audit_period_beginning"], legacy["audit_period_ending"]) == (
        uuid, "2026-11-01 00:00:00", "2026-12-01 00:00:00")
