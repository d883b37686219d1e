"""POST /servers: boot servers from an image, with Nova 34.0.0's checks, order and answers.

The request is checked in Nova's order: the body's schema, the create policies, the flavor
(visible to the project: otherwise 400 "Flavor … could not be found."), the image (missing: 400
"Can not find requested image"), the flavor enabled, the requested networks (OpenKeel has only
the pod network: ``auto`` and ``none`` are accepted, a named network or port is not found), the
key pair (there are none yet: any name is invalid), then the image against the flavor
(compute/boot_checks.py). Only then, in one transaction, are the servers written (BUILD /
scheduling, with the frozen flavor copy and the "create" action) with one outbox row each for the
controller. A refusal writes nothing.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import uuid as uuidlib

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import network_common, server_networks, server_volumes
from openkeel_compute.api.handlers import server_boot_options as options
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    canonical_ip,
    check_zone,
    fetch_image,
    generated_password,
)
from openkeel_compute.api.schemas import servers as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.catalog import errors as catalog_errors
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import (
    block_device_rows,
    block_devices,
    boot_checks,
    image_meta,
    keypairs,
    names,
    network_requests,
    quotas,
    server_groups,
)
from openkeel_compute.compute import networks as networks_state
from openkeel_compute.compute.instances import store, updates
from openkeel_compute.model import sysmeta
from openkeel_compute.policies import servers as rules

LOG = logging.getLogger(__name__)

_TRUE = {"true", "1", "on", "yes", "y", "t"}


def _bool(value) -> bool:
    return value if isinstance(value, bool) else str(value).lower() in _TRUE


def _kernel_and_ramdisk(image: dict) -> dict:
    """The image's kernel and ramdisk ids as the server keeps them: none when it says 'nokernel'."""
    properties = image.get("properties") or {}
    kernel_id, ramdisk_id = properties.get("kernel_id"), properties.get("ramdisk_id")
    if kernel_id == "nokernel":
        kernel_id = ramdisk_id = None
    return {"kernel_id": kernel_id or "", "ramdisk_id": ramdisk_id or ""}


def _availability_zone(value) -> tuple[str | None, str | None, str | None]:
    """(zone, forced host, forced node) of Nova's legacy "zone:host", "zone:host:node" and "zone::node"."""
    if not value or ":" not in value:
        return value, None, None
    colons = value.count(":")
    if colons == 1:
        zone, host = value.split(":")
        return zone, host, None
    if colons == 2:
        if "::" in value:
            zone, node = value.split("::")
            return zone, None, node
        zone, host, node = value.split(":")
        return zone, host, node
    raise faults.BadRequest("Invalid input received: Unable to parse availability_zone")


def _forced_host_zone(req, zone: str | None, host: str | None) -> str | None:
    """The zone a server forced onto ``host`` keeps: the one asked for only if the node is in it.

    As Nova does with host aggregates: a node without a zone label is in the default zone, so asking
    for the default zone there is kept; any other mismatch drops the zone (the node decides), with a
    warning, rather than refusing.
    """
    default = networks_state.default_zone(common.services(req).conf)
    with common.read(req) as conn:
        host_zone = networks_state.node_zone(conn, host, default)
    if zone == (host_zone or default):
        return zone
    LOG.warning("Requested availability zone '%s' but forced host '%s' is not in it; ignoring the requested "
                "availability zone", zone, host)
    return None


def _check_destination(req, host: str | None, node: str | None) -> None:
    """A requested host and/or hypervisor_hostname (2.74) must be a node of the cluster, with Nova's 400.

    On Kubernetes a node is both the host and the hypervisor: both names, when given, must be the same
    known node.
    """
    with common.read(req) as conn:
        known = networks_state.known_nodes(conn, (host, node))
    if host and host not in known:
        raise faults.BadRequest(f"Compute host {host} could not be found.")
    if node and (node not in known or (host and node != host)):
        raise faults.BadRequest(f"Compute host {host or node} could not be found.")


