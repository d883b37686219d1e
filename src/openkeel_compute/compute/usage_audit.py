"""The instance usage audit's periods and its task log, as Nova 34.0.0 keeps them.

The audit runs once per period (``[DEFAULT] instance_usage_audit_period``) on every compute host
and records one task-log row per host and period (task ``instance_usage_audit``): RUNNING while it
runs, DONE with the number of servers and errors after. ``report()`` is what
os-instance_usage_audit_log answers for the last period completed before a time; the compute hosts
are the cluster's nodes (table node_zones), as a server's ``host`` is its node.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.engine import Connection

from openkeel_compute.db.models import NODE_ZONES, TASK_LOG

TASK_NAME = "instance_usage_audit"


def last_completed_audit_period(unit: str, before: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """(begin, end) of the period of ``unit`` (hour, day, month or year, optionally ``@offset``)
    most recently completed before ``before`` (naive UTC), as Nova's utils computes it."""
    offset = 0
    if "@" in unit:
        unit, text = unit.split("@", 1)
        offset = int(text)
    now = before
    if unit == "month":
        offset = offset or 1
        end = dt.datetime(now.year, now.month, offset)
        if end >= now:
            year, month = (now.year - 1, 12) if now.month <= 1 else (now.year, now.month - 1)
            end = dt.datetime(year, month, offset)
        year, month = (end.year - 1, 12) if end.month <= 1 else (end.year, end.month - 1)
        return dt.datetime(year, month, offset), end
    if unit == "year":
        offset = offset or 1
        end = dt.datetime(now.year, offset, 1)
        if end >= now:
            return dt.datetime(now.year - 2, offset, 1), dt.datetime(now.year - 1, offset, 1)
        return dt.datetime(now.year - 1, offset, 1), end
    if unit == "day":
        end = dt.datetime(now.year, now.month, now.day, offset)
        if end >= now:
            end -= dt.timedelta(days=1)
        return end - dt.timedelta(days=1), end
    end = now.replace(minute=offset, second=0, microsecond=0)  # hour
    if end >= now:
        end -= dt.timedelta(hours=1)
    return end - dt.timedelta(hours=1), end


def report(conn: Connection, begin: dt.datetime, end: dt.datetime) -> dict:
    """The audit of one period on every compute host, in Nova's words and key order."""
    logs = conn.execute(select(TASK_LOG).where(TASK_LOG.c.task_name == TASK_NAME, TASK_LOG.c.deleted == 0,
                                               TASK_LOG.c.period_beginning == begin,
                                               TASK_LOG.c.period_ending == end)
                        .order_by(TASK_LOG.c.id)).mappings().all()
    hosts = set(conn.execute(select(NODE_ZONES.c.node)).scalars())
    seen = {log["host"] for log in logs}
    done = {log["host"] for log in logs if log["state"] == "DONE"}
    running = {log["host"] for log in logs if log["state"] == "RUNNING"}
    errors = sum(log["errors"] or 0 for log in logs)
    items = sum(log["task_items"] or 0 for log in logs)
    missing = hosts - seen
    progress = "ALL" if len(done) == len(hosts) else f"{len(done)} of {len(hosts)}"
    return {
        "period_beginning": str(begin),
        "period_ending": str(end),
        "num_hosts": len(hosts),
        "num_hosts_done": len(done),
        "num_hosts_running": len(running),
        "num_hosts_not_run": len(missing),
        "hosts_not_run": sorted(missing),
        "total_instances": items,
        "total_errors": errors,
        "overall_status": f"{progress} hosts done. {errors} errors.",
        "log": {log["host"]: {"state": log["state"], "instances": log["task_items"], "errors": log["errors"],
                              "message": log["message"]} for log in logs},
    }
