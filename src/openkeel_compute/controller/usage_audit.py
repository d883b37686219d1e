"""Nova's periodic instance usage audit (``_instance_usage_audit``), run by the leading controller.

With ``[DEFAULT] instance_usage_audit`` on, every pass of the leader's periodic loop looks at the last
completed period (``instance_usage_audit_period``); for each node (Nova's compute host) whose audit of
that period has not run yet it records the task log row (RUNNING, the number of servers), sends
``compute.instance.exists`` / ``instance.exists`` for every server on the node during the period
(deleted ones included, as Nova's window query finds them) and ends the row DONE with the errors and
Nova's message. So each node's period is audited once, whatever the number of passes or replicas (the
task log's unique key refuses a second RUNNING row). os-instance_usage_audit_log reads these rows.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from openkeel_compute.compute import usage_audit
from openkeel_compute.db.api import reader, transaction

LOG = logging.getLogger(__name__)


def run(engine: Engine, unit: str, notifier: Any = None, now: Callable[[], dt.datetime] | None = None) -> int:
    """Audit the last completed period on every node not audited yet; returns the nodes audited.

    ``notifier`` sends the exists notifications (its ``exists(uuid, begin, end, host)``); None when
    none are sent (the task log is kept all the same, as Nova keeps it)."""
    moment = (now or usage_audit_now)()
    begin, end = usage_audit.last_completed_audit_period(unit, moment)
    with reader(engine) as conn:
        todo = [host for host in usage_audit.hosts(conn) if not usage_audit.audited(conn, host, begin, end)]
    done = 0
    for host in todo:
        if audit_host(engine, host, begin, end, notifier):
            done += 1
    return done


def audit_host(engine: Engine, host: str, begin: dt.datetime, end: dt.datetime, notifier: Any = None) -> bool:
    """One node's audit of [begin, end); False when another run took it first."""
    started = time.monotonic()
    try:
        with transaction(engine) as conn:
            servers = usage_audit.active_in(conn, host, begin, end)
            usage_audit.begin_task(conn, host, begin, end, len(servers))
    except IntegrityError:
        return False  # running, or ran, elsewhere
    LOG.info("Running instance usage audit for host %s from %s to %s. %d instances.", host, begin, end,
             len(servers))
    errors = 0
    for uuid in servers:
        try:
            if notifier is not None:
                notifier.exists(uuid, begin, end, host)
        except Exception:
            LOG.exception("Failed to generate usage audit for instance %s on host %s", uuid, host)
            errors += 1
    message = (f"Instance usage audit ran for host {host}, {len(servers)} instances in "
               f"{time.monotonic() - started} seconds.")
    with transaction(engine) as conn:
        usage_audit.end_task(conn, host, begin, end, errors, message)
    return True


def usage_audit_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
