"""os-instance_usage_audit_log: the audit periods as Nova computes them and the task log's runs per
compute host (the cluster's nodes), as Nova reports them."""

from __future__ import annotations

import datetime as dt
import json
import subprocess

import pytest
import sqlalchemy as sa

from openkeel_compute.compute import usage_audit
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api import oracles
from tests.conftest import admin, user

UNITS = ("month", "month@15", "month@31", "day", "day@18", "hour", "hour@30", "year", "year@3")
MOMENTS = ("2026-01-01 00:00:00", "2026-01-10 12:00:00", "2026-03-15 00:00:00.000001", "2026-12-31 23:59:59",
           "2024-02-29 18:00:00", "2026-07-01 00:30:00", "2026-03-01 00:00:00")


def test_audit_periods_are_the_ones_novas_own_function_computes():
    python = oracles.oracle_python("run-oracle.sh")  # Nova's installed source
    script = ("import datetime, json, sys\nfrom nova import utils\nout = []\n"
              "for unit, moment in json.load(sys.stdin):\n"
              "    try:\n"
              "        b, e = utils.last_completed_audit_period(unit, datetime.datetime.fromisoformat(moment))\n"
              "        out.append([str(b), str(e)])\n"
              "    except ValueError as exc:\n"
              "        out.append(['ValueError'])\n"
              "print(json.dumps(out))\n")
    cases = [(unit, moment) for unit in UNITS for moment in MOMENTS]
    done = subprocess.run([str(python), "-W", "ignore", "-c", script], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=120, check=True)
    ours = []
    for unit, moment in cases:
        try:
            begin, end = usage_audit.last_completed_audit_period(unit, dt.datetime.fromisoformat(moment))
            ours.append([str(begin), str(end)])
        except ValueError:  # a day 31 that February has not: Nova's own ValueError (500), never a period
            ours.append(["ValueError"])
    assert ours == json.loads(done.stdout)


def test_the_month_before_is_reported_with_every_host_not_run_until_the_audit_ran(client, conf):
    engine = db_api.get_engine(conf)
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.NODE_ZONES), [{"node": "node-b"}, {"node": "node-a"}])
    got = client.get("/v2.1/os-instance_usage_audit_log/2026-12-05 10:00:00", headers=admin())
    assert got.json == {"instance_usage_audit_log": {
        "period_beginning": "2026-11-01 00:00:00", "period_ending": "2026-12-01 00:00:00", "num_hosts": 2,
        "num_hosts_done": 0, "num_hosts_running": 0, "num_hosts_not_run": 2, "hosts_not_run": ["node-a", "node-b"],
        "total_instances": 0, "total_errors": 0, "overall_status": "0 of 2 hosts done. 0 errors.", "log": {}}}


def test_runs_recorded_in_the_task_log_are_counted_per_host(client, conf):
    engine = db_api.get_engine(conf)
    november = {"task_name": "instance_usage_audit", "period_beginning": dt.datetime(2026, 11, 1),
                "period_ending": dt.datetime(2026, 12, 1)}
    with db_api.transaction(engine) as conn:
        conn.execute(sa.insert(models.NODE_ZONES), [{"node": "node-a"}, {"node": "node-b"}, {"node": "node-c"}])
        conn.execute(sa.insert(models.TASK_LOG), [
            {**november, "host": "node-a", "state": "DONE", "message": "Instance usage audit ran for host node-a, "
             "3 instances in 0.1 seconds.", "task_items": 3, "errors": 1},
            {**november, "host": "node-b", "state": "RUNNING", "message": "Instance usage audit started...",
             "task_items": 2, "errors": 0},
            {**november, "period_beginning": dt.datetime(2026, 10, 1), "period_ending": dt.datetime(2026, 11, 1),
             "host": "node-c", "state": "DONE", "message": "October", "task_items": 9, "errors": 0},
        ])
    body = client.get("/v2.1/os-instance_usage_audit_log/2026-12-05 10:00:00.5", headers=admin()).json
    log = body["instance_usage_audit_log"]
    assert (log["num_hosts"], log["num_hosts_done"], log["num_hosts_running"], log["hosts_not_run"]) == (
        3, 1, 1, ["node-c"])
    assert (log["total_instances"], log["total_errors"], log["overall_status"]) == (5, 1, "1 of 3 hosts done. 1 errors.")
    assert log["log"]["node-a"] == {"state": "DONE", "instances": 3, "errors": 1,
                                    "message": "Instance usage audit ran for host node-a, 3 instances in 0.1 seconds."}


def test_the_period_follows_instance_usage_audit_period(client, conf):
    conf.set_override("instance_usage_audit_period", "day@18")
    log = client.get("/v2.1/os-instance_usage_audit_log/2026-12-05 10:00:00", headers=admin()).json
    assert log["instance_usage_audit_log"]["period_ending"] == "2026-12-04 18:00:00"
    assert log["instance_usage_audit_log"]["overall_status"] == "ALL hosts done. 0 errors."


@pytest.mark.parametrize("timestamp", ["2026-12-05", "2026-12-05T10:00:00", "2026-12-05 10:00:00.x", "yesterday"])
def test_a_timestamp_nova_cannot_read_is_its_400(client, timestamp):
    got = client.get(f"/v2.1/os-instance_usage_audit_log/{timestamp}", headers=admin())
    assert got.json == {"badRequest": {"code": 400, "message": f"Invalid timestamp for date {timestamp}"}}


def test_the_audit_log_is_an_administrators(client):
    for path in ("/v2.1/os-instance_usage_audit_log", "/v2.1/os-instance_usage_audit_log/2026-12-05 10:00:00"):
        rule = "list" if path.endswith("log") else "show"
        assert client.get(path, headers=user()).json["forbidden"]["message"] == (
            f"Policy doesn't allow os_compute_api:os-instance-usage-audit-log:{rule} to be performed.")