def _destination(req, server: dict, forced_host: str | None, forced_node: str | None) -> dict:
    """The system metadata that pins the server to a node (compute/names.py), after the policy checks."""
    requested_host, requested_node = server.get("host"), server.get("hypervisor_hostname")
    if req.version >= (2, 74) and (requested_host or requested_node):
        common.can(req, rules.REQUESTED_DESTINATION, _target(req))
        if forced_host or forced_node:
            raise faults.BadRequest("One mechanism with host and/or hypervisor_hostname and another mechanism "
                                    "with zone:host:node are mutually exclusive.")
        return {names.REQUESTED_HOST: requested_host, names.REQUESTED_NODE: requested_node}
    if forced_host or forced_node:
        return {names.REQUESTED_HOST: forced_host, names.REQUESTED_NODE: forced_node,
                names.FORCED_DESTINATION: "True"}
    return {}


def _key_pair(conn, req, key_name: str | None) -> dict | None:
    """The caller's key pair named ``key_name`` (its public key goes to the guest)."""
    if key_name is None:
        return None
    try:
        return keypairs.get(conn, req.context.user_id, key_name)
    except keypairs.KeypairNotFound:
        raise faults.BadRequest("Invalid key_name provided.") from None


def _limit_checks(conn, req, server: dict) -> None:
    """The metadata items and injected files quotas, before the image is checked against the flavor."""
    quotas.check_metadata_and_files(conn, common.services(req).conf, req.context.project_id,
                                    req.context.user_id, server.get("metadata"), server.get("personality"))


def _instances_quota(req, conn, flavor: dict, min_count: int, max_count: int) -> int:
    """How many servers fit in the quotas (project and user), checked where they are written."""
    quotas.lock_project(conn, req.context.project_id)
    return quotas.check_num_instances(conn, common.services(req).conf, req.context.project_id, req.context.user_id,
                                      flavor["vcpus"], flavor["memory_mb"], min_count, max_count)


def _target(req, server: dict | None = None) -> dict:
    target = {"project_id": req.context.project_id, "user_id": req.context.user_id}
    if server is not None:
        target["availability_zone"] = server.get("availability_zone")
    return target


def _requested_group(req, hints: dict) -> dict | None:
    """The server group of the ``group`` scheduler hint (Nova's 400 when there is none of that id)."""
    wanted = (hints.get("group") or [None])[0]
    if not wanted:
        return None
    with common.read(req) as conn:
        try:
            return server_groups.get(conn, wanted)
        except server_groups.GroupNotFound as exc:
            raise faults.BadRequest(exc.message) from None


def _group_members_quota(req, conn, group: dict, count: int) -> None:
    """Nova's server_group_members quota: the caller's live members of the group plus the new ones."""
    conf = common.services(req).conf
    limit = quotas.user_quotas(conn, conf, req.context.project_id, req.context.user_id)["server_group_members"]
    if quotas.UNLIMITED < limit["limit"] < server_groups.user_members(conn, group["id"], req.context.user_id) + count \
            and conf.quota.driver != "nova.quota.NoopQuotaDriver":
        raise faults.Forbidden("Quota exceeded, too many servers in group")


