"""What the server handlers share: the server a caller may see, who asks, the policy target of an
action, the decisions and data of a server body, the image service, generated passwords, and the
query schema of the server subresources, and the availability zones.

Handler modules import these from here, never from one another.
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import select

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common
from openkeel_compute.api.views import servers as view
from openkeel_compute.compute import block_device_rows, compute_services, errors, networks, server_groups
from openkeel_compute.compute.instances import instance_faults, store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.compute.snapshot_image import snapshot_image
from openkeel_compute.db import models
from openkeel_compute.images import errors as image_errors
from openkeel_compute.model import events
from openkeel_compute.policies import servers as rules

if TYPE_CHECKING:
    from openkeel_compute.images import glance


def shown(req, target: dict | None, *, server_groups: bool = False) -> view.Shown:
    """The policy decisions that change server bodies, taken once per request."""
    version = req.version
    extra_specs = version >= (2, 47) and common.can(req, rules.SERVERS % "show:flavor-extra-specs", target,
                                                    fatal=False)
    host_status = None
    if version >= (2, 16):
        if common.can(req, rules.SERVERS % "show:host_status", target, fatal=False):
            host_status = True
        elif common.can(req, rules.SERVERS % "show:host_status:unknown-only", target, fatal=False):
            host_status = False
    return view.Shown(
        extended_attributes=common.can(req, rules.EXTENDED_ATTRIBUTES, target, fatal=False),
        flavor_extra_specs=extra_specs, host_status=host_status, is_admin=bool(req.context.is_admin),
        server_groups=server_groups)


def read_server(conn, req, server_id: str, *, for_update: bool = False) -> dict:
    """A live server the caller may see: another project's server is "not found" to non-admins.

    ``for_update`` locks its row until the transaction ends: writes of the server's children (tags,
    metadata) that read before they write take their turns, one after the other. In an API write
    transaction the row is always locked, first: every write of one server (lock, resetState, the
    password, actions) takes its turn; parallel copies deadlocked on MariaDB or collided on a
    system-metadata key (a 500) when each read before the other wrote."""
    row = store.get(conn, server_id, for_update=for_update or common.in_write(conn))
    if not req.context.is_admin and row["project_id"] != req.context.project_id:
        raise errors.InstanceNotFound(server_id)
    return row


def server_data(conn, req, row: dict, *, host_status: bool) -> view.ServerData:
    """What a server's body shows besides its row; ``host_status``: whether the body may show it (the
    caller's policy allows it at this microversion), which costs a read of the nodes."""
    uuid = row["uuid"]
    data = view.ServerData(row=row, metadata=store.metadata_of(conn, uuid),
                           volumes=block_device_rows.attached_by_instance(conn, [uuid]).get(uuid, []))
    if req.version >= (2, 98):
        data.system_metadata = store.metadata_of(conn, uuid, system=True)
    if req.version >= (2, 26):
        data.tags = store.tags_of(conn, uuid)
    if networks.on_network(row) and not network_common.enabled(req):  # with Neutron: server_port_groups.fill
        data.security_groups = (networks.groups_from(data.system_metadata) if req.version >= (2, 98)
                                else networks.groups_of(conn, uuid))
    if store.status(row) in ("ERROR", "DELETED"):
        data.fault = instance_faults.latest_faults(conn, [uuid]).get(uuid)
    if host_status and req.version >= (2, 16) and row["host"]:
        data.host_status = networks.host_states(conn, [row["host"]]).get(row["host"])
    if req.version >= (2, 71):
        data.server_groups = server_groups.groups_of(conn, uuid)
    return data


def canonical_ip(value: str | None) -> str | None:
    """An access IP as Nova keeps it: an address, shown in its canonical (compressed) form.

    Every write of accessIPv4/accessIPv6 goes through here (create, update; rebuild too).
    """
    return ipaddress.ip_address(value).compressed if value else value


def actor_of(req) -> Actor:
    ctx = req.context
    return Actor(user_id=ctx.user_id, project_id=ctx.project_id, is_admin=bool(ctx.is_admin),
                 request_id=getattr(ctx, "request_id", None))


# Nova's generated passwords: 12 characters of this alphabet (no look-alike characters).
_PASSWORD_CHARS = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
PASSWORD_LENGTH = 12


def generated_password() -> str:
    return "".join(secrets.choice(_PASSWORD_CHARS) for _ in range(PASSWORD_LENGTH))


def image_service(req) -> glance.GlanceClient:
    services = common.services(req)
    client = getattr(services, "images", None)
    if client is None:
        # keystoneauth (and requests under it) are imported with the first client, not by every worker at start
        from openkeel_compute.images import glance

        client = services.images = glance.GlanceClient(services.conf)
    return client


def fetch_image(req, image_id: str, not_found: str = "Can not find requested image") -> dict:
    """The image from the image service, its errors as Nova answers them (``not_found``: the 400's
    words, which boot and rebuild word differently)."""
    try:
        return image_service(req).show(req.context, image_id, req.environ)
    except (image_errors.ImageNotFound, image_errors.ImageNotAuthorized):
        raise faults.BadRequest(not_found) from None
    except image_errors.ImageBadRequest as exc:
        raise faults.BadRequest(exc.message) from None
    except image_errors.ImageServiceUnavailable as exc:
        raise faults.Fault(exc.message, 503) from None


