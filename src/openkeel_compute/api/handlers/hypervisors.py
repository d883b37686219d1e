"""/os-hypervisors: one hypervisor per cluster node, as Nova 34.0.0 answers at every microversion.

A node's hypervisor is its compute service's row (compute/compute_services.py): its id before 2.53 is
the service's, its uuid from 2.53 the node's resource provider's in Placement (as a Nova compute node's
is). ``hypervisor_type`` is ``KubeVirt``; ``hypervisor_version`` the node's kubelet version as Nova's
integer (major * 1000000 + minor * 1000 + patch: KubeVirt publishes no per-node version); ``host_ip``
the node's InternalIP; ``cpu_info`` from the labels KubeVirt's node labeller sets. The capacity (before
2.88) is the node's allocatable CPUs, memory and ephemeral storage; what is used is counted as Nova's
resource tracker counts it: the flavors of the servers on the node, plus ``reserved_host_memory_mb``
and ``reserved_host_disk_mb``. The uptime is answered as by a Nova driver that cannot tell it (501
before 2.88, ``null`` from 2.88).
"""

from __future__ import annotations

import json
import re
from typing import Any

from oslo_utils import strutils, uuidutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import compute_services as services_db
from openkeel_compute.policies import operator as rules

HYPERVISOR_TYPE = "KubeVirt"
_ANY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
_FQDN = {"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}
_BOOLEAN = {"type": ["boolean", "string"], "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes",
                                                    "yes", False, "False", "FALSE", "false", "0", "OFF", "Off", "off",
                                                    "NO", "No", "no"]}


def _single(item: dict) -> dict:
    return {"type": "array", "items": item, "maxItems": 1}


_NON_NEGATIVE = {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "minLength": 1}
_PAGING = {"limit": {"type": "array", "items": _NON_NEGATIVE}, "marker": {"type": "array", "items": {"type": "string"}}}
INDEX_QUERY = {
    "2.0-2.32": _ANY,
    "2.33-2.52": {"type": "object", "properties": _PAGING, "additionalProperties": True},
    "2.53-": {"type": "object", "properties": {
        "limit": _single(_NON_NEGATIVE), "marker": _single({"type": "string"}),
        "hypervisor_hostname_pattern": _single(_FQDN), "with_servers": _single(_BOOLEAN)},
        "additionalProperties": False},
}
SHOW_QUERY = {"2.0-2.52": _ANY, "2.53-": {"type": "object", "properties": {"with_servers": _single(_BOOLEAN)},
                                          "additionalProperties": False}}


def _last(req, name: str) -> str | None:
    values = req.query.get(name)
    return values[-1] if values else None


def _view(req, row, used: dict[str, int] | None, *, detail: bool, servers: list | None = None,
          with_servers: bool = False) -> dict:
    conf = common.services(req).conf
    uuids = req.version >= (2, 53)
    body: dict[str, Any] = {"id": row.node_uuid if uuids else row.id, "hypervisor_hostname": row.host,
                            "state": "up" if services_db.is_up(row, conf.service_down_time) else "down",
                            "status": "disabled" if row.disabled else "enabled"}
    if detail:
        body.update(hypervisor_type=HYPERVISOR_TYPE, hypervisor_version=row.hypervisor_version, host_ip=row.host_ip)
        body["service"] = {"id": row.uuid if uuids else row.id, "host": row.host,
                           "disabled_reason": row.disabled_reason}
    if detail and req.version < (2, 88):
        body.update(_capacity(conf, row, used or {}))
        if req.version >= (2, 28):
            body["cpu_info"] = json.loads(row.cpu_info) if row.cpu_info else {}
        else:
            body["cpu_info"] = row.cpu_info
    if detail and req.version >= (2, 88):
        body["uptime"] = None
    if servers:
        body["servers"] = servers
    elif with_servers and req.version >= (2, 75):
        body["servers"] = []
    return body


def _capacity(conf, row, used: dict[str, int]) -> dict[str, int]:
    memory_used = conf.reserved_host_memory_mb + used.get("memory_mb", 0)
    disk_used = conf.reserved_host_disk_mb // 1024 + used.get("local_gb", 0)
    return {"vcpus": row.vcpus, "memory_mb": row.memory_mb, "local_gb": row.local_gb,
            "vcpus_used": used.get("vcpus", 0), "memory_mb_used": memory_used, "local_gb_used": disk_used,
            "free_ram_mb": row.memory_mb - memory_used, "free_disk_gb": row.local_gb - disk_used,
            "current_workload": used.get("current_workload", 0), "running_vms": used.get("running_vms", 0),
            "disk_available_least": row.local_gb - disk_used}


def _matching(rows: list, pattern: str) -> list:
    """Nova's ``hypervisor_hostname LIKE '%pattern%'`` (``%`` and ``_`` are wildcards, case-insensitive)."""
    expression = re.compile("".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern),
                            re.IGNORECASE | re.DOTALL)
    found = [row for row in rows if expression.search(row.host)]
    if not found:
        raise faults.NotFound(f"No hypervisor matching '{pattern}' could be found.")
    return found