@operation(body=schema.CREATE_BODY, success=202, expected=(400, 403, 409))
def create(req):
    server = dict(req.body["server"])
    common.can(req, rules.SERVERS % "create", _target(req, server))
    networks = server.get("networks")
    if networks == "auto" or (isinstance(networks, list) and networks):
        # 'none' (and no networks before 2.37) allocates nothing; 'auto' asks for a network
        common.can(req, rules.SERVERS % "create:attach_network", _target(req))

    min_count = int(server.get("min_count", 1))
    max_count = int(server.get("max_count", min_count))
    if min_count > max_count:
        raise faults.BadRequest("min_count must be <= max_count")
    if "hostname" in server and max_count > 1:
        raise faults.BadRequest("Unable to allocate a single hostname to multiple instances")

    requested_zone, forced_host, forced_node = _availability_zone(server.get("availability_zone"))
    forced = bool(forced_host or forced_node)
    zone = requested_zone or common.services(req).conf.default_schedule_zone
    if forced:
        common.can(req, rules.SERVERS % "create:forced_host", _target(req, server))
        zone = _forced_host_zone(req, zone, forced_host)
    destination = {key: value for key, value in _destination(req, server, forced_host, forced_node).items()
                   if value}
    bdms, legacy_bdm = server_volumes.parse(req, server, _target(req))
    image_id = server_volumes.image_ref(server, bdms)
    options.check_network_form(networks)
    server_volumes.require_cinder(req, bdms, legacy_bdm)
    # a flavor's link is as good as its id (its last path segment), as in Nova
    flavor_ref = urllib.parse.urlsplit(str(server["flavorRef"])).path.split("/")[-1]
    with common.read(req) as conn:
        try:
            flavor = catalog.get(conn, flavor_ref, common.caller(req))
        except catalog_errors.NotFound:
            raise faults.BadRequest(f"Flavor {flavor_ref} could not be found.") from None
        extra_specs = catalog.extra_specs_of(conn, [flavor["id"]]).get(flavor["id"], {})
    server_networks.check_multiple(networks, max_count)
    if zone and not forced:
        check_zone(req, zone)
    image = fetch_image(req, image_id) if image_id else server_volumes.boot_image(req, bdms, legacy_bdm)
    flavor_with_specs = dict(flavor, extra_specs=extra_specs)
    try:
        boot_checks.check_flavor_enabled(flavor_with_specs)
        groups, max_count = server_networks.check(req, server, networks, min_count, max_count)
        with common.read(req) as conn:
            key_pair = _key_pair(conn, req, server.get("key_name"))
            _limit_checks(conn, req, server)
        image_bdms = bool(image_id and image and (image.get("properties") or {}).get("block_device_mapping"))
        if bdms or legacy_bdm or image_bdms:  # (an image of a volume-backed server's snapshot has its own)
            bdms = server_volumes.prepare(bdms, legacy_bdm, image_id, flavor, min_count, max_count, image)
        if image:  # none for a boot from a blank volume: nothing to check the flavor against
            boot_checks.check_image(
                flavor_with_specs, image,
                zero_disk_allowed=lambda: common.can(req, boot_checks.ZERO_DISK_FLAVOR_RULE, _target(req),
                                                     fatal=False),
                volume_backed=server_volumes.volume_backed(bdms),
                root_volume_gb=server_volumes.root_volume_gb(bdms) if not image_id else None)
    except boot_checks.BootRefused as exc:
        raise (faults.Forbidden if exc.code == 403 else faults.BadRequest)(exc.message) from None
    if destination and not forced:
        _check_destination(req, destination.get(names.REQUESTED_HOST), destination.get(names.REQUESTED_NODE))

    hints = options.scheduler_hints(req.body)
    group = _requested_group(req, hints)
    system_metadata = {networks_state.GROUPS_KEY: networks_state.groups_value(None if networks == "none" else groups)}
    admin_pass = server.get("adminPass") or generated_password()
    display_name = server["name"]
    reservation_id = names.new_reservation_id()
    columns = {
        "image_ref": image_id, "reservation_id": reservation_id, **_kernel_and_ramdisk(image),
        "config_drive": "True" if _bool(server.get("config_drive", False)) else "",
        "availability_zone": zone,
        "user_data": server.get("user_data"),
        # before 2.19 a server's description is its name, as in Nova
        "display_description": server.get("description") if req.version >= (2, 19) else display_name,
        "access_ip_v4": canonical_ip(server.get("accessIPv4")), "access_ip_v6": canonical_ip(server.get("accessIPv6")),
        "pinned_availability_zone": zone,  # the zone asked for (or the default schedule zone), as Nova pins
        "scheduler_hints": json.dumps(hints),
        "auto_disk_config": server.get("OS-DCF:diskConfig", "MANUAL") == "AUTO",
        "key_name": key_pair["name"] if key_pair else None, "key_data": key_pair["public_key"] if key_pair else None,
    }
    # what the server keeps of its image (2.98 shows it; the controller builds from it), as Nova does
    system_metadata.update(image_meta.system_metadata(image, flavor), image_base_image_ref=image_id)
    system_metadata.update(image_meta.name_metadata(image))  # for the build's notifications
    system_metadata.update(destination)  # a node to run on: the controller pins the VM to it
    if server_volumes.volume_backed(bdms):  # no local root disk: none claimed, none made
        system_metadata[sysmeta.BOOT_FROM_VOLUME] = "True"
    if any(bdm.get("destination_type") == "volume" for bdm in bdms):
        system_metadata[sysmeta.HAS_VOLUMES] = "True"
    if bdms:
        system_metadata[sysmeta.HAS_BLOCK_DEVICES] = "True"
    if networks == "none":  # the controller gives the VM no interface
        system_metadata[names.REQUESTED_NETWORKS] = "none"
    elif network_common.enabled(req):  # Neutron: "auto" (one port on the lone or auto-allocated
        # network) or "requested" (the rows of instance_network_requests)
        system_metadata[names.REQUESTED_NETWORKS] = "requested" if isinstance(networks, list) and networks \
            else "auto"
    requested_rows = server_networks.requests_of(networks) if network_common.enabled(req) else []
    actor = actor_of(req)
    created = []
    reserved: list[str] = []  # the volume attachments made for the boot: released if it fails after them
    try:
        with common.write(req) as conn:
            max_count = _instances_quota(req, conn, flavor, min_count, max_count)
            if group is not None:
                _group_members_quota(req, conn, group, max_count)
            if bdms:
                volumes = server_volumes.existing_volumes(req, bdms)
                volume_zone = server_volumes.check(req, bdms, flavor=flavor, image_id=image_id,
                                                   zone=zone, volumes=volumes)
                if volume_zone:  # the server goes where its volumes are, as Nova schedules it
                    columns.update(availability_zone=volume_zone, pinned_availability_zone=volume_zone)
            _write_servers(req, conn, created, reserved, server=server, flavor=flavor, extra_specs=extra_specs,
                           display_name=display_name, max_count=max_count, system_metadata=system_metadata,
                           columns=columns, actor=actor, requested_rows=requested_rows, bdms=bdms,
                           group=group)
    except BaseException:
        server_volumes.release(req, reserved)
        raise
    if server.get("return_reservation_id", False):  # as in Nova: any non-empty value, even "false"
        return Response({"reservation_id": reservation_id})
    first = created[0]
    links = common.links(req)
    body = {"server": {
        "id": first["uuid"],
        "links": links.links("servers", first["uuid"]),
        "OS-DCF:diskConfig": "AUTO" if first["auto_disk_config"] else "MANUAL",
        "security_groups": server.get("security_groups", options.DEFAULT_GROUPS),
        "adminPass": admin_pass,
    }}
    return Response(body, headers={"Location": links.links("servers", first["uuid"])[0]["href"]})


