"""GET /servers and GET /servers/detail: Nova's filters, sort keys, paging and all_tenants."""

from __future__ import annotations

import functools
import json
import re
from typing import cast

from oslo_utils import strutils, timeutils
from sqlalchemy import Boolean, Integer, and_, exists, select

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import server_port_groups
from openkeel_compute.api.handlers.server_common import shown
from openkeel_compute.api.schemas import servers as schema
from openkeel_compute.api.views import servers as view
from openkeel_compute.api.wsgi import Response, dumps, operation
from openkeel_compute.catalog import errors as catalog_errors
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import block_device_rows, networks
from openkeel_compute.compute.instances import instance_faults, listing, paging, store
from openkeel_compute.db import generations, regex
from openkeel_compute.db.models import INSTANCES, TAGS
from openkeel_compute.policies import servers as rules

I = INSTANCES.c  # the column namespace, as in compute/instances/base.py
_PAGING_SORTING = ("sort_key", "sort_dir", "limit", "marker")
_TAG_FILTERS = ("tags", "tags-any", "not-tags", "not-tags-any")
# Filters compared for equality, by column (the rest of Nova's exact filters: locked, flavor, tags).
_EXACT = {"project_id": "project_id", "tenant_id": "project_id", "user_id": "user_id", "image": "image_ref",
          "image_ref": "image_ref", "vm_state": "vm_state", "task_state": "task_state", "host": "host",
          "uuid": "uuid"}
# Every other filter that names a column of Nova's instances table (``name`` standing for display_name) is
# a regular expression on the column's text: numbers in decimal, booleans as 1/0, times as stored. Nova's
# rule for whatever its exact filters did not take; a filter naming no column (``description``) is
# ignored, and a NULL matches nothing (Nova's rule on MySQL and PostgreSQL). The query schema lets no
# other column's name through (as Nova's, it drops unknown parameters before 2.75 and refuses them after).
_REGEX_COLUMNS = frozenset({
    "kernel_id", "ramdisk_id", "hostname", "launch_index", "key_name", "power_state", "node", "reservation_id",
    "launched_at", "terminated_at", "availability_zone", "display_name", "display_description", "locked_by",
    "root_device_name", "config_drive", "access_ip_v4", "access_ip_v6", "auto_disk_config", "progress",
    "created_at"})


def _boolean_text_matches(test, value) -> bool:
    """A boolean column's text is 1 or 0, as the database shows it to a regular expression."""
    return test(None if value is None else int(value))


_BRIEF_COLUMNS = (I.uuid, I.display_name)  # all GET /servers shows of a server
# What a page of servers is made of: the server tables (db/generations.py) and, for the ``flavor``
# filter, the flavors.
_GENERATIONS = ("servers", "flavors")


def _allowed_filters(version) -> tuple[str, ...]:
    """What a caller without the allow_all_filters rule may filter on, by microversion."""
    allowed: tuple[str, ...] = ("reservation_id", "name", "status", "image", "flavor", "ip", "changes-since",
                                "all_tenants")
    if version >= (2, 5):
        allowed += ("ip6",)
    if version >= (2, 26):
        allowed += _TAG_FILTERS
    if version >= (2, 66):
        allowed += ("changes-before",)
    if version >= (2, 73):
        allowed += ("locked",)
    if version >= (2, 83):
        allowed += ("availability_zone", "config_drive", "key_name", "created_at", "launched_at",
                    "terminated_at", "power_state", "task_state", "vm_state", "progress", "user_id")
    if version >= (2, 90):
        allowed += ("hostname",)
    return allowed


def _bool(value) -> bool:
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError as exc:
        raise faults.BadRequest(str(exc)) from None


def _time(value: str, name: str):
    try:
        return timeutils.normalize_time(timeutils.parse_isotime(value))
    except ValueError:
        raise faults.BadRequest(f"Invalid filter field: {name}.") from None


