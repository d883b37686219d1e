"""What every handler that talks to Neutron shares ([neutron] auth_type set): whether Neutron is the
network service, the process's Neutron client, the API's answer to a network error, and the view of
the pod network's security group (without Neutron). Used by the
boot's network checks (server_networks.py), os-interface, and the /os-networks, /os-floating-ips and
/os-security-groups proxies, so that no handler module takes them from another.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.compute import networks
from openkeel_compute.conf import neutron as neutron_conf
from openkeel_compute.network import errors as net_errors

GROUP_DESCRIPTION = "Default security group"


def enabled(req) -> bool:
    return neutron_conf.configured(common.services(req).conf)


def client(req):
    """The process's Neutron client, made on first use (keystoneauth is imported then, not at start)."""
    services = common.services(req)
    found = getattr(services, "network", None)
    if found is None:
        from openkeel_compute.network.client import NeutronClient

        found = services.network = NeutronClient(services.conf)
    return found


def answer(exc: net_errors.NetworkError) -> faults.Fault:
    """The API's answer to a network error, as Nova's servers API turns the exception into one."""
    if exc.code == 400:
        return faults.BadRequest(exc.message)
    if exc.code == 403:
        return faults.Forbidden(exc.message)
    if exc.code == 409:
        return faults.Conflict(exc.message)
    if exc.code == 401:
        return faults.Fault(exc.message, 401)
    if isinstance(exc, net_errors.NeutronError) and 400 <= exc.status < 500:
        return faults.Fault(exc.message, exc.status)
    return faults.Fault(exc.message, 503)


def group_view(project_id: str, name: str) -> dict:
    """A security group of the pod network (no Neutron): ``default``, without rules."""
    return {"id": networks.group_id(project_id, name), "description": GROUP_DESCRIPTION, "name": name,
            "tenant_id": project_id, "rules": []}
