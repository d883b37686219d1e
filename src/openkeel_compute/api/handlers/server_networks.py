"""The networks of a boot when Neutron is the network service ([neutron] auth_type set).

POST /servers makes only the Neutron calls Nova's API makes: the security groups named (by name
or id, ``default`` kept as is), then Nova's ``validate_networks`` (each port, network and fixed IP
asked for, a lone network when none is named, the auto-allocated topology's dry run, the port
quota). Ports are created and bound later by the controller, never while the client waits. With
[neutron] unset these fall back to the pod network's checks (server_boot_options.py).
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common
from openkeel_compute.api.handlers import server_boot_options as options
from openkeel_compute.network import errors as net_errors


def check_multiple(networks, max_count: int) -> None:
    """Nova's refusals of several servers from one request naming a port or a fixed IP (before the
    zone is checked, whatever the network service)."""
    from openkeel_compute.network import validate

    try:
        validate.check_multiple_instances(networks, max_count)
    except net_errors.NetworkError as exc:
        raise faults.BadRequest(exc.message) from None


def check(req, server: dict, networks, min_count: int, max_count: int) -> tuple[list[str], int]:
    """The security group names the server keeps and how many servers the networks leave room for."""
    if not network_common.enabled(req):
        groups = options.security_groups(server)
        options.check_networks(common.services(req).conf, networks)
        return groups, max_count
    from openkeel_compute.network import validate

    names = list(dict.fromkeys(g["name"] for g in server.get("security_groups") or () if g.get("name")))
    names = names or [validate.DEFAULT_GROUP]
    calls = network_common.client(req).for_caller(req.context, req.environ)
    project_id = req.context.project_id
    try:
        validate.security_groups(calls, project_id, names)
        if networks == "none":
            return names, max_count
        allowed = validate.validate_networks(calls, project_id, networks, max_count)
        return names, validate.max_for_quota(allowed, min_count, max_count)
    except net_errors.NetworkError as exc:
        raise network_common.answer(exc) from None


def requests_of(networks) -> list[dict]:
    """The rows of instance_network_requests for a boot (none for "auto", "none" or no networks)."""
    if not isinstance(networks, list):
        return []
    return [{"position": index, "network_id": r.get("uuid"), "port_id": r.get("port") or None,
             "fixed_ip": r.get("fixed_ip"), "tag": r.get("tag")} for index, r in enumerate(networks)]
