"""GET /servers/{server_id}/ips and /ips/{network_label}: a server's addresses by network.

The addresses are the ones the controller read from the VirtualMachineInstance's interfaces,
shown under the pod network's name (compute/networks.py); unlike the server body, they are
shown while the server builds too, as Nova shows its network cache here.
"""

from __future__ import annotations

import json

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import SUBRESOURCE_QUERY, read_server
from openkeel_compute.api.wsgi import operation
from openkeel_compute.policies import server_subresources as rules


def _networks(req, server_id: str, rule: str) -> dict:
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
    common.can(req, rules.IPS % rule, {"project_id": row["project_id"]})
    addresses = json.loads(row["network_info"]) if row["network_info"] else {}
    return {label: [{"version": a["version"], "addr": a["addr"]} for a in items]
            for label, items in addresses.items()}


@operation(query=SUBRESOURCE_QUERY, expected=(404,))
@wsgi_path_params
def index(req, server_id):
    return {"addresses": _networks(req, server_id, "index")}


@operation(query=SUBRESOURCE_QUERY, expected=(404,))
@wsgi_path_params
def show(req, server_id, network_label):
    networks = _networks(req, server_id, "show")
    if network_label not in networks:
        raise faults.NotFound("Instance is not a member of specified network")
    return {network_label: networks[network_label]}
