"""/os-hosts (up to 2.42): the nodes' compute services as Nova 34.0.0's deprecated hosts API answers.

The list shows the enabled compute services (a cordoned node's is disabled and not listed, as Nova
filters disabled services) with their zone; ``show`` a node's capacity and what its servers use, in
total and per project, as os-hypervisors counts them. Enabling, maintenance mode and power actions
are what Nova's drivers mostly lack, and so does the cluster through this API: they are answered as
Nova answers with such a driver (501) once the host is known; disable a node with os-services
(a cordon) instead.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import compute_services as services_db
from openkeel_compute.db.models import INSTANCES
from openkeel_compute.policies import operator as rules

VERSIONS = "2.0-2.42"
NOT_SUPPORTED = "The requested functionality is not supported."
_ENABLE = {"type": "string", "enum": ["enable", "disable", "Enable", "Disable", "ENABLE", "DISABLE"]}
UPDATE = {"2.0-": {"type": "object", "properties": {"status": _ENABLE, "maintenance_mode": _ENABLE},
                   "anyOf": [{"required": ["status"]}, {"required": ["maintenance_mode"]}],
                   "additionalProperties": False}}
INDEX_QUERY = {"2.0-": {"type": "object", "properties": {"zone": {"type": "array", "items": {"type": "string"}}},
                        "additionalProperties": True}}


@operation(versions=VERSIONS, query=INDEX_QUERY)
def index(req):
    common.can(req, rules.HOSTS % "list", {})
    default = common.services(req).conf.default_availability_zone
    zone = (req.query.get("zone") or [None])[-1]
    with common.read(req) as conn:
        rows = [r for r in services_db.listed(conn) if not r.disabled]
    hosts = [{"host_name": r.host, "service": "compute", "zone": r.zone or default} for r in rows]
    return {"hosts": [h for h in hosts if not zone or h["zone"] == zone]}


def _known(conn, host: str):
    row = next(iter(services_db.listed(conn, host=host)), None)
    if row is None:
        raise faults.NotFound(f"Host '{host}' is not mapped to any cell")
    return row


@operation(versions=VERSIONS, expected=(404,))
@wsgi_path_params
def show(req, host_name):
    common.can(req, rules.HOSTS % "show", {})
    conf = common.services(req).conf
    with common.read(req) as conn:
        row = _known(conn, host_name)
        used = services_db.usage(conn, [host_name])[host_name]
        servers = list(conn.execute(INSTANCES.select().with_only_columns(
            INSTANCES.c.project_id, INSTANCES.c.vcpus, INSTANCES.c.memory_mb, INSTANCES.c.root_gb,
            INSTANCES.c.ephemeral_gb).where(INSTANCES.c.host == host_name, INSTANCES.c.deleted == 0)
            .order_by(INSTANCES.c.id)))

    def resource(project: str, cpu: int, memory_mb: int, disk_gb: int) -> dict[str, Any]:
        return {"resource": {"host": host_name, "project": project, "cpu": cpu, "memory_mb": memory_mb,
                             "disk_gb": disk_gb}}

    projects: dict[str, list[int]] = {}
    for server in servers:
        totals = projects.setdefault(server.project_id, [0, 0, 0])
        totals[0] += server.vcpus or 0
        totals[1] += server.memory_mb or 0
        totals[2] += (server.root_gb or 0) + (server.ephemeral_gb or 0)
    return {"host": [
        resource("(total)", row.vcpus, row.memory_mb, row.local_gb),
        resource("(used_now)", used["vcpus"], conf.reserved_host_memory_mb + used["memory_mb"],
                 conf.reserved_host_disk_mb // 1024 + used["local_gb"]),
        resource("(used_max)", used["vcpus"], used["memory_mb"], used["local_gb"]),
        *(resource(project, *totals) for project, totals in projects.items())]}


def _unsupported(req, host_name: str, rule: str) -> None:
    common.can(req, rules.HOSTS % rule, {})
    with common.read(req) as conn:
        _known(conn, host_name)
    raise faults.Fault(NOT_SUPPORTED, 501)


@operation(versions=VERSIONS, body=UPDATE, expected=(400, 404, 501))
@wsgi_path_params
def update(req, host_name):
    _unsupported(req, host_name, "update")


@operation(versions=VERSIONS, expected=(400, 404, 501))
@wsgi_path_params
def reboot(req, host_name):
    _unsupported(req, host_name, "reboot")


@operation(versions=VERSIONS, expected=(400, 404, 501))
@wsgi_path_params
def shutdown(req, host_name):
    _unsupported(req, host_name, "shutdown")


@operation(versions=VERSIONS, expected=(400, 404, 501))
@wsgi_path_params
def startup(req, host_name):
    _unsupported(req, host_name, "start")