def _listing(req, *, detail: bool) -> dict:
    paged = req.version >= (2, 33)
    pattern = with_servers = None
    if req.version >= (2, 53):
        pattern = _last(req, "hypervisor_hostname_pattern")
        with_servers = strutils.bool_from_string(_last(req, "with_servers") or False, strict=True)
    marker = _last(req, "marker") if paged else None
    limit = common.limit(req) if paged else None
    with common.read(req) as conn:
        rows = [r for r in services_db.listed(conn, binary="nova-compute")
                if (r.node_uuid if req.version >= (2, 53) else r.id) is not None]
        links = paged
        if pattern is not None:
            if "limit" in req.query or marker:
                raise faults.BadRequest("The server could not comply with the request since it is either malformed "
                                        "or otherwise incorrect.")
            links = False
            rows = _matching(rows, pattern)
        elif paged:
            key = (lambda r: r.node_uuid) if req.version >= (2, 53) else (lambda r: str(r.id))
            if req.version >= (2, 53):
                rows.sort(key=lambda r: r.id)
            if marker is not None:
                position = next((i for i, r in enumerate(rows) if key(r) == marker), None)
                if position is None:
                    raise faults.BadRequest(f"marker [{marker}] not found")
                rows = rows[position + 1:]
            rows = rows[:limit]
        hosts = [r.host for r in rows]
        used = services_db.usage(conn, hosts) if detail and req.version < (2, 88) else {}
        servers = services_db.servers_on(conn, hosts) if with_servers else {}
    body: dict[str, Any] = {"hypervisors": [
        _view(req, r, used.get(r.host), detail=detail, servers=servers.get(r.host), with_servers=bool(with_servers))
        for r in rows]}
    if links and rows and limit is not None and len(rows) == limit:
        params = {k: v[-1] for k, v in req.query.items() if k != "marker" and v}
        collection = "os-hypervisors/detail" if detail else "os-hypervisors"
        body["hypervisors_links"] = [{"rel": "next", "href": common.links(req).next_link(
            collection, params, str(body["hypervisors"][-1]["id"]))}]
    return body


@operation(query=INDEX_QUERY, expected=(400, 404))
def index(req):
    common.can(req, rules.HYPERVISORS % "list", {})
    return _listing(req, detail=False)


@operation(query=INDEX_QUERY, expected=(400, 404))
def detail(req):
    common.can(req, rules.HYPERVISORS % "list-detail", {})
    return _listing(req, detail=True)


def _one(req, conn, hypervisor_id: str):
    if req.version >= (2, 53):
        if not uuidutils.is_uuid_like(hypervisor_id):
            raise faults.BadRequest(f"Invalid uuid {hypervisor_id}")
        row = next((r for r in services_db.listed(conn, binary="nova-compute") if r.node_uuid == hypervisor_id), None)
    else:
        try:
            strutils.validate_integer(hypervisor_id, "id")  # type: ignore[arg-type]  # (oslo takes what int() takes)
        except ValueError:
            raise faults.NotFound(f"Hypervisor with ID '{hypervisor_id}' could not be found.") from None
        row = services_db.by_id(conn, hypervisor_id, uuid=False)
    if row is None or row.binary != "nova-compute":
        raise faults.NotFound(f"Hypervisor with ID '{hypervisor_id}' could not be found.")
    return row


@operation(query=SHOW_QUERY, expected=(400, 404))
@wsgi_path_params
def show(req, hypervisor_id):
    with_servers = False
    if req.version >= (2, 53):
        with_servers = strutils.bool_from_string(_last(req, "with_servers") or False, strict=True)
    common.can(req, rules.HYPERVISORS % "show", {})
    with common.read(req) as conn:
        row = _one(req, conn, hypervisor_id)
        used = services_db.usage(conn, [row.host])[row.host]
        servers = services_db.servers_on(conn, [row.host])[row.host] if with_servers else None
    return {"hypervisor": _view(req, row, used, detail=True, servers=servers, with_servers=with_servers)}


@operation(versions="2.0-2.87", expected=(400, 404, 501))
@wsgi_path_params
def uptime(req, hypervisor_id):
    common.can(req, rules.HYPERVISORS % "uptime", {})
    with common.read(req) as conn:
        _one(req, conn, hypervisor_id)
    raise faults.Fault("The requested functionality is not supported.", 501)


@operation(versions="2.0-2.52", expected=(404,))
@wsgi_path_params
def search(req, hypervisor_id):
    pattern = hypervisor_id  # Nova's route names the pattern ``id``
    common.can(req, rules.HYPERVISORS % "search", {})
    with common.read(req) as conn:
        rows = _matching(services_db.listed(conn, binary="nova-compute"), pattern)
    return {"hypervisors": [_view(req, r, None, detail=False) for r in rows]}


@operation(versions="2.0-2.52", expected=(404,))
@wsgi_path_params
def servers(req, hypervisor_id):
    pattern = hypervisor_id
    common.can(req, rules.HYPERVISORS % "servers", {})
    with common.read(req) as conn:
        rows = _matching(services_db.listed(conn, binary="nova-compute"), pattern)
        on = services_db.servers_on(conn, [r.host for r in rows])
    return {"hypervisors": [_view(req, r, None, detail=False, servers=on[r.host]) for r in rows]}


@operation(versions="2.0-2.87")
def statistics(req):
    common.can(req, rules.HYPERVISORS % "statistics", {})
    conf = common.services(req).conf
    with common.read(req) as conn:
        rows = services_db.listed(conn, binary="nova-compute")
        used = services_db.usage(conn, [r.host for r in rows])
    totals = dict.fromkeys(("current_workload", "disk_available_least", "free_disk_gb", "free_ram_mb", "local_gb",
                            "local_gb_used", "memory_mb", "memory_mb_used", "running_vms", "vcpus", "vcpus_used"), 0)
    for row in rows:
        for key, value in _capacity(conf, row, used[row.host]).items():
            totals[key] += value
    return {"hypervisor_statistics": {"count": len(rows), **totals}}