def _sort(req, checked: bool = True, validate: bool = True):
    """Nova's sort keys and directions in full (ties broken by uuid); ``checked``: the directions are
    checked (not with an ip filter, as in Nova); ``validate`` false: never (an ip filter no server
    matches answers before Nova's database sees the directions)."""
    q = req.query
    keys = [k.strip() for k in q.get("sort_key", [])] or ["created_at"]
    dirs = [d.strip() for d in q.get("sort_dir", [])] or ["desc"]
    ignored = schema.IGNORED_SORT_KEYS_V273 if req.version >= (2, 73) else schema.IGNORED_SORT_KEYS
    for key in list(keys):
        if key in ignored:
            index = keys.index(key)
            if len(dirs) > index:
                dirs.pop(index)
            keys.pop(index)
        elif key in ("host", "node") and not req.context.is_admin:
            raise faults.Forbidden(f"Only administrators can sort servers by {key}")
    if validate and (checked or keys):
        # Nova checks the directions as they are now: no key left but a direction is too many directions
        # (where it lists the servers still being scheduled, which it skips with an ip filter)
        for direction in dirs:
            if direction not in ("asc", "desc"):
                raise faults.BadRequest("Invalid input received: Unknown sort direction, must be 'desc' or 'asc'")
        if len(dirs) > len(keys):
            raise faults.BadRequest("Invalid input received: Sort direction size exceeds sort key size")
    if not keys:
        # every key given was one Nova ignores: its default order (newest first) applies
        keys, dirs = ["created_at", "id"], ["desc", "desc"]
    if "uuid" not in keys:
        # Nova breaks ties by uuid, ascending, right after the keys given (a list merged from several
        # cells must page the same way twice); a key without a direction then takes the first one
        keys, dirs = [*keys, "uuid"], [*dirs, "asc"]
    while len(dirs) < len(keys):
        dirs.append(dirs[0])
    return keys, dirs


def _where(req, conn, search: dict, q: dict, all_tenants: bool):
    """The list's WHERE clause from the search options; None when nothing can match."""
    ctx = req.context
    statuses = q.get("status") if "status" in search else None
    changes_since = _time(search["changes-since"], "changes-since") if "changes-since" in search else None
    changes_before = None
    if "changes-before" in search:
        changes_before = _time(search["changes-before"], "changes-before")
        if changes_since is not None and changes_before < changes_since:
            raise faults.BadRequest("The value of changes-since must be less than or equal to changes-before.")
    deleted = None
    if "deleted" in search:
        deleted = strutils.bool_from_string(search["deleted"], default=False)
    if search.get("vm_state") == "deleted":
        if not ctx.is_admin:
            raise faults.Forbidden("Only administrators may list deleted instances")
        deleted = True
    project_id = None if all_tenants else ctx.project_id
    where = listing.list_filter(is_admin=bool(ctx.is_admin), project_id=project_id, statuses=statuses,
                                deleted=deleted, changes_since=changes_since, changes_before=changes_before,
                                all_tenants=all_tenants or project_id is None,
                                version_2_38=req.version >= (2, 38),
                                soft_deleted=bool(search["soft_deleted"]) if "soft_deleted" in search else None)
    if where is None:
        return None
    clauses = [where]
    tests: list[regex.Test] = []
    for name, value in search.items():
        if name in _EXACT and not (name == "vm_state" and statuses):
            if name in ("project_id", "tenant_id") and not all_tenants:
                continue
            if name == "tenant_id" and "project_id" in search:
                continue
            column = INSTANCES.c[_EXACT[name]]
            if isinstance(column.type, Integer):
                # an integer column equals no text but an integer's (PostgreSQL refuses to compare)
                try:
                    value = int(value)
                except ValueError:
                    return None
            clauses.append(column == value)
        elif name == "name" or name in _REGEX_COLUMNS:
            column = INSTANCES.c["display_name" if name == "name" else name]
            test = functools.partial(regex.search, _pattern(name, value))
            if isinstance(column.type, Boolean):
                test = functools.partial(_boolean_text_matches, test)
            tests.append((column, test))
        elif name in ("ip", "ip6"):
            tests.append((I.network_info, functools.partial(_ip_matches, _pattern(name, value),
                                                            4 if name == "ip" else 6)))
    if "flavor" in search:
        try:
            flavor = catalog.get(conn, search["flavor"])
        except catalog_errors.NotFound:  # an unknown flavor lists nothing, as in Nova
            return None
        clauses.append(I.instance_type_id == flavor["id"])
    if "locked" in search:
        clauses.append(I.locked.is_(_bool(search["locked"])))
    if req.version >= (2, 26):
        for name in _TAG_FILTERS:
            if name in search:
                clauses.append(_tag_clause(name, search[name].split(",")))
    # Regular expressions are matched last, in linear time, on the rows the other criteria keep.
    return regex.narrow(conn, I.uuid, and_(*clauses), tests)


