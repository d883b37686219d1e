"""/os-networks, /os-tenant-networks, /os-floating-ips (list and show) and /os-floating-ip-pools, Nova's
proxies to the network service, up to
2.35 (404 after), answered as Nova 34.0.0 answers them with Neutron: the networks the caller's token
sees, each with its id and name and nothing else nova-network used to report (os-networks: every
other field null, the admin fields too for an admin; os-tenant-networks: ``cidr`` "None"). A network
the caller cannot see is 404 "Network not found".

A floating IP shows its address, its pool (its network's name, or id), its fixed IP and the server its
port belongs to (``instance_id``); one Neutron does not show is 404 "Floating IP not found for ID …".
``POST /os-floating-ips`` allocates one from the pool named (an external network's name or id), else
from ``[neutron] default_floating_pool``, with the caller's token; ``DELETE`` releases it (associated
or not), as Nova's proxy does.
The floating IP pools are the external networks (``router:external``), by name (or id when unnamed).

Without [neutron] the one network is the cluster's pod network (and there is no floating IP pool) (compute/networks.py), under its
name and fixed uuid. Nova's ``[api] use_neutron_default_nets`` (networks of another project added to
os-tenant-networks) is not offered.
"""

from __future__ import annotations

from oslo_utils import uuidutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, wsgi_path_params
from openkeel_compute.api.handlers.server_common import read_server
from openkeel_compute.api.wsgi import Response, operation
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
    if not network_common.enabled(req):
        name = pod.network_name(common.services(req).conf)
        return [{"id": pod.network_id(name), "name": name}]
    try:
        return network_common.client(req).for_caller(req.context, req.environ).list_networks()
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None


def _network(req, network_id: str) -> dict:
    if not network_common.enabled(req):
        found = [n for n in _networks(req) if n["id"] == network_id]
        if not found:
            raise faults.NotFound("Network not found")
        return found[0]
    try:
        return network_common.client(req).for_caller(req.context, req.environ).show_network(network_id)
    except net_errors.NetworkNotFound:
        raise faults.NotFound("Network not found") from None
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None


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


@operation(versions=VERSIONS, query=QUERY)
def floating_ip_pools_index(req):
    common.can(req, rules.FLOATING_IP_POOLS, {})
    if not network_common.enabled(req):
        return {"floating_ip_pools": []}
    try:
        pools = network_common.client(req).for_caller(req.context, req.environ).list_networks(
            **{"router:external": True})
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return {"floating_ip_pools": [{"name": pool.get("name") or pool["id"]} for pool in pools]}


_fip_view = network_common.fip_view
_ports_of = network_common.ports_of_fips
CREATE_BODY = {"2.0-2.35": {"type": ["object", "null"], "properties": {"pool": {"type": ["string", "null"]}}}}


@operation(versions=VERSIONS, query=QUERY)
def floating_ips_index(req):
    _can(req, rules.FLOATING_IPS % "list")
    if not network_common.enabled(req):
        return {"floating_ips": []}
    calls = network_common.client(req).for_caller(req.context, req.environ)
    project_id = req.context.project_id
    try:
        fips = calls.list_floating_ips(tenant_id=project_id)
        if not fips:
            return {"floating_ips": []}
        wanted = list(dict.fromkeys(f["floating_network_id"] for f in fips))
        networks = {n["id"]: n for n in calls.list_networks(id=wanted)}
        ports = _ports_of(calls, project_id, fips)
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return {"floating_ips": [_fip_view(f, networks.get(f["floating_network_id"]), ports.get(f["id"]))
                             for f in fips]}


