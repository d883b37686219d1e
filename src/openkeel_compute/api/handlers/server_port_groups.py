"""``security_groups`` in server bodies when Neutron is the network service ([neutron] auth_type set).

Nova's servers view builder reads them from Neutron whenever it shows them (GET /servers/{id}, every
server of a GET /servers/detail page at once, and the bodies of PUT and rebuild from 2.75): the groups
of the server's ports, as the caller sees them (network/port_groups.py). So they follow
addSecurityGroup/removeSecurityGroup and any change of a port's groups made in Neutron itself, and a
server without ports shows no ``security_groups`` at all. The calls are made with the caller's token,
after the request's database work, never inside a transaction.

When Neutron fails, the request fails: a token Neutron refuses is a 401 with webob's words (Nova's
Unauthorized reaches its fault wrapper, which does not show an exception's own text; Nova's generic 500
naming NeutronAdminCredentialConfigurationInvalid for an admin's), Neutron's 403 is passed on with
neutronclient's text. Anything else (Neutron unreachable, a 5xx, another refusal) is where Nova answers its
generic 500 "Unexpected API Error" (an exception its view does not expect: Nova's own defect); OpenKeel
answers 503 with what Neutron did, as its other Neutron calls do (docs/networking.md).

Without [neutron] a server body shows the names kept with the server (compute/networks.py).
"""

from __future__ import annotations

from openkeel_compute.api import faults
from openkeel_compute.api.handlers import network_common
from openkeel_compute.api.views import servers as view
from openkeel_compute.network import errors as net_errors

_UNEXPECTED = "Unexpected API Error. Please contact the administrator\n<class '{}'>"
_ADMIN_REFUSED = "nova.exception.NeutronAdminCredentialConfigurationInvalid"
_UNAUTHORIZED = ("This server could not verify that you are authorized to access the document you requested. "
                 "Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand "
                 "how to supply the credentials required.")  # webob's HTTPUnauthorized


def from_neutron(req) -> bool:
    """Whether server bodies take their groups from Neutron (else from the names kept with the server)."""
    return network_common.enabled(req)


def fill(req, items: list[view.ServerData]) -> None:
    """Each server's ``security_groups`` from its ports; nothing asked when there is no server."""
    if not items or not from_neutron(req):
        return
    calls = network_common.client(req).for_caller(req.context, req.environ)
    from openkeel_compute.network import port_groups

    try:
        found = port_groups.by_server(calls, [data.row["uuid"] for data in items])
    except net_errors.NetworkError as exc:
        raise view_fault(exc, admin=calls.admin) from None
    for data in items:
        data.security_groups = port_groups.names(found.get(data.row["uuid"], []))


def view_fault(exc: net_errors.NetworkError, *, admin: bool) -> faults.Fault:
    """Nova's answer when reading a server body's groups from Neutron fails."""
    if isinstance(exc, net_errors.Unauthorized):
        return faults.Fault(_UNEXPECTED.format(_ADMIN_REFUSED), 500) if admin else faults.Fault(_UNAUTHORIZED, 401)
    if isinstance(exc, net_errors.NeutronError) and exc.status == 403:
        return faults.Forbidden(exc.text)
    # Nova's generic 500 here is its defect: the network service failing is a 503, with what it did
    if isinstance(exc, net_errors.NeutronError):
        return faults.Fault(f"Neutron answered {exc.status} to the server's ports query: {exc.message}", 503)
    return faults.Fault(exc.message, 503)
