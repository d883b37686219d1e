"""Names Nova gives a new server: its hostname from the display name, and the reservation id."""

from __future__ import annotations

import hashlib
import re
import secrets

_SEPARATORS = re.compile(r"[ _.]")
_NOT_HOSTNAME = re.compile(r"[^\w.-]+")
_UID_CHARACTERS = "01234567890abcdefghijklmnopqrstuvwxyz"  # Nova's alphabet, "0" twice included


def sanitize_hostname(name: str) -> str:
    """Nova's hostname of a display name: only characters up to U+00FF are kept, the name is cut
    to 63 characters *before* cleaning, spaces, underscores and dots become dashes, anything
    but word characters and dashes goes, lower case, no leading or trailing dots and dashes.
    May return "" (a name of only other characters)."""
    name = name.encode("latin-1", "ignore").decode("latin-1")[:63]
    name = _SEPARATORS.sub("-", name)
    name = _NOT_HOSTNAME.sub("", name)
    return name.lower().strip(".-")


def hostname_for(display_name: str, instance_uuid: str, *, count: int = 1, index: int = 0) -> str:
    """The hostname of server ``index`` (0-based) of ``count`` booted by one request, when the
    request names none: "Server-<uuid>" if the display name gives nothing, "-<index+1>"
    appended when several servers are booted."""
    hostname = sanitize_hostname(display_name)
    if not hostname:
        return f"Server-{instance_uuid}"
    if count > 1:
        return f"{hostname}-{index + 1}"
    return hostname


def display_name_for(display_name: str, *, count: int = 1, index: int = 0) -> str:
    """Several servers of one request are named "<name>-1", "<name>-2", ..."""
    return f"{display_name}-{index + 1}" if count > 1 else display_name


def new_reservation_id() -> str:
    """"r-" and eight characters of Nova's alphabet, shared by the servers of one request."""
    return "r-" + "".join(secrets.choice(_UID_CHARACTERS) for _ in range(8))


def host_id(host: str | None, project_id: str) -> str:
    """The server body's ``hostId``: the host hidden in a SHA-224 of project id and host, so a
    project can tell whether two of its servers share a host and nothing more; "" without a host."""
    if not host:
        return ""
    return hashlib.sha224((project_id + host).encode("utf-8")).hexdigest()


# System metadata key of a server created with networks "none" (value "none"): it gets no network.
REQUESTED_NETWORKS = "requested_networks"

# System metadata keys of a server asked to run on one node: the legacy forced host
# (availability_zone "zone:host", "zone:host:node", "zone::node", admins only) or, from 2.74, a
# requested host and/or hypervisor_hostname. A Kubernetes node is both Nova's host and its node, so
# every name given must be the node the server runs on; FORCED_DESTINATION ("True") marks the
# legacy form, which bypasses the scheduler's checks in Nova.
REQUESTED_HOST = "requested_host"
REQUESTED_NODE = "requested_hypervisor_hostname"
FORCED_DESTINATION = "forced_destination"


def requested_nodes(system_metadata) -> tuple[str, ...]:
    """The node names a server must run on (all of them: two different names leave it nowhere to run).

    The one function the controller's scheduling (node affinity, Placement candidates) reads the
    request through; empty when the server may run anywhere.
    """
    metadata = system_metadata or {}
    names = [metadata.get(REQUESTED_HOST), metadata.get(REQUESTED_NODE)]
    return tuple(sorted({name for name in names if name}))


def destination_forced(system_metadata) -> bool:
    """Whether the node was forced (legacy availability_zone form) rather than requested (2.74)."""
    return (system_metadata or {}).get(FORCED_DESTINATION) == "True"