@operation(versions=VERSIONS, query=QUERY, expected=(400, 404))
@wsgi_path_params
def floating_ips_show(req, floating_ip_id):
    _can(req, rules.FLOATING_IPS % "show")
    not_found = faults.NotFound(f"Floating IP not found for ID {floating_ip_id}")
    if not network_common.enabled(req):
        raise not_found
    calls = network_common.client(req).for_caller(req.context, req.environ)
    try:
        fip = calls.show_floating_ip(floating_ip_id)
        if fip is None:
            raise not_found
        network = calls.show_network(fip["floating_network_id"])
        port = _ports_of(calls, req.context.project_id, [fip]).get(fip["id"])
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return {"floating_ip": _fip_view(fip, network, port)}


def _pool_id(calls, name_or_id: str) -> str:
    """The external network a pool names (Nova's ``_get_floating_ip_pool_id_by_name_or_id``)."""
    search = {"router:external": True, "fields": "id"}
    search["id" if uuidutils.is_uuid_like(name_or_id) else "name"] = name_or_id
    nets = calls.list_networks(**search)
    if not nets:
        raise faults.NotFound("Floating IP pool not found.")
    if len(nets) > 1:
        # Nova raises a bare NovaException here (its 500); OpenKeel answers the 400 it means
        raise faults.BadRequest(f"Multiple floating IP pools matches found for name '{name_or_id}'")
    return nets[0]["id"]


def _shown_by_address(calls, project_id: str, address: str) -> dict:
    fip = network_common.fip_by_address(calls, address)
    try:
        network = calls.show_network(fip["floating_network_id"])
    except net_errors.NetworkNotFound as exc:
        raise faults.NotFound(exc.message) from None
    return _fip_view(fip, network, _ports_of(calls, project_id, [fip]).get(fip["id"]))


@operation(versions=VERSIONS, body=CREATE_BODY, expected=(400, 403, 404))
def floating_ips_create(req):
    _can(req, rules.FLOATING_IPS % "create")
    asked = (req.body or {}).get("pool")
    if not network_common.enabled(req):
        raise faults.NotFound("Floating IP pool not found.")  # the pod network has no external network
    calls = network_common.client(req).for_caller(req.context, req.environ)
    pool = asked or common.services(req).conf.neutron.default_floating_pool
    try:
        network_id = _pool_id(calls, pool)
        made = calls.create_floating_ip(network_id)
    except net_errors.NeutronError as exc:
        if exc.neutron_type in ("IpAddressGenerationFailure", "ExternalIpAddressExhausted"):
            raise faults.NotFound(f"No more floating IPs in pool {asked}." if asked
                                  else "No more floating IPs available.") from None
        if exc.neutron_type == "OverQuota":
            raise faults.Forbidden(f"IP allocation over quota in pool {asked}." if asked
                                   else "IP allocation over quota.") from None
        if exc.status == 400:
            raise faults.BadRequest(exc.text) from None
        raise network_common.answer(exc) from None
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    try:
        return {"floating_ip": _shown_by_address(calls, req.context.project_id, made["floating_ip_address"])}
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None


@operation(versions=VERSIONS, success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def floating_ips_delete(req, floating_ip_id):
    _can(req, rules.FLOATING_IPS % "delete")
    not_found = faults.NotFound(f"Floating IP not found for ID {floating_ip_id}")
    if not network_common.enabled(req):
        raise not_found
    calls = network_common.client(req).for_caller(req.context, req.environ)
    try:
        fip = calls.show_floating_ip(floating_ip_id)
        if fip is None:
            raise not_found
        try:
            calls.show_network(fip["floating_network_id"])
        except net_errors.NetworkNotFound:
            raise not_found from None
        address = fip["floating_ip_address"]
        device = network_common.fip_device(calls, network_common.fip_by_address(calls, address))
        if device:  # Nova loads the server the address is associated with: 404 when the caller cannot see it
            with common.read(req) as conn:
                read_server(conn, req, device)
        released = network_common.fip_by_address(calls, address)
        try:
            calls.delete_floating_ip(released["id"])
        except net_errors.NeutronError as exc:
            if exc.status == 404:
                raise faults.NotFound(f"Floating IP not found for address {address}.") from None
            raise
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None
    return Response(None)
