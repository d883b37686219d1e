"""GET /servers/{server_id}/os-instance-actions (+ /{request_id}): deleted servers from 2.21,
events for non-admins from 2.51, paging and updated_at from 2.58, changes-before from 2.66,
host and hostId from 2.62, event details from 2.84."""

from __future__ import annotations

from typing import Any

from oslo_utils import timeutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import errors, names
from openkeel_compute.compute.instances import instance_actions, store
from openkeel_compute.policies import servers as rules

_ACTION_KEYS = ("action", "instance_uuid", "request_id", "user_id", "project_id", "start_time", "message")


def _multi(item):
    return {"type": "array", "items": item, "maxItems": 1}


_INDEX_V258: dict[str, Any] = {
    "type": "object",
    "properties": {
        "limit": _multi({"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}),
        "marker": _multi({"type": "string"}),
        "changes-since": _multi({"type": "string", "format": "date-time"}),
    },
    "additionalProperties": False,
}
_INDEX_V266 = {**_INDEX_V258, "properties": {**_INDEX_V258["properties"],
                                             "changes-before": _multi({"type": "string", "format": "date-time"})}}
INDEX_QUERY = {"2.0-2.57": {"type": "object", "properties": {}, "additionalProperties": True},
               "2.58-2.65": _INDEX_V258, "2.66-": _INDEX_V266}
SHOW_QUERY = {"2.0-2.101": {"type": "object", "properties": {}, "additionalProperties": True},
              "2.102-": {"type": "object", "properties": {}, "additionalProperties": False}}


def _time(value):
    return value.replace(tzinfo=None).isoformat() if value is not None else None


def _action(req, row: dict) -> dict:
    body = {key: _time(row[key]) if key == "start_time" else row[key] for key in _ACTION_KEYS}
    if req.version >= (2, 58):
        body["updated_at"] = _time(row["updated_at"])
    return body


def _server(conn, req, server_id: str) -> dict:
    """The server, deleted ones too from 2.21; another project's is "not found"."""
    row = store.get(conn, server_id, read_deleted="yes" if req.version >= (2, 21) else "no")
    if not req.context.is_admin and row["project_id"] != req.context.project_id:
        raise errors.InstanceNotFound(server_id)
    return row


def _parse(value: str):
    return timeutils.normalize_time(timeutils.parse_isotime(value))


@operation(query=INDEX_QUERY, expected=(400, 404))
@wsgi_path_params
def index(req, server_id):
    q = req.query
    kwargs: dict = {}
    limit = None
    if req.version >= (2, 58):
        since = _parse(q["changes-since"][-1]) if "changes-since" in q else None
        before = _parse(q["changes-before"][-1]) if "changes-before" in q else None
        if since is not None and before is not None and before < since:
            raise faults.BadRequest("The value of changes-since must be less than or equal to changes-before.")
        limit = common.limit(req)
        kwargs = {"limit": limit, "marker": q["marker"][-1] if "marker" in q else None,
                  "changes_since": since, "changes_before": before}
    with common.read(req) as conn:
        row = _server(conn, req, server_id)
        common.can(req, rules.INSTANCE_ACTIONS % "list", {"project_id": row["project_id"]})
        actions = instance_actions.actions_of(conn, row["uuid"], **kwargs)
    result: dict = {"instanceActions": [_action(req, a) for a in actions]}
    if req.version >= (2, 58) and limit and len(actions) == limit:
        params = {k: v[-1] for k, v in q.items()}
        result["links"] = [{"rel": "next", "href": common.links(req).next_link(
            f"servers/{server_id}/os-instance-actions", params, actions[-1]["request_id"])}]
    return result


@operation(query=SHOW_QUERY, expected=(404,))
@wsgi_path_params
def show(req, server_id, request_id):
    with common.read(req) as conn:
        row = _server(conn, req, server_id)
        target = {"project_id": row["project_id"]}
        common.can(req, rules.INSTANCE_ACTIONS % "show", target)
        action = instance_actions.get_action(conn, row["uuid"], request_id)
    body = _action(req, action)
    all_events = common.can(req, rules.INSTANCE_ACTIONS % "events", target, fatal=False)
    if all_events or req.version >= (2, 51):
        details = req.version >= (2, 84) and common.can(req, rules.INSTANCE_ACTIONS % "events:details", target,
                                                        fatal=False)
        project = action["project_id"] or row["project_id"]
        events = []
        for raw in action["events"]:
            event = {"event": raw["event"], "start_time": _time(raw["start_time"]),
                     "finish_time": _time(raw["finish_time"]), "result": raw["result"]}
            if all_events:
                event["traceback"] = raw["traceback"]
                if req.version >= (2, 62):
                    event["host"] = raw["host"]
            if req.version >= (2, 62):
                event["hostId"] = names.host_id(raw["host"], project)
            if details:
                event["details"] = raw["details"]
            events.append(event)
        body["events"] = events
    return {"instanceAction": body}
