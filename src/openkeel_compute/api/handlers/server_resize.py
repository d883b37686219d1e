"""POST /servers/{server_id}/action: resize, confirmResize, revertResize, as Nova 34.0.0 answers them.

resize (202): policy ``os_compute_api:servers:resize`` on the server's project and user; the lock,
vm_state active or stopped with no task, a host; ``OS-DCF:diskConfig`` AUTO against the image's
``auto_disk_config``; the new flavor looked up as Nova does (one the caller may see, not deleted:
"Flavor <ref> could not be found."), a zero-disk flavor for a server with a disk,
a disabled flavor, the same flavor, the quota for what grows (403), the image the server was
built from against the new flavor; then one transaction records the resize (compute/resize.py)
and asks the controller to do it. A smaller root or ephemeral disk is accepted, then fails as Nova's
libvirt driver fails it ("Resize error: Unable to resize disk down."): a KubeVirt volume cannot shrink.

confirmResize (204) and revertResize (202) need vm_state resized and a finished migration
("Instance has not been resized." otherwise); a revert checks the quota for the old flavor.
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import RESIZE_EVENTS, actor_of, policy_target, read_server
from openkeel_compute.api.schemas import server_actions as schema
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.catalog import errors as catalog_errors
from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import boot_checks, preconditions, quotas, resize, unsupported
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.unsupported import Ending
from openkeel_compute.policies import server_actions as rules

_DISK_DOWN = "Resize error: Unable to resize disk down."


def _image(conn, row: dict) -> dict:
    """The image the server was built from, as Nova reads it from the server's system metadata."""
    image = image_from_system_metadata({k: v for k, v in store.metadata_of(conn, row["uuid"], system=True).items()
                                        if k.startswith("image_")})
    image["id"] = row["image_ref"]
    image["status"] = "active"  # Nova's resize checks the image without its status
    return image


def _check_disk_config(conn, row: dict, auto: bool | None) -> None:
    """OS-DCF:diskConfig AUTO is refused when the server's image says "disabled"."""
    if not auto:
        return
    meta = store.metadata_of(conn, row["uuid"], system=True)
    if (meta.get("image_auto_disk_config") or "").strip().lower() == "disabled":
        raise faults.BadRequest(f"Requested image {meta.get('image_base_image_ref')} has automatic disk resize "
                                "disabled.")


def _new_flavor(conn, req, flavor_ref: str, current: dict) -> dict:
    """Nova's checks of the requested flavor, in its order."""
    try:
        flavor = catalog.get(conn, flavor_ref, common.caller(req))
    except catalog_errors.NotFound:
        raise faults.BadRequest(f"Flavor {flavor_ref} could not be found.") from None
    if flavor["root_gb"] == 0 and current.get("root_gb", 0) != 0:
        raise faults.BadRequest("Server disk was unable to be resized because: "
                                "Resize to zero disk flavor is not allowed.")
    same = flavor["id"] == current.get("id")
    if not same and flavor.get("disabled"):
        raise faults.BadRequest(f"Flavor {flavor_ref} could not be found.")
    if same:
        raise faults.BadRequest("When resizing, instances must change flavor!")
    return flavor


@operation(body={"2.0-": schema.resize}, success=202, expected=(400, 401, 403, 404, 409))
@wsgi_path_params
def resize_server(req, server_id):
    body = req.body["resize"]
    flavor_ref = str(body["flavorRef"])
    auto = body.get("OS-DCF:diskConfig") == "AUTO"
    actor = actor_of(req)
    conf = common.services(req).conf
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        target = policy_target(row, user=True)
        common.can(req, rules.SERVERS % "resize", target)
        pre = preconditions.precondition("resize")
        pre.check(row, is_admin=actor.is_admin)
        _check_disk_config(conn, row, auto)
        image = _image(conn, row)
        current = store.flavors_of(row).cur
        flavor = _new_flavor(conn, req, flavor_ref, current)
        quotas.lock_project(conn, row["project_id"])
        quotas.check_upsize(conn, conf, row["project_id"], row["user_id"], current, flavor)
        specs = catalog.extra_specs_of(conn, [flavor["id"]]).get(flavor["id"], {})
        try:
            boot_checks.check_image(
                dict(flavor, extra_specs=specs), image,
                zero_disk_allowed=lambda: common.can(req, boot_checks.ZERO_DISK_FLAVOR_RULE, target, fatal=False))
        except boot_checks.BootRefused as exc:
            raise (faults.Forbidden if exc.code == 403 else faults.BadRequest)(exc.message) from None
        if flavor["root_gb"] < current.get("root_gb", 0) or flavor["ephemeral_gb"] < current.get("ephemeral_gb", 0):
            # accepted, then refused where Nova's driver refuses it: the server keeps its flavor
            checked = unsupported.fail(conn, row, pre, actor, Ending(
                "compute_resize_instance", events=RESIZE_EVENTS, fault=(500, _DISK_DOWN), message=_DISK_DOWN,
                details="ResizeError"), instance_action="resize")
            resize.record_failed(conn, checked, flavor, actor)
            return Response(None)
        resize.start(conn, row, flavor, specs, actor, auto_disk_config=auto)
    return Response(None)


@operation(body={"2.0-": schema.confirm_resize}, success=204, expected=(400, 404, 409))
@wsgi_path_params
def confirm_resize(req, server_id):
    actor = actor_of(req)
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "confirm_resize", policy_target(row, user=False))
        resize.confirm(conn, row, actor)
    return Response(None, status=204)


@operation(body={"2.0-": schema.revert_resize}, success=202, expected=(400, 403, 404, 409))
@wsgi_path_params
def revert_resize(req, server_id):
    actor = actor_of(req)
    conf = common.services(req).conf
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.SERVERS % "revert_resize", policy_target(row, user=False))
        preconditions.check("revertResize", row, is_admin=actor.is_admin)
        copy = store.flavors_of(row)
        if resize.migration_of(conn, row["uuid"], "finished") is not None and copy.old:
            quotas.lock_project(conn, row["project_id"])
            quotas.check_upsize(conn, conf, row["project_id"], row["user_id"], copy.cur, copy.old)
        resize.revert(conn, row, actor)
    return Response(None)
