"""Names Nova gives a new server: its hostname from the display name, and the reservation id."""

from __future__ import annotations

import hashlib
import re
import secrets

# The system-metadata keys of the requested networks and nodes are the vocabulary's (model/sysmeta.py),
# re-exported for the API's boot handler, which writes them through these names.
from openkeel_compute.model.sysmeta import (
    FORCED_DESTINATION,
    REQUESTED_HOST,
    REQUESTED_NETWORKS,
    REQUESTED_NODE,
    destination_forced,
    requested_nodes,
)

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


__all__ = ["FORCED_DESTINATION", "REQUESTED_HOST", "REQUESTED_NETWORKS", "REQUESTED_NODE", "destination_forced",
           "display_name_for", "host_id", "hostname_for", "new_reservation_id", "requested_nodes",
           "sanitize_hostname"]
