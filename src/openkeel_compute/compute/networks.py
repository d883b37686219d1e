"""What a server has instead of Neutron: the pod network, security groups kept by name, the
password its guest left, and the availability zone it may be pinned to.

OpenKeel has one network: the Kubernetes pod network every VirtualMachine sits on. The API
shows it under one name (the name the controller writes the addresses under) and one stable
uuid derived from that name, so a boot request can name it. There are no ports and no fixed
IPs to choose.

Security groups are names kept with each server (system metadata ``security_groups``). The
only group that exists is ``default``: the pod network does not filter traffic, so a group is a
label the API keeps, lists, adds and removes as Nova does, not a firewall.
"""

from __future__ import annotations

import json
import uuid as uuidlib

from oslo_config import cfg
from sqlalchemy import Connection, insert, select, update

from openkeel_compute.compute import errors
from openkeel_compute.db.models import INSTANCE_SYSTEM_METADATA, INSTANCES, NODE_ZONES, utcnow
from openkeel_compute.model import sysmeta

POD_NETWORK = "pod-network"  # the name the controller writes a server's addresses under
DEFAULT_GROUP = "default"
GROUPS = (DEFAULT_GROUP,)
DEFAULT_ZONE = "nova"
# a fixed namespace, so that a network's and a group's uuids never change
_NAMESPACE = uuidlib.UUID("5c4a0e51-6bd1-4c43-9a0e-0b7d2f1e6a3d")
GROUPS_KEY = sysmeta.SECURITY_GROUPS
# Nova keeps a guest's encrypted password in four system metadata values of 255 characters.
PASSWORD_CHUNKS = 4
PASSWORD_CHUNK_LENGTH = 255


def _opt(conf, group: str | None, name: str, default):
    try:
        value = getattr(getattr(conf, group) if group else conf, name)
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):  # not registered in this process
        return default
    return value if value else default


def network_name(conf) -> str:
    """The name the pod network is shown under (the controller's, when it is configured)."""
    return _opt(conf, "controller", "network_name", POD_NETWORK)


def network_id(name: str) -> str:
    return str(uuidlib.uuid5(_NAMESPACE, f"network:{name}"))


def default_zone(conf) -> str:
    """The zone of a node without a zone label: ``[DEFAULT] default_availability_zone``."""
    return _opt(conf, None, "default_availability_zone", DEFAULT_ZONE)


def group_id(project_id: str, name: str) -> str:
    """A project's group has one uuid, as a project's ``default`` group has in Neutron."""
    return str(uuidlib.uuid5(_NAMESPACE, f"security-group:{project_id}:{name}"))


# --- a server's groups -------------------------------------------------------------------------

_SM = INSTANCE_SYSTEM_METADATA


def _get(conn: Connection, instance_uuid: str, key: str) -> str | None:
    query = select(_SM.c.value).where(_SM.c.instance_uuid == instance_uuid, _SM.c.key == key, _SM.c.deleted == 0)
    return conn.execute(query).scalar()


def _set(conn: Connection, instance_uuid: str, key: str, value: str) -> None:
    now = utcnow()
    live = (_SM.c.instance_uuid == instance_uuid, _SM.c.key == key, _SM.c.deleted == 0)
    if conn.execute(update(_SM).where(*live).values(value=value, updated_at=now)).rowcount == 0:
        conn.execute(insert(_SM), {"instance_uuid": instance_uuid, "key": key, "value": value, "created_at": now,
                                   "deleted": 0})


def groups_value(names: list[str] | None) -> str:
    """A server's groups as its system metadata keeps them; None: the server has no interface
    (booted with ``networks: none``). A server without the key is in ``default``."""
    return json.dumps(None if names is None else list(dict.fromkeys(names)))


def _groups(value: str | None) -> list[str] | None:
    return [DEFAULT_GROUP] if value is None else json.loads(value)


def groups_from(system_metadata: dict[str, str]) -> list[str]:
    """The groups from a server's system metadata already read."""
    return _groups(system_metadata.get(GROUPS_KEY)) or []


def groups_of(conn: Connection, instance_uuid: str) -> list[str]:
    return _groups(_get(conn, instance_uuid, GROUPS_KEY)) or []


def on_network(row: dict) -> bool:
    """Whether a server can have an interface: a live server placed on a host (as a Nova server
    has ports once scheduled)."""
    return bool(row["host"]) and not row["deleted"]


def has_interface(conn: Connection, row: dict) -> bool:
    """Whether the server has an interface on the pod network (none when booted with
    ``networks: none``, or before it is placed)."""
    return on_network(row) and _groups(_get(conn, row["uuid"], GROUPS_KEY)) is not None


