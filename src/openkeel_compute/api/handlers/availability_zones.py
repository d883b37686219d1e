"""/os-availability-zone (and /detail): the zones of the cluster's nodes.

The controller publishes every node with its ``topology.kubernetes.io/zone`` label (nodes
without one are in ``[DEFAULT] default_availability_zone``), whether it is Ready and whether it
is cordoned. A cordoned node is a disabled compute service: it counts for no zone and is not
listed. A zone with a ready node is available; a zone whose nodes are all unready or cordoned is
listed as not available. The detail lists each available zone's nodes as hosts running
``nova-compute``.
"""

from __future__ import annotations

from openkeel_compute.api import common
from openkeel_compute.api.handlers.server_common import zones
from openkeel_compute.api.schemas import keypairs_quotas as schema
from openkeel_compute.api.wsgi import operation
from openkeel_compute.policies import keypairs_quotas as rules


def _time(value) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if value is not None else None


@operation(query=schema.AZ_QUERY)
def index(req):
    common.can(req, rules.AVAILABILITY_ZONE % "list", {})
    with common.read(req) as conn:
        available, unavailable = zones(conn, common.services(req).conf)
    info = [{"zoneName": z, "zoneState": {"available": True}, "hosts": None} for z in available]
    info += [{"zoneName": z, "zoneState": {"available": False}, "hosts": None} for z in unavailable]
    return {"availabilityZoneInfo": info}


@operation(query=schema.AZ_QUERY)
def detail(req):
    common.can(req, rules.AVAILABILITY_ZONE % "detail", {})
    with common.read(req) as conn:
        available, unavailable = zones(conn, common.services(req).conf)
    info = []
    for zone, rows in available.items():
        hosts = {r.node: {"nova-compute": {"available": bool(r.available), "active": True,
                                           "updated_at": _time(r.updated_at)}} for r in rows}
        info.append({"zoneName": zone, "zoneState": {"available": True}, "hosts": hosts})
    info += [{"zoneName": z, "zoneState": {"available": False}, "hosts": None} for z in unavailable]
    return {"availabilityZoneInfo": info}