def _flavor_known(conn, flavorid: str) -> bool:
    try:
        catalog.get(conn, flavorid)
    except catalog_errors.NotFound:
        return False
    return True


def _pattern(name: str, value: str):
    """A filter's pattern for the linear-time engine; what it cannot run is refused as Nova's
    query validation refuses a pattern that is not a regular expression."""
    try:
        return regex.compile_pattern(value)
    except (re.error, regex.Unsupported):
        raise faults.BadRequest(
            f"Invalid input for query parameters {name}. Value: {value}. {value!r} is not a 'regex'") from None


def _tag_clause(name: str, tags: list[str]):
    def has(tag):
        return exists(select(TAGS.c.tag).where(TAGS.c.resource_id == I.uuid, TAGS.c.tag == tag))

    any_of = exists(select(TAGS.c.tag).where(TAGS.c.resource_id == I.uuid, TAGS.c.tag.in_(tags)))
    if name == "tags":
        return and_(*[has(t) for t in tags])
    if name == "tags-any":
        return any_of
    if name == "not-tags":
        return ~and_(*[has(t) for t in tags])
    return ~any_of


def _ip_matches(pattern, version: int, network_info: str | None) -> bool:
    addresses = json.loads(network_info) if network_info else {}
    return any(pattern.search(a["addr"]) for net in addresses.values() for a in net if a.get("version") == version)


