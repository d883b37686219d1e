"""GET/POST /flavors, GET /flavors/detail, GET/PUT/DELETE /flavors/{flavor_id}."""

from __future__ import annotations

from oslo_utils import strutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.schemas import flavors as schema
from openkeel_compute.api.views import flavors as view
from openkeel_compute.api.wsgi import Response, dumps, operation
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.policies import flavors as rules

EXTRA_SPECS_INDEX = rules.EXTRA_SPECS % "index"

_INDEX_QUERY = {"2.0-2.74": schema.index_query, "2.75-2.101": schema.index_query_v275,
                "2.102-": schema.index_query_v2102}


_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _include_extra_specs(req) -> bool:
    # From 2.61 extra specs are shown to whoever may list them; others silently get none.
    return req.version >= (2, 61) and common.can(req, EXTRA_SPECS_INDEX, fatal=False)


def _last(query: dict, key: str):
    values = query.get(key)
    return values[-1] if values else None


def _parse_is_public(value):
    if value is None:
        return True
    if isinstance(value, str) and value.lower() == "none":
        return None
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError:
        raise faults.BadRequest(f"Invalid is_public filter [{value}]") from None


def _list_query(req) -> catalog.ListQuery:
    q = req.query
    lq = catalog.ListQuery(sort_key=_last(q, "sort_key") or "flavorid", sort_dir=_last(q, "sort_dir") or "asc")
    lq.limit = common.limit(req)
    lq.marker = _last(q, "marker")
    if req.context.is_admin:
        lq.is_public = _parse_is_public(_last(q, "is_public"))
    else:
        lq.is_public = True
        lq.disabled = False
    for param, attr in (("minRam", "min_memory_mb"), ("minDisk", "min_root_gb")):
        if param in q:
            raw = _last(q, param)
            try:
                value = int(raw)
            except ValueError:
                raise faults.BadRequest(f"Invalid {param} filter [{raw}]") from None
            if not _INT64_MIN <= value <= _INT64_MAX:  # Nova's database driver overflows: a bad filter
                raise faults.BadRequest(f"Invalid {param} filter [{raw}]")
            setattr(lq, attr, value)
    if "name" in q:
        lq.name_regex = _last(q, "name")
    return lq


def _list(req, collection_name: str, detail: bool) -> Response:
    lq = _list_query(req)
    include_specs = detail and _include_extra_specs(req)
    ctx = req.context
    # Everything the page depends on besides the catalogue's rows (api/page_cache.py).
    key = (collection_name, req.version, include_specs, ctx.is_admin, ctx.project_id, req.url)
    pages = common.services(req).pages
    with common.read_one(req) as conn:
        before = catalog.generation(conn)
    page = pages.get(key, before)
    if page is not None:
        return Response(page)
    with common.read(req) as conn:
        flavors = catalog.list_flavors(conn, common.caller(req), lq)
        specs = catalog.extra_specs_of(conn, [f["id"] for f in flavors]) if include_specs else None
        after = catalog.generation(conn)
    links = common.links(req)
    if detail:
        items = [view.full(req, links, f, specs[f["id"]] if specs is not None else None) for f in flavors]
    else:
        items = [view.brief(req, links, f) for f in flavors]
    params = {k: v[-1] for k, v in req.query.items()}
    # The next link carries each parameter once: Nova sorts all (name, value) pairs and keeps the
    # last one per name, so a repeated parameter keeps its greatest value there (the page itself
    # is cut at the last value given).
    link_params = dict(sorted((k, v) for k, values in req.query.items() for v in values))
    page = dumps(view.collection(req, links, flavors, items, collection_name, params,
                                 common.services(req).conf.api.max_limit, link_params=link_params))
    if before == after:  # the rows were read from the one committed state that generation names
        pages.put(key, before, page)
    return Response(page)


@operation(query=_INDEX_QUERY, expected=(400,))
def index(req):
    return _list(req, "flavors", detail=False)


@operation(query=_INDEX_QUERY, expected=(400,))
def detail(req):
    return _list(req, "flavors/detail", detail=True)


@operation(query={"2.0-2.101": schema.show_query, "2.102-": schema.show_query_v2102}, expected=(404,))
@wsgi_path_params
def show(req, flavor_id):
    include_specs = _include_extra_specs(req)
    with common.read_one(req) as conn:
        flavor, specs = catalog.show(conn, flavor_id, common.caller(req), with_extra_specs=include_specs)
    return {"flavor": view.full(req, common.links(req), flavor, specs)}


@operation(
    body={"2.0": schema.create_v20, "2.1-2.54": schema.create, "2.55-2.101": schema.create_v255,
          "2.102-": schema.create_v2102},
    expected=(400, 409),
)
def create(req):
    common.can(req, rules.MANAGE % "create", {})
    vals = req.body["flavor"]
    is_public = vals.get("os-flavor-access:is_public", True)
    with common.write(req) as conn:
        flavor = catalog.create(
            conn,
            name=vals["name"],
            memory_mb=int(vals["ram"]),
            vcpus=int(vals["vcpus"]),
            root_gb=int(vals["disk"]),
            ephemeral_gb=int(vals.get("OS-FLV-EXT-DATA:ephemeral", 0)),
            flavorid=vals.get("id"),
            swap=int(vals.get("swap", 0)),
            rxtx_factor=float(vals.get("rxtx_factor", 1.0)),
            is_public=strutils.bool_from_string(is_public, strict=True),
            description=vals.get("description") if req.version >= (2, 55) else None,
        )
    common.notify(req, "create", dict(flavor, extra_specs={}, projects=[]))
    specs = {} if _include_extra_specs(req) else None
    return {"flavor": view.full(req, common.links(req), flavor, specs)}


@operation(versions="2.55-", body={"2.55-": schema.update}, expected=(400, 404))
@wsgi_path_params
def update(req, flavor_id):
    common.can(req, rules.MANAGE % "update", {})
    with common.write(req) as conn:
        flavor = catalog.update_description(conn, flavor_id, req.body["flavor"]["description"])
        flavor["extra_specs"] = catalog.extra_specs_of(conn, [flavor["id"]])[flavor["id"]]
        flavor["projects"] = catalog.projects_of(conn, flavor["id"])
    common.notify(req, "update", flavor)
    specs = flavor["extra_specs"] if _include_extra_specs(req) else None
    return {"flavor": view.full(req, common.links(req), flavor, specs)}


@operation(success=202, expected=(404,))
@wsgi_path_params
def delete(req, flavor_id):
    common.can(req, rules.MANAGE % "delete", {})
    with common.write(req) as conn:
        flavor = catalog.destroy(conn, flavor_id, with_extra_specs=common.services(req).notifier is not None)
    common.notify(req, "delete", flavor)
    return Response(None)
