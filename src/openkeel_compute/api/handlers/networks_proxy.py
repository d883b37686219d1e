"""/os-networks and /os-tenant-networks (list and show), Nova's proxies to the network service, up to
2.35 (404 after), answered as Nova 34.0.0 answers them with Neutron: the networks the caller's token
sees, each with its id and name and nothing else nova-network used to report (os-networks: every
other field null, the admin fields too for an admin; os-tenant-networks: ``cidr`` "None"). A network
the caller cannot see is 404 "Network not found".

Without [neutron] the one network is the cluster's pod network (compute/networks.py), under its
name and fixed uuid. Nova's ``[api] use_neutron_default_nets`` (networks of another project added to
os-tenant-networks) is not offered.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import server_networks, wsgi_path_params
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import networks as pod
from openkeel_compute.network import errors as net_errors
from openkeel_compute.policies import contract as rules

VERSIONS = "-2.35"  # Nova's MAX_PROXY_API_SUPPORT_VERSION
QUERY: dict[str, dict] = {"2.0-2.35": {}}  # Nova's query schema is empty: any query is accepted
FIELDS = ("id", "cidr", "netmask", "gateway", "broadcast", "dns1", "dns2", "cidr_v6", "gateway_v6", "label",
          "netmask_v6")
ADMIN_FIELDS = ("created_at", "updated_at", "deleted_at", "deleted", "injected", "bridge", "vlan",
                "vpn_public_address", "vpn_public_port", "vpn_private_address", "dhcp_start", "project_id", "host",
                "bridge_interface", "multi_host", "priority", "rxtx_base", "mtu", "dhcp_server", "enable_dhcp",
                "share_address")


def _networks(req) -> list[dict]:
    if not server_networks.enabled(req):
        name = pod.network_name(common.services(req).conf)
        return [{"id": pod.network_id(name), "name": name}]
    try:
        return server_networks.client(req).for_caller(req.context, req.environ).list_networks()
    except net_errors.NetworkError as exc:
        raise server_networks.answer(exc) from None


def _network(req, network_id: str) -> dict:
    if not server_networks.enabled(req):
        found = [n for n in _networks(req) if n["id"] == network_id]
        if not found:
            raise faults.NotFound("Network not found")
        return found[0]
    try:
        return server_networks.client(req).for_caller(req.context, req.environ).show_network(network_id)
    except net_errors.NetworkNotFound:
        raise faults.NotFound("Network not found") from None
    except net_errors.NetworkError as exc:
        raise server_networks.answer(exc) from None


def _view(req, network: dict) -> dict:
    fields = FIELDS + ADMIN_FIELDS if req.context.is_admin else FIELDS
    return {f: network.get("id") if f == "id" else network.get("name") if f == "label" else None for f in fields}


def _tenant_view(network: dict) -> dict:
    return {"id": network.get("id"), "cidr": "None", "label": network.get("name")}


def _can(req, rule: str) -> None:
    common.can(req, rule, {"project_id": req.context.project_id})


@operation(versions=VERSIONS, query=QUERY)
def networks_index(req):
    _can(req, rules.NETWORKS % "list")
    return {"networks": [_view(req, n) for n in _networks(req)]}


@operation(versions=VERSIONS, query=QUERY, expected=(404,))
@wsgi_path_params
def networks_show(req, network_id):
    _can(req, rules.NETWORKS % "show")
    return {"network": _view(req, _network(req, network_id))}


@operation(versions=VERSIONS, query=QUERY)
def tenant_networks_index(req):
    _can(req, rules.TENANT_NETWORKS % "list")
    return {"networks": [_tenant_view(n) for n in _networks(req)]}


@operation(versions=VERSIONS, query=QUERY, expected=(404,))
@wsgi_path_params
def tenant_networks_show(req, network_id):
    _can(req, rules.TENANT_NETWORKS % "show")
    return {"network": _tenant_view(_network(req, network_id))}
