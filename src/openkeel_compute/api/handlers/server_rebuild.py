"""POST /servers/{server_id}/action {"rebuild": ...}: a new root disk from an image, as Nova 34.0.0.

The checks come in Nova's order: the body's schema for the microversion, the server (404), the
``rebuild`` policy (and ``rebuild:trusted_certs`` when the body names certificates), the lock and
the state (ACTIVE, SHUTOFF or ERROR with no task), the caller's key pair (2.54), the image ("Cannot find image for
rebuild"), the image's disk config, the metadata_items quota, then the image against the flavor the
server keeps (compute/boot_checks.py). A refusal writes nothing. Then, in one transaction, the
server's task becomes ``rebuilding`` with its new fields and image system metadata, the
"rebuild" action is recorded and an outbox row asks the controller to replace the root disk
(compute/rebuild.py). The answer is 202 with the server's body, its Location and ``adminPass``.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import server_port_groups, volume_common, wsgi_path_params
from openkeel_compute.api.handlers.server_common import (
    actor_of,
    canonical_ip,
    fetch_image,
    generated_password,
    read_server,
    server_data,
    shown,
)
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.views import servers as view
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import (
    block_device_rows,
    block_devices,
    boot_checks,
    keypairs,
    preconditions,
    quotas,
)
from openkeel_compute.compute import rebuild as rebuilding
from openkeel_compute.compute.instances import store
from openkeel_compute.policies import server_actions as rules


def _changes(req, body: dict) -> dict:
    """The instance columns the request changes (Nova's attribute map for a rebuild)."""
    version = req.version
    changes: dict = {}
    if "name" in body:
        changes["display_name"] = body["name"].strip()
    if "description" in body:
        changes["display_description"] = body["description"]
    if body.get("OS-DCF:diskConfig") is not None:
        changes["auto_disk_config"] = body["OS-DCF:diskConfig"] == "AUTO"
    if "accessIPv4" in body:
        changes["access_ip_v4"] = canonical_ip(body["accessIPv4"])
    if "accessIPv6" in body:
        changes["access_ip_v6"] = canonical_ip(body["accessIPv6"])
    if version >= (2, 54) and "key_name" in body and not body["key_name"]:
        changes["key_name"] = None
        changes["key_data"] = None
    if version >= (2, 57) and "user_data" in body:
        changes["user_data"] = body["user_data"]
    if version >= (2, 63) and "trusted_image_certificates" in body:
        changes["trusted_certs"] = body["trusted_image_certificates"]
    if version >= (2, 90) and "hostname" in body:
        changes["hostname"] = body["hostname"]
    return changes


def _check_disk_config(image: dict, auto: bool | None) -> None:
    setting = str((image.get("properties") or {}).get("auto_disk_config", "")).lower()
    if auto and setting == "disabled":
        raise faults.BadRequest(f"Requested image {image.get('id')} has automatic disk resize disabled.")


@operation(body=schema.REBUILD_BODY, success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def rebuild(req, server_id):
    body = dict(req.body["rebuild"])
    image_id = body["imageRef"]
    password = body["adminPass"] if "adminPass" in body else generated_password()
    actor = actor_of(req)
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
    target = {"user_id": row["user_id"], "project_id": row["project_id"]}
    common.can(req, rules.SERVERS % "rebuild", target)
    if req.version >= (2, 63) and "trusted_image_certificates" in body:
        common.can(req, rules.SERVERS % "rebuild:trusted_certs", target)
    with common.domain_errors():
        preconditions.check("rebuild", row, is_admin=actor.is_admin)
    changes = _changes(req, body)
    if req.version >= (2, 54) and body.get("key_name"):
        with common.read(req) as conn:  # the caller's key pair, as at boot
            try:
                key_pair = keypairs.get(conn, req.context.user_id, body["key_name"])
            except keypairs.KeypairNotFound:
                raise faults.BadRequest("Invalid key_name provided.") from None
        changes.update(key_name=key_pair["name"], key_data=key_pair["public_key"])
    image = fetch_image(req, image_id, "Cannot find image for rebuild")
    _check_disk_config(image, changes.get("auto_disk_config"))
    with common.read(req) as conn:
        bdms = block_device_rows.of(conn, row["uuid"])
    root = block_devices.root_of(bdms) if block_devices.volume_backed(bdms) else None
    volumes = _volumes_of(req, bdms)
    if root is not None:
        _check_volume_backed(req, body, image_id, volumes.get(str(root.get("volume_id"))))
    metadata = body.get("metadata")
    if metadata is not None:
        with common.read(req) as conn:  # the metadata_items quota, as at boot
            quotas.check_metadata_and_files(conn, common.services(req).conf, req.context.project_id,
                                            req.context.user_id, metadata, None)
    flavor = store.flavors_of(row).cur
    try:
        boot_checks.check_image(
            flavor, image,
            zero_disk_allowed=lambda: common.can(req, boot_checks.ZERO_DISK_FLAVOR_RULE, target, fatal=False),
            root_volume_gb=root.get("volume_size") if root is not None else None, volume_backed=root is not None)
    except boot_checks.BootRefused as exc:
        raise (faults.Forbidden if exc.code == 403 else faults.BadRequest)(exc.message) from None
    for volume_id, volume in volumes.items():  # Nova's _check_volume_status: each volume still in use
        if volume.get("status") != "in-use":
            raise faults.BadRequest(f"Invalid volume: volume '{volume_id}' status must be 'in-use'. Currently in "
                                    f"'{volume.get('status')}' status")

    reimage = None
    if root is not None and req.version >= (2, 93):  # reimage_boot_volume: the root volume written anew
        reimage = str(root["volume_id"])
    with common.write(req) as conn:
        rebuilding.begin_rebuild(conn, row, actor, image=image, flavor=flavor, changes=changes, metadata=metadata,
                                 volume_backed=root is not None, reimage_volume=reimage)
        row = store.get(conn, row["uuid"])
        data = server_data(conn, req, row, host_status=req.version >= (2, 75))  # 2.75: the body of a show
    return _answer(req, row, data, password)


def _volumes_of(req, bdms: list[dict]) -> dict[str, dict]:
    """The server's volumes as Cinder shows them to the caller (Nova's API reads each one), by id; none
    read when Cinder is not configured."""
    from openkeel_compute.volume import errors as volume_errors

    ids = [str(b["volume_id"]) for b in bdms if b.get("volume_id")]
    if not ids or not volume_common.enabled(req):
        return {}
    calls = volume_common.calls(req)
    try:
        return {volume_id: calls.get_volume(volume_id) for volume_id in ids}
    except volume_errors.VolumeError as exc:
        raise volume_common.answer(exc) from None


def _check_volume_backed(req, body: dict, image_href: str, volume: dict | None) -> None:
    """Nova's refusals for a volume-backed server: no certificate validation, and before 2.93 no other
    image than the one the root volume was made from (its ``volume_image_metadata``)."""
    if req.version >= (2, 63) and body.get("trusted_image_certificates"):
        raise faults.BadRequest("Image certificate validation is not supported for volume-backed servers.")
    original = ((volume or {}).get("volume_image_metadata") or {}).get("image_id")
    if volume is not None and original != image_href and req.version < (2, 93):
        raise faults.BadRequest(f"Image {image_href} is unacceptable: Unable to rebuild with a different image "
                                f"for a volume-backed server.")


def _answer(req, row: dict, data, password: str) -> Response:
    version = req.version
    target = {"project_id": row["project_id"]}
    links = common.links(req)
    if version >= (2, 75):
        server_port_groups.fill(req, [data])  # the groups are in the body from 2.75, read after the write
        decisions = shown(req, target, server_groups=version >= (2, 71))
        server = view.full(req, links, data, decisions)
        server.pop("OS-EXT-SRV-ATTR:user_data", None)  # shown as user_data from 2.57 instead
    else:
        extra_specs = version >= (2, 47) and common.can(req, "os_compute_api:servers:show:flavor-extra-specs",
                                                        target, fatal=False)
        decisions = view.Shown(flavor_extra_specs=extra_specs, is_admin=bool(req.context.is_admin),
                               server_groups=version >= (2, 71))
        server = view.full(req, links, data, decisions, update=True)
        if version >= (2, 54):
            server["key_name"] = row["key_name"]
    server["adminPass"] = password
    if version >= (2, 57):
        server["user_data"] = row["user_data"]
    location = links.links("servers", row["uuid"])[0]["href"]
    return Response({"server": server}, headers={"Location": location})