def groups_by_instance(conn: Connection, instance_uuids: list[str]) -> dict[str, list[str]]:
    """Each server's groups ([] for one without any, or without an interface)."""
    found: dict[str, str] = {}
    if instance_uuids:
        query = select(_SM.c.instance_uuid, _SM.c.value).where(
            _SM.c.instance_uuid.in_(instance_uuids), _SM.c.key == GROUPS_KEY, _SM.c.deleted == 0)
        found = dict(conn.execute(query).all())
    return {uuid: _groups(found.get(uuid)) or [] for uuid in instance_uuids}


def set_groups(conn: Connection, instance_uuid: str, names: list[str]) -> None:
    _set(conn, instance_uuid, GROUPS_KEY, groups_value(names))
    conn.execute(update(INSTANCES).where(INSTANCES.c.uuid == instance_uuid).values(updated_at=utcnow()))


# --- the password a guest leaves ------------------------------------------------------------------

def password_of(conn: Connection, instance_uuid: str) -> str:
    keys = [f"password_{i}" for i in range(PASSWORD_CHUNKS)]
    query = select(_SM.c.key, _SM.c.value).where(_SM.c.instance_uuid == instance_uuid, _SM.c.key.in_(keys),
                                                  _SM.c.deleted == 0)
    chunks = dict(conn.execute(query).all())
    return "".join(chunks.get(k) or "" for k in keys)


def set_password(conn: Connection, instance_uuid: str, password: str) -> None:
    """Store (or, with "", clear) the password in Nova's four chunks."""
    for i in range(PASSWORD_CHUNKS):
        chunk = password[i * PASSWORD_CHUNK_LENGTH:(i + 1) * PASSWORD_CHUNK_LENGTH]
        _set(conn, instance_uuid, f"password_{i}", chunk)


# --- the availability zone a server is pinned to (2.96 shows it, 2.104 changes it) ------------

def zone_of(conn: Connection, row: dict, default: str) -> str | None:
    """The server's zone: its node's (the node's zone label as the controller published it, the
    default zone without one); a server without a host is in the zone it asked for, if any."""
    if not row["host"]:
        return row["availability_zone"]
    zone = conn.execute(select(NODE_ZONES.c.zone).where(NODE_ZONES.c.node == row["host"])).scalar()
    return zone or default


def pin_change(row: dict, requested: str | None, server_zone: str | None) -> dict:
    """The column changes that pin (``requested``) or unpin (None) the server, with Nova's 409s."""
    current = row["pinned_availability_zone"]
    if requested is None:
        return {"pinned_availability_zone": None} if current is not None else {}
    if current is not None:
        if requested != current:
            raise errors.Conflict("Cannot change pinned availability zone directly. Unpin first by setting "
                                  "pinned_availability_zone to null.")
        return {}
    if requested != server_zone:
        raise errors.Conflict(f"Server can only be pinned to its current availability zone '{server_zone}', "
                              f"but '{requested}' was requested.")
    return {"pinned_availability_zone": requested}


# --- the nodes a server may be sent to (forced host, 2.74 requested destination) --------------

def node_zone(conn: Connection, node: str | None, default: str) -> str | None:
    """The zone a node is in (its label, else the default zone); None for a node the cluster does not have."""
    if not node:
        return None
    found = conn.execute(select(NODE_ZONES.c.node, NODE_ZONES.c.zone).where(NODE_ZONES.c.node == node)).first()
    return None if found is None else (found.zone or default)


def host_states(conn: Connection, hosts) -> dict[str, str]:
    """The 2.16 ``host_status`` of each host as its node shows it, as Nova derives it from the host's
    compute service: "MAINTENANCE" for a cordoned node (a disabled service), else "UP" for a Ready
    node and "UNKNOWN" for one that stopped reporting Ready (a service that is down); "" for a node
    that was deleted (a service that no longer exists). Empty when the controller has published no
    node at all: nothing is known then, and the hosts read as up."""
    wanted = {host for host in hosts if host}
    if not wanted:
        return {}
    found = {r.node: "MAINTENANCE" if r.cordoned else "UP" if r.available else "UNKNOWN" for r in conn.execute(
        select(NODE_ZONES.c.node, NODE_ZONES.c.available, NODE_ZONES.c.cordoned).where(NODE_ZONES.c.node.in_(wanted)))}
    if not found and conn.execute(select(NODE_ZONES.c.node).limit(1)).first() is None:
        return {}
    return {host: found.get(host, "") for host in wanted}


def known_nodes(conn: Connection, names) -> set[str]:
    """Which of ``names`` are nodes of the cluster (as the controller published them)."""
    wanted = {name for name in names if name}
    if not wanted:
        return set()
    return set(conn.execute(select(NODE_ZONES.c.node).where(NODE_ZONES.c.node.in_(wanted))).scalars())
