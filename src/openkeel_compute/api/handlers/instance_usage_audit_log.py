"""/os-instance_usage_audit_log (the last audit period completed) and /{before_timestamp} (the last
one completed before it), as Nova 34.0.0 answers them: every compute host's run of the periodic
instance usage audit in that period, from the task log (compute/usage_audit.py).

Until the audit has run for a period, every host is reported as not run for it ("0 of N hosts done").
Nova lists the hosts not run in no particular order; OpenKeel sorts them.
"""

from __future__ import annotations

import datetime as dt

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import usage_audit
from openkeel_compute.db.models import utcnow
from openkeel_compute.policies import contract as rules

_LENIENT = {"type": "object", "properties": {}, "additionalProperties": True}
_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}
QUERY = {"2.0-2.101": _LENIENT, "2.102-": _STRICT}


def _report(req, before: dt.datetime) -> dict:
    begin, end = usage_audit.last_completed_audit_period(common.services(req).conf.instance_usage_audit_period,
                                                         before)
    with common.read(req) as conn:
        return usage_audit.report(conn, begin, end)


@operation(query=QUERY)
def index(req):
    common.can(req, rules.AUDIT_LOG % "list", {})
    return {"instance_usage_audit_logs": _report(req, utcnow())}


@operation(query=QUERY, expected=(400,))
@wsgi_path_params
def show(req, before_timestamp):
    common.can(req, rules.AUDIT_LOG % "show", {})
    try:
        before = dt.datetime.strptime(before_timestamp,
                                      "%Y-%m-%d %H:%M:%S.%f" if "." in before_timestamp else "%Y-%m-%d %H:%M:%S")
    except ValueError:
        raise faults.BadRequest(f"Invalid timestamp for date {before_timestamp}") from None
    return {"instance_usage_audit_log": _report(req, before)}
