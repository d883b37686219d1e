"""The instance usage audit's periods and its task log, as Nova 34.0.0 keeps them.

The audit runs once per period (``[DEFAULT] instance_usage_audit_period``) on every compute host
and records one task-log row per host and period (task ``instance_usage_audit``): RUNNING while it
runs, DONE with the number of servers and errors after. ``report()`` is what
os-instance_usage_audit_log answers for the last period completed before a time; the compute hosts
are the cluster's nodes (table node_zones), as a server's ``host`` is its node.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import and_, insert, or_, select, update
from sqlalchemy.engine import Connection

from openkeel_compute.db.models import INSTANCES, NODE_ZONES, TASK_LOG, utcnow

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


# --- the audit's own steps (the controller runs them: controller/usage_audit.py) ------------------------

def hosts(conn: Connection) -> list[str]:
    """The compute hosts the audit runs for: the cluster's nodes."""
    return sorted(conn.execute(select(NODE_ZONES.c.node)).scalars())


def _log_of(task: str, host: str, begin: dt.datetime, end: dt.datetime):
    return and_(TASK_LOG.c.task_name == task, TASK_LOG.c.host == host, TASK_LOG.c.period_beginning == begin,
                TASK_LOG.c.period_ending == end, TASK_LOG.c.deleted == 0)


def audited(conn: Connection, host: str, begin: dt.datetime, end: dt.datetime) -> bool:
    """Whether the audit of this period already ran (or runs) for ``host``."""
    return conn.execute(select(TASK_LOG.c.id).where(_log_of(TASK_NAME, host, begin, end))).first() is not None


def active_in(conn: Connection, host: str, begin: dt.datetime, end: dt.datetime) -> list[str]:
    """The servers on ``host`` during [begin, end): launched before its end, not terminated before its
    beginning, deleted ones included (Nova's instance_get_active_by_window_joined)."""
    query = (select(INSTANCES.c.uuid)
             .where(INSTANCES.c.host == host, INSTANCES.c.launched_at < end,
                    or_(INSTANCES.c.terminated_at.is_(None), INSTANCES.c.terminated_at > begin))
             .order_by(INSTANCES.c.id))
    return list(conn.execute(query).scalars())


def begin_task(conn: Connection, host: str, begin: dt.datetime, end: dt.datetime, items: int) -> None:
    """The period's RUNNING row (the unique key refuses a second one: the audit already runs)."""
    now = utcnow()
    conn.execute(insert(TASK_LOG).values(
        task_name=TASK_NAME, state="RUNNING", host=host, period_beginning=begin, period_ending=end,
        message="Instance usage audit started...", task_items=items or 0, errors=0, created_at=now,
        updated_at=None, deleted=0))


def end_task(conn: Connection, host: str, begin: dt.datetime, end: dt.datetime, errors: int, message: str) -> None:
    conn.execute(update(TASK_LOG).where(_log_of(TASK_NAME, host, begin, end)).values(
        state="DONE", errors=errors, message=message, updated_at=utcnow()))
