"""Remote console authorisations, as Nova's ConsoleAuthToken: the API authorises a console of a server
and hands out a URL carrying a new token; only the token's SHA-256 is stored, with the console's type,
the node it is on, its expiry (``[consoleauth] token_ttl``) and the base of the URL. A token is valid
until it expires (any number of times, as Nova's), while its server exists; the console proxy also
checks the server is still on the node the token names. Tokens go with their server.

What the API refuses, in Nova's order: a server without a host ("is not ready", 409), one being deleted
or migrated (409), a protocol disabled ("Unavailable console type", 400), a type the protocol does not
have ("Invalid console type", 400). KubeVirt has VNC and serial consoles only: SPICE and MKS are always
unavailable, RDP was removed from Nova.
"""

from __future__ import annotations

import hashlib
import time
import uuid as uuidlib
from dataclasses import dataclass
from urllib import parse

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from openkeel_compute.compute import errors
from openkeel_compute.db.models import CONSOLE_AUTH_TOKENS, INSTANCES, utcnow
from openkeel_compute.model.states import task_states

T = CONSOLE_AUTH_TOKENS.c
I = INSTANCES.c

VNC_PORT = 5900  # the display a KubeVirt VM's VNC subresource shows (QEMU's first display)
SERIAL_PORT = 0  # KubeVirt's serial console is a subresource, not a TCP port
# The KubeVirt subresources the proxy relays to, per console type.
SUBRESOURCE = {"novnc": "vnc", "serial": "console"}
_REFUSED_TASKS = (task_states.DELETING, task_states.MIGRATING)


class ConsoleTypeUnavailable(errors.Invalid):
    def __init__(self, console_type):
        super().__init__(f"Unavailable console type {console_type}.")


class ConsoleTypeInvalid(errors.Invalid):
    def __init__(self, console_type):
        super().__init__(f"Invalid console type {console_type}")


@dataclass(frozen=True, slots=True)
class Settings:
    """What the API needs of [vnc], [serial_console] and [consoleauth]."""

    vnc_enabled: bool
    vnc_base_url: str
    serial_enabled: bool
    serial_base_url: str
    ttl: int

    @classmethod
    def from_conf(cls, conf) -> Settings:
        return cls(vnc_enabled=conf.vnc.enabled, vnc_base_url=conf.vnc.novncproxy_base_url,
                   serial_enabled=conf.serial_console.enabled, serial_base_url=conf.serial_console.base_url,
                   ttl=conf.consoleauth.token_ttl)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def subresource_path(namespace: str, vm_name: str, console_type: str) -> str:
    return (f"/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{vm_name}/"
            f"{SUBRESOURCE.get(console_type, 'vnc')}")


def access_url(console_type: str, base: str, token: str) -> str:
    """Nova's access URL: noVNC takes the token inside its ``path`` parameter (noVNC 1.1+), every other
    console as ``?token=`` after the base."""
    if console_type == "novnc":
        parsed = parse.urlparse(base)
        params = parse.parse_qs(parsed.query)
        params["path"] = [f"{params.get('path', [''])[0]}?token={token}"]
        return parsed._replace(query=parse.urlencode(params, doseq=True)).geturl()
    return f"{base}?token={token}"


def check_server(row: dict, method: str) -> None:
    """Nova's checks before a console is asked of the compute host: a host, then the task state."""
    if not row["host"]:
        raise errors.InstanceNotReady(row["uuid"])
    if row["task_state"] in _REFUSED_TASKS:
        raise errors.InstanceInvalidState(method, row["uuid"], "task_state", row["task_state"])


def authorize(conn: Connection, row: dict, protocol: str, console_type: str, settings: Settings,
              *, now: float | None = None) -> str:
    """Authorise a console of the server ``row`` (checked with ``check_server``) and return its URL.

    ``protocol`` is vnc, spice, serial or mks (remote-consoles' names)."""
    if protocol == "vnc":
        if not settings.vnc_enabled:
            raise ConsoleTypeUnavailable(console_type)
        if console_type != "novnc":
            raise ConsoleTypeInvalid(console_type)
        base, port = settings.vnc_base_url, VNC_PORT
    elif protocol == "serial":
        # Nova's serial console does not look at the type: the URL is made for what was asked.
        if not settings.serial_enabled:
            raise ConsoleTypeUnavailable(console_type)
        base, port = settings.serial_base_url, SERIAL_PORT
    else:  # spice, mks: KubeVirt has neither ([spice] and [mks] enabled are false, as Nova's defaults)
        raise ConsoleTypeUnavailable(console_type)
    token = str(uuidlib.uuid4())
    expires = int(now if now is not None else time.time()) + settings.ttl
    namespace, vm_name = row.get("namespace"), row.get("vm_name")
    # the subresource follows the protocol (Nova's serial console keeps whatever type was asked)
    path = subresource_path(namespace, vm_name, "serial" if protocol == "serial" else "novnc") \
        if namespace and vm_name else None
    conn.execute(insert(CONSOLE_AUTH_TOKENS).values(
        token_hash=token_hash(token), console_type=console_type, host=row["node"] or row["host"], port=port,
        internal_access_path=path, instance_uuid=row["uuid"], access_url_base=base, expires=expires,
        created_at=utcnow()))
    return access_url(console_type, base, token)


@dataclass(frozen=True, slots=True)
class Authorisation:
    instance_uuid: str
    console_type: str
    host: str
    port: int | None
    internal_access_path: str | None
    tls_port: int | None


def validate(conn: Connection, token: str, *, now: float | None = None) -> Authorisation | None:
    """The authorisation of ``token`` if it exists, has not expired and its server was not deleted."""
    if not token:
        return None
    moment = int(now if now is not None else time.time())
    found = conn.execute(
        select(T.instance_uuid, T.console_type, T.host, T.port, T.internal_access_path, T.tls_port)
        .select_from(CONSOLE_AUTH_TOKENS.join(INSTANCES, I.uuid == T.instance_uuid))
        .where(T.token_hash == token_hash(token), T.expires > moment, I.deleted == 0)).first()
    return Authorisation(*found) if found is not None else None


def forget(conn: Connection, instance_uuid: str) -> None:
    """The server is gone: so are its console authorisations."""
    conn.execute(delete(CONSOLE_AUTH_TOKENS).where(T.instance_uuid == instance_uuid))


def clean_expired(conn: Connection, *, now: float | None = None) -> int:
    moment = int(now if now is not None else time.time())
    return conn.execute(delete(CONSOLE_AUTH_TOKENS).where(T.expires <= moment)).rowcount