IMAGE_NOT_FOUND = "Image not found."


@contextlib.contextmanager
def unavailable_as_503():
    """The image service unavailable → 503, as Nova answers on the image proxies."""
    try:
        yield
    except image_errors.ImageServiceUnavailable as exc:
        raise faults.Fault(exc.message, 503) from None


# the events a cold migration or resize records before the compute service resizes
RESIZE_EVENTS = events.BEFORE_RESIZE


def policy_target(row: dict, *, user: bool) -> dict:
    """The policy target of an action on ``row``: its project, and its user when the rule looks at it."""
    target = {"project_id": row["project_id"]}
    if user:
        target["user_id"] = row["user_id"]
    return target


@contextlib.contextmanager
def locked_as_invalid_state(server_id: str, action: str):
    """The few actions whose Nova handler words the lock as an invalid state."""
    try:
        yield
    except errors.InstanceIsLocked:
        raise faults.Conflict(f"Instance {server_id} is in an invalid state for '{action}'") from None


# the query of the server subresources (ips, password, security groups): none, and from 2.102 none allowed
_LENIENT = {"type": "object", "properties": {}, "additionalProperties": True}
_STRICT = {"type": "object", "properties": {}, "additionalProperties": False}
SUBRESOURCE_QUERY = {"2.0-2.101": _LENIENT, "2.102-": _STRICT}


def zones(conn, conf) -> tuple[dict[str, list], list[str]]:
    """The availability zones (os-availability-zone, and a boot's zone check):
    ({available zone: [node rows]}, [zones with no ready node]), each sorted by name.

    Until the controller published a node, the cluster is taken as one node in the default zone.
    """
    by_zone: dict[str, list] = {}
    table = models.NODE_ZONES
    rows = conn.execute(select(table).order_by(table.c.node)).all()
    if not rows:
        return {conf.default_availability_zone: []}, []
    for row in rows:
        by_zone.setdefault(row.zone or conf.default_availability_zone, []).append(row)
    internal = conf.internal_service_availability_zone
    available = {z: [r for r in rows if not r.cordoned] for z, rows in sorted(by_zone.items())
                 if z != internal and any(r.available and not r.cordoned for r in rows)}
    unavailable = [z for z in sorted(by_zone) if z != internal and z not in available]
    return available, unavailable


def compute_down(req, conn, row: dict) -> bool:
    """Whether the server's node has a compute service that is down or forced down: Nova's API then
    deletes the server itself. A server not placed yet (no host) is left to the controller, which is
    building it; so is one whose node has no service (not published by the heartbeat yet)."""
    if not row["host"]:
        return False
    service = compute_services.listed(conn, host=row["host"], binary="nova-compute")
    return bool(service) and not compute_services.is_up(service[0], common.services(req).conf.service_down_time)


def check_zone(req, zone: str) -> None:
    """The zone must have a ready node (as the controller published them), as in Nova."""
    with common.read(req) as conn:
        available, _unavailable = zones(conn, common.services(req).conf)
    if zone not in available:
        raise faults.BadRequest("The requested availability zone is not available")


def make_image(req, row: dict, name: str, image_type: str | None, extra: dict, *,
               finish: Callable[[dict], dict] | None = None) -> dict:
    """The image made in the image service as Nova's compute.utils.create_image makes it (createImage,
    createBackup, shelve: server_shelve.py), Nova's faults for what the image service refuses.
    ``finish``: a volume-backed server's snapshot (image_type None): the record's last touches, and the
    image activated empty (no data), as Nova's image API does for an image of size 0."""
    conf = common.services(req).conf
    made = snapshot_image(row, row["system_metadata"], name=name, image_type=image_type,
                          caller_project=req.context.project_id, caller_user=req.context.user_id, extra=extra,
                          non_inheritable=conf.non_inheritable_image_properties)
    body = made["body"] if finish is None else finish(made["body"])
    try:
        image = image_service(req).create(req.context, body, req.environ)
        try:
            if made["member"]:  # the server's project may read a snapshot someone else made of its server
                image_service(req).add_member(req.context, image["id"], made["member"], req.environ)
            if finish is not None:
                image_service(req).upload(req.context, image["id"], iter([b""]), req.environ)
                image = dict(image, status="active", size=0)
        except image_errors.ImageError:
            image_service(req).delete(req.context, image["id"], req.environ)  # no half-made image
            raise
        return image
    except image_errors.ImageBadRequest as exc:  # Nova's ImageBadRequest is an Invalid: 400
        raise faults.BadRequest(exc.message) from None
    except image_errors.ImageNotAuthorized as exc:
        raise faults.Forbidden(exc.message) from None
    except image_errors.ImageServiceUnavailable as exc:  # Nova's generic 500 naming GlanceConnectionFailed
        raise faults.Fault(exc.explanation, 500) from None