def _list(req, collection_name: str, detail: bool) -> Response:
    common.can(req, rules.SERVERS % ("detail" if detail else "index"))
    q = req.query
    search = {k: v[-1] for k, v in q.items()}
    all_filters = common.can(req, rules.SERVERS % "allow_all_filters", fatal=False)
    if all_filters:
        for name in _PAGING_SORTING:
            search.pop(name, None)
    else:
        allowed = _allowed_filters(req.version)
        search = {k: v for k, v in search.items() if k in allowed}
    for name in search:
        if name in schema.JOINED_TABLE_PARAMS or name.startswith("_"):
            raise faults.BadRequest(f"Invalid filter field: {name}.")
    if "all_tenants" in search:
        value = search["all_tenants"]
        all_tenants = _bool(value) if value else True
    else:
        all_tenants = False
    if all_tenants:
        common.can(req, rules.SERVERS % ("detail:get_all_tenants" if detail else "index:get_all_tenants"))
    decisions = shown(req, None) if detail else None
    # Everything the page depends on besides the rows (api/page_cache.py): the query, the caller's
    # project (the default scope) and admin flag (sorting by host, deleted servers, fault details),
    # the policy decisions that filter or change bodies, the microversion and the URL (links).
    ctx = req.context
    key = (collection_name, req.version, req.url, ctx.project_id, bool(ctx.is_admin), all_filters, decisions)
    pages = common.services(req).server_pages
    with common.read_one(req) as raw:
        before = generations.current(raw, _GENERATIONS)
    # A detail page whose groups come from Neutron is never kept: they change without the servers changing.
    keep = not (detail and server_port_groups.from_neutron(req))
    page = pages.get(key, before) if keep else None
    if page is not None:
        return Response(page)
    ip_filter = "ip" in search or "ip6" in search
    nothing = unknown_flavor = False
    if ip_filter or "flavor" in search:
        # Nova looks the flavor up first and answers an empty list when there is none, before its
        # database sees the sort directions or the marker; then it asks the network service for the
        # ports with such an address: when none matches it answers an empty list before the sort
        # directions too. (The checks of the query itself, in _where, come before both.)
        with common.read(req) as conn:
            nothing = _where(req, conn, search, q, all_tenants) is None
            unknown_flavor = "flavor" in search and not _flavor_known(conn, search["flavor"])
    marker = q["marker"][-1] if "marker" in q else None
    # with an ip filter Nova lists the servers still being scheduled (where it checks the directions
    # as they are) only when a marker is given: the marker could be one of them
    scheduled_listed = not ip_filter or marker is not None
    keys, dirs = _sort(req, checked=scheduled_listed,
                       validate=not (unknown_flavor or (ip_filter and nothing and not scheduled_listed)))
    max_limit = common.services(req).conf.api.max_limit
    limit = common.limit(req)
    with common.read(req) as conn:
        where = _where(req, conn, search, q, all_tenants)
        rows = [] if unknown_flavor else paging.list_page(
            conn, where, sort_keys=keys, sort_dirs=dirs, limit=limit, marker=marker,
            columns=None if detail else _BRIEF_COLUMNS)
        if detail:
            datas = _details(conn, req, rows, cast(view.Shown, decisions))  # taken for every detail list
        after = generations.current(conn, _GENERATIONS)
    links = common.links(req)
    if detail:
        server_port_groups.fill(req, datas)  # one ports query for the page (Nova's), outside the transaction
        items = [view.full(req, links, data, cast(view.Shown, decisions), in_list=True) for data in datas]
    else:
        items = [view.brief(links, row) for row in rows]
    params = {k: v[-1] for k, v in q.items()}
    page = dumps(view.collection(req, links, rows, items, collection_name, limit, max_limit, params))
    # Kept only when the rows came from the one committed state the generation names, and when the
    # page shows no time of its own: a server never updated shows the current time as "updated".
    if keep and before == after and not (detail and any(r["updated_at"] is None or r["created_at"] is None
                                                        for r in rows)):
        pages.put(key, before, page)
    return Response(page)


def _details(conn, req, rows: list[dict], decisions: view.Shown) -> list[view.ServerData]:
    """What the page's bodies show besides their rows, read for all of them at once."""
    uuids = [r["uuid"] for r in rows]
    metadata = paging.metadata_by_instance(conn, uuids)
    system = paging.metadata_by_instance(conn, uuids, system=True) if req.version >= (2, 98) else {}
    tags = paging.tags_by_instance(conn, uuids) if req.version >= (2, 26) else {}
    placed = [] if server_port_groups.from_neutron(req) else [r["uuid"] for r in rows if networks.on_network(r)]
    groups = ({u: networks.groups_from(system.get(u, {})) for u in placed} if req.version >= (2, 98)
              else networks.groups_by_instance(conn, placed))
    faulty = [r["uuid"] for r in rows if store.status(r) in ("ERROR", "DELETED")]
    faults_by_uuid = instance_faults.latest_faults(conn, faulty)
    hosts = networks.host_states(conn, [r["host"] for r in rows]) if decisions.host_status is not None else {}
    volumes = block_device_rows.attached_by_instance(conn, uuids)
    return [view.ServerData(row=row, metadata=metadata.get(row["uuid"], {}), system_metadata=system.get(row["uuid"], {}),
                            tags=tags.get(row["uuid"], []), fault=faults_by_uuid.get(row["uuid"]),
                            security_groups=groups.get(row["uuid"], []), host_status=hosts.get(row["host"]),
                            volumes=volumes.get(row["uuid"], []))
            for row in rows]


@operation(query=schema.INDEX_QUERY, expected=(400, 403))
def index(req):
    return _list(req, "servers", detail=False)


@operation(query=schema.INDEX_QUERY, expected=(400, 403))
def detail(req):
    return _list(req, "servers/detail", detail=True)

