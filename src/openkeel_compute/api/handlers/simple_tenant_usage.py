"""/os-simple-tenant-usage (every project's usage, an administrator's) and /{tenant_id} (one
project's), as Nova 34.0.0 answers them; paged from 2.40 (limit, marker, a next link).

The servers counted are those launched before the period's end and not terminated before its
start, deleted ones included, ordered by project then uuid (Nova's query); ``start`` and ``end``
default to now, and an end in the future is now. api/views/usages.py does the arithmetic.
"""

from __future__ import annotations

import copy
import datetime as dt
from urllib.parse import parse_qs

from sqlalchemy import and_, or_, select

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.views import usages as view
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.db.models import INSTANCES, utcnow
from openkeel_compute.policies import contract as rules

I = INSTANCES.c

_STRING = {"type": "array", "items": {"type": "string"}}
_NON_NEGATIVE = {"type": "array",
                 "items": {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}}
_INDEX = {"type": "object", "properties": {"start": _STRING, "end": _STRING, "detailed": _STRING},
          "additionalProperties": True}
_SHOW = {"type": "object", "properties": {"start": _STRING, "end": _STRING}, "additionalProperties": True}


def _paged(schema: dict, strict: bool = False) -> dict:
    paged = copy.deepcopy(schema)
    paged["properties"].update(limit=_NON_NEGATIVE, marker=_STRING)
    paged["additionalProperties"] = not strict
    return paged


INDEX_QUERY = {"2.0-2.39": _INDEX, "2.40-2.74": _paged(_INDEX), "2.75-": _paged(_INDEX, strict=True)}
SHOW_QUERY = {"2.0-2.39": _SHOW, "2.40-2.74": _paged(_SHOW), "2.75-": _paged(_SHOW, strict=True)}
_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S.%f")
COLLECTION = "os-simple-tenant-usage"


def _parse_time(text: str | None, now: dt.datetime) -> dt.datetime:
    if not text:
        return now
    for fmt in _FORMATS:
        try:
            return dt.datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise faults.BadRequest("Invalid datetime string: Datetime is in invalid format")


def _period(req) -> tuple[dt.datetime, dt.datetime, bool]:
    """(start, stop, detailed) from the raw query string, read as Nova reads it: the first value of
    each, blank values dropped; the stop no later than now."""
    params = parse_qs(req.environ.get("QUERY_STRING", ""))
    start = _parse_time(params.get("start", [None])[0], utcnow())
    stop = _parse_time(params.get("end", [None])[0], utcnow())
    if not start < stop:
        raise faults.BadRequest("Invalid start time. The start time cannot occur after the end time.")
    now = utcnow()
    return start, min(stop, now), params.get("detailed", ["0"])[0] == "1"


def _page(req, paged: bool) -> tuple[int, str | None]:
    if not paged:
        return common.services(req).conf.api.max_limit, None
    marker = req.query.get("marker")
    return common.limit(req), marker[-1] if marker else None


def _servers(req, start: dt.datetime, stop: dt.datetime, project_id: str | None, limit: int,
             marker: str | None) -> list[dict]:
    """Nova's instance_get_active_by_window_joined: deleted servers too, by project then uuid."""
    query = select(INSTANCES).where(or_(I.terminated_at.is_(None), I.terminated_at > start), I.launched_at < stop)
    if project_id:
        query = query.where(I.project_id == project_id)
    with common.read(req) as conn:
        if marker is not None:
            after = conn.execute(select(I.project_id, I.uuid).where(I.uuid == marker).limit(1)).first()
            if after is None:
                raise faults.BadRequest(f"Marker {marker} could not be found.")
            query = query.where(or_(I.project_id > after.project_id,
                                    and_(I.project_id == after.project_id, I.uuid > after.uuid)))
        query = query.order_by(I.project_id, I.uuid).limit(limit)
        return [dict(row) for row in conn.execute(query).mappings()]


def _links(req, lines: list[dict], collection: str) -> list[dict] | None:
    """A next link when the page is full (Nova's _get_collection_links, keyed by instance_id)."""
    raw = req.query.get("limit")
    max_limit = common.services(req).conf.api.max_limit
    page = int(raw[-1]) if raw and int(raw[-1]) <= max_limit else max_limit
    if not (page and page == len(lines)):
        return None
    params = dict(sorted((k, v) for k, values in req.query.items() for v in values))
    return [{"rel": "next", "href": common.links(req).next_link(collection, params, lines[-1]["instance_id"])}]


@operation(query=INDEX_QUERY, expected=(400,))
def index(req):
    common.can(req, rules.TENANT_USAGE % "list")
    start, stop, detailed = _period(req)
    paged = req.at_least(2, 40)
    limit, marker = _page(req, paged)
    rows = _servers(req, start, stop, None, limit, marker)
    summaries, lines = view.tenant_usages(rows, start, stop, detailed=detailed, now=utcnow())
    body = {"tenant_usages": summaries}
    links = _links(req, lines, COLLECTION) if paged else None
    if links:
        body["tenant_usages_links"] = links
    return Response(view.dumps(body))


@operation(query=SHOW_QUERY, expected=(400,))
@wsgi_path_params
def show(req, tenant_id):
    common.can(req, rules.TENANT_USAGE % "show", {"project_id": tenant_id})
    start, stop, _ = _period(req)
    paged = req.at_least(2, 40)
    limit, marker = _page(req, paged)
    rows = _servers(req, start, stop, tenant_id, limit, marker)
    summaries, lines = view.tenant_usages(rows, start, stop, detailed=True, now=utcnow())
    body = {"tenant_usage": summaries[0] if summaries else {}}
    links = _links(req, lines, f"{COLLECTION}/{tenant_id}") if paged else None
    if links:
        body["tenant_usage_links"] = links
    return Response(view.dumps(body))
