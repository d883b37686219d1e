"""GET /os-migrations and GET /servers/{server_id}/migrations (+ /{migration_id}), as Nova
34.0.0 answers them.

/os-migrations lists the ``migrations`` table (resizes; compute/migration_list.py holds the query
and Nova's view); a server's migrations are its live migrations in progress (compute/live_migration.py). The
query schemas, policies and checks are Nova's at every microversion (2.23 links, migration_type
and the server's migrations, 2.59 uuid, paging and changes-since, 2.66 changes-before, 2.80 user
and project).
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from oslo_utils import timeutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import read_server
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import live_migration, migration_list
from openkeel_compute.policies import server_subresources as rules

_PARAM = {"type": "array", "items": {"type": "string"}}


def _single(item: dict) -> dict:
    return {"type": "array", "items": item, "maxItems": 1}


_v20: dict[str, Any] = {"type": "object", "properties": {name: _PARAM for name in (
    "hidden", "host", "instance_uuid", "source_compute", "status", "migration_type")}, "additionalProperties": True}
_v259 = copy.deepcopy(_v20)
_v259["properties"].update({
    "limit": _single({"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}),
    "marker": _single({"type": "string"}),
    "changes-since": _single({"type": "string", "format": "date-time"}),
})
_v259["additionalProperties"] = False
_v266 = copy.deepcopy(_v259)
_v266["properties"]["changes-before"] = _single({"type": "string", "format": "date-time"})
_v280 = copy.deepcopy(_v266)
_v280["properties"].update({"user_id": _single({"type": "string"}), "project_id": _single({"type": "string"})})
INDEX_QUERY = {"2.0-2.58": _v20, "2.59-2.65": _v259, "2.66-2.79": _v266, "2.80-": _v280}

_LENIENT = {"type": "object", "properties": {}, "additionalProperties": True}
_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}
SERVER_QUERY = {"2.23-2.101": _LENIENT, "2.102-": _STRICT}


def _last(req, name: str) -> str | None:
    values = req.query.get(name)
    return values[-1] if values else None


@operation(query=INDEX_QUERY, expected=(400,))
def index(req):
    common.can(req, rules.MIGRATIONS % "index")
    project_id = _last(req, "project_id")
    if not project_id or project_id != req.context.project_id:
        common.can(req, rules.MIGRATIONS % "index:all_projects")
    add_host = common.can(req, rules.MIGRATIONS % "index:host", fatal=False)
    filters = {name: _last(req, name) for name in ("instance_uuid", "source_compute", "status", "migration_type",
                                                   "host", "hidden") if _last(req, name) is not None}
    paged = req.version >= (2, 59)
    limit = marker = None
    if paged:
        since = _last(req, "changes-since")
        before = _last(req, "changes-before") if req.version >= (2, 66) else None
        if since and before and timeutils.parse_isotime(before) < timeutils.parse_isotime(since):
            raise faults.BadRequest("The value of changes-since must be less than or equal to changes-before.")
        if since:
            filters["changes-since"] = _naive(timeutils.parse_isotime(since))
        if before:
            filters["changes-before"] = _naive(timeutils.parse_isotime(before))
        marker = _last(req, "marker")
        limit = min(int(_last(req, "limit") or common.services(req).conf.api.max_limit),
                    common.services(req).conf.api.max_limit)
    if req.version >= (2, 80):
        for name in ("user_id", "project_id"):
            if _last(req, name) is not None:
                filters[name] = _last(req, name)
    with common.read(req) as conn:
        try:
            rows = migration_list.query(conn, filters, paged=paged, limit=limit, marker=marker)
        except migration_list.MarkerNotFound:
            raise faults.BadRequest(f"Marker {marker} could not be found.") from None
    body = {"migrations": [_listed(req, row, paged, add_host) for row in rows]}
    if paged and limit and len(rows) == limit:
        params = {k: v[-1] for k, v in req.query.items() if k != "marker" and v}
        body["migrations_links"] = [{"rel": "next", "href": common.links(req).next_link(
            "os-migrations", params, rows[-1]["uuid"])}]
    return body


def _listed(req, row: dict, paged: bool, add_host: bool) -> dict:
    """One row of os-migrations; from 2.23 a live migration in progress links to its server migration."""
    links = req.version >= (2, 23)
    shown = migration_list.view(row, links=links, uuid=paged, user_project=req.version >= (2, 80), host=add_host)
    if links and row["migration_type"] == live_migration.TYPE and row["status"] in live_migration.IN_PROGRESS:
        shown["links"] = common.links(req).links(f"servers/{row['instance_uuid']}/migrations", str(row["id"]))
    return shown


def _naive(value):
    return value.replace(tzinfo=None) - (value.utcoffset() or dt.timedelta(0)) if value.tzinfo else value


@operation(versions="2.23-", query=SERVER_QUERY, expected=(404,))
@wsgi_path_params
def server_index(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
    target = {"project_id": row["project_id"]}
    common.can(req, rules.SERVER_MIGRATIONS % "index", target)
    include_host = common.can(req, rules.SERVER_MIGRATIONS % "index:host", target, fatal=False)
    with common.read(req) as conn:
        found = live_migration.in_progress(conn, row["uuid"])
    return {"migrations": [_server_view(m, req, include_host) for m in found]}


def _server_view(m: dict, req, include_host: bool = True) -> dict:
    """Nova's server migration view: the counters as the migration holds them (KubeVirt reports none in its
    status: null), the hosts only where the policy allows (else null), 2.59 uuid, 2.80 user and project."""
    body = {"created_at": migration_list.iso(m["created_at"]), "dest_compute": None, "dest_host": None,
            "dest_node": None, "disk_processed_bytes": m["disk_processed"], "disk_remaining_bytes": m["disk_remaining"],
            "disk_total_bytes": m["disk_total"], "id": m["id"], "memory_processed_bytes": m["memory_processed"],
            "memory_remaining_bytes": m["memory_remaining"], "memory_total_bytes": m["memory_total"],
            "server_uuid": m["instance_uuid"], "source_compute": None, "source_node": None, "status": m["status"],
            "updated_at": migration_list.iso(m["updated_at"])}
    if req.version >= (2, 59):
        body["uuid"] = m["uuid"]
    if req.version >= (2, 80):
        body.update(user_id=m["user_id"], project_id=m["project_id"])
    if include_host:
        body.update({k: m[k] for k in ("dest_compute", "dest_host", "dest_node", "source_compute", "source_node")})
    return body


@operation(versions="2.23-", query=SERVER_QUERY, expected=(404,))
@wsgi_path_params
def server_show(req, server_id, migration_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
    common.can(req, rules.SERVER_MIGRATIONS % "show", {"project_id": row["project_id"]})
    with common.read(req) as conn:
        m = live_migration.by_id(conn, row["uuid"], migration_id)
    if m is None:
        raise faults.NotFound(f"In-progress live migration {migration_id} is not found for server {server_id}.")
    if m["migration_type"] != live_migration.TYPE:
        raise faults.NotFound(f"Migration {migration_id} for server {server_id} is not live-migration.")
    if m["status"] not in live_migration.IN_PROGRESS:
        raise faults.NotFound(f"Live migration {migration_id} for server {server_id} is not in progress.")
    return {"migration": _server_view(m, req)}