def _write_servers(req, conn, created: list, reserved: list[str], *, server: dict, flavor: dict, extra_specs: dict,
                   display_name: str, max_count: int, system_metadata: dict, columns: dict, actor, requested_rows,
                   bdms: list, group: dict | None) -> None:
    """One row per server, with its network requests, its block devices (each existing volume reserved
    for it first: ``reserved`` collects the attachments), its server group membership and its outbox row."""
    for index in range(max_count):
        server_uuid = str(uuidlib.uuid4())
        hostname = server.get("hostname") or names.hostname_for(display_name, server_uuid, count=max_count,
                                                                index=index)
        server_bdms = server_volumes.reserve(req, bdms, server_uuid, reserved) if bdms else []
        row = store.create(conn, actor=actor, flavor=flavor, extra_specs=extra_specs, uuid=server_uuid,
                           display_name=names.display_name_for(display_name, count=max_count, index=index),
                           metadata=server.get("metadata"), tags=server.get("tags"),
                           system_metadata=system_metadata,
                           launch_index=index, hostname=hostname, **columns)
        network_requests.record(conn, row["uuid"], requested_rows)
        block_device_rows.record(conn, row["uuid"], [dict(bdm, volume_size=block_devices.volume_size(flavor, bdm))
                                                     for bdm in server_bdms])
        if group is not None:
            server_groups.add_member(conn, group["id"], row["uuid"])
        updates.outbox(conn, row["uuid"], "create", actor, task_state=row["task_state"])
        created.append(row)
