"""The volumes of a server on the cluster (issue 30.3): Cinder's attachment flow with the server as the
instance and its node as the connector's host, each attachment's ``connection_info`` turned into a
static PersistentVolume and its claim (kubevirt/volumes.py), the VM given a disk on each claim (the
boot volume as its root disk, no image import: controller/compose.py), then the attachments completed
(the volumes ``in-use``).

- ``build_refusal``: what a build cannot be given, before anything is claimed: no Cinder client
  ([cinder] unset in the controller's configuration). Volumes the boot makes (from an image, a snapshot
  or nothing) are made and reserved before ``prepare`` (steps/boot_volumes.py);
- ``name_devices`` (after the claim): each block device given its guest device name as Nova's compute
  gives them at build (compute/device_names.py), recorded in its mapping (os-volume_attachments' ``device``);
  none left on the bus ends the build with Nova's "Failure prepping block device.";
- ``prepare`` (after the claim, before the VM): each attachment updated with the connector and the
  mapping's device name as its ``mountpoint`` (Cinder shows it as the attachment's ``device``; its
  ``connection_info`` kept in block_device_mapping), then its PersistentVolume and claim applied; a
  Cinder failure or a volume type KubeVirt cannot use ends the build with Nova's "Failure prepping block
  device." or the type's refusal;
- ``complete`` (once the VM is applied): ``os-complete`` for each attachment;
- ``on_delete`` (a server's delete, once its VM is gone): what Nova's compute does with its volumes:
  each Cinder attachment deleted (the volume back to ``available``), each volume marked
  ``delete_on_termination`` deleted, the mappings soft-deleted. Cinder's failures are logged and the
  delete goes on, as Nova's does. The claims and PersistentVolumes go with the server's objects
  (gateway.delete_server).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from openkeel_compute.compute import block_device_rows, device_names
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.model import sysmeta

LOG = logging.getLogger(__name__)

NO_CINDER = "the controller has no Cinder client: set [cinder] in its configuration"
PREPPING = "Failure prepping block device."


def _volumes(server: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in server.get("block_devices") or () if b.get("destination_type") == "volume"]


def build_refusal(ctx: Any, server: dict[str, Any]) -> str | None:
    """Why the server cannot be built with its block devices, or None."""
    volumes = _volumes(server)
    if not volumes:
        return None
    if ctx.volumes is None:
        return NO_CINDER
    return None


def connector(server: dict[str, Any]) -> dict[str, Any]:
    """The connector Cinder exports the volumes to: the server's node (Nova's compute host)."""
    return {"host": server.get("node") or server.get("host") or "", "platform": "x86_64", "os_type": "linux",
            "multipath": False, "do_local_attach": False}


def name_devices(ctx: Any, server: dict[str, Any]) -> str | None:
    """Each block device named as Nova's compute names it at build (the names recorded and kept in
    ``server["block_devices"]``); the reason the build fails, or None."""
    bdms = server.get("block_devices") or []
    try:
        names = device_names.default_names(bdms, server.get("system_metadata") or {},
                                           server.get("root_device_name"))
    except device_names.TooManyDisks as exc:
        LOG.warning("server %s: its block devices cannot be named: %s", server["uuid"], exc)
        return PREPPING
    changed = [(bdm, names[str(bdm["uuid"])]) for bdm in bdms
               if str(bdm.get("uuid")) in names and bdm.get("device_name") != names[str(bdm["uuid"])]]
    if changed:
        with transaction(ctx.engine) as conn:
            for bdm, name in changed:
                block_device_rows.set_fields(conn, str(bdm["uuid"]), device_name=name)
                bdm["device_name"] = name
    return None


def prepare(ctx: Any, server: dict[str, Any]) -> str | None:
    """The attachments given the node's connector and their storage applied; the reason the build
    fails, or None. ``server["block_devices"]`` gets each ``connection_info``."""
    from openkeel_compute.controller.gateway import server_labels
    from openkeel_compute.kubevirt import volumes as kube_volumes
    from openkeel_compute.volume import errors as volume_errors

    volumes = _volumes(server)
    if not volumes:
        return None
    calls = ctx.volumes.admin()
    namespace = ctx.namespace_of(server)
    labels = server_labels(str(server["uuid"]))
    for bdm in volumes:
        info = bdm.get("connection_info")
        if isinstance(info, str):
            info = json.loads(info)
        if not info:
            try:
                attachment = calls.attachment_update(bdm["attachment_id"], connector(server),
                                                     mountpoint=bdm.get("device_name"))
            except volume_errors.VolumeError as exc:
                LOG.warning("server %s: volume %s not exported to its node: %s", server["uuid"], bdm["volume_id"],
                            exc.message)
                return PREPPING
            info = attachment.get("connection_info") or {}
            with transaction(ctx.engine) as conn:
                block_device_rows.save_connection(conn, bdm["uuid"], info)
        bdm["connection_info"] = info
        try:
            pv, pvc = kube_volumes.storage_objects(namespace, labels, str(bdm["volume_id"]),
                                                   str(bdm["attachment_id"]), int(bdm.get("volume_size") or 1), info)
        except kube_volumes.VolumeRefused as exc:
            return str(exc)
        ctx.ensure_namespace(namespace, str(server["project_id"]))
        ctx.cluster.apply(pv)
        ctx.cluster.apply(pvc)
    return None


def complete(ctx: Any, server: dict[str, Any]) -> None:
    """Each attachment completed: Cinder shows the volume ``in-use`` by the server."""
    from openkeel_compute.volume import errors as volume_errors

    for bdm in _volumes(server):
        try:
            ctx.volumes.admin().attachment_complete(bdm["attachment_id"])
        except volume_errors.VolumeError as exc:
            LOG.warning("server %s: attachment of volume %s not completed: %s", server["uuid"], bdm["volume_id"],
                        exc.message)


def on_delete(ctx: Any, server_uuid: str, server: dict[str, Any]) -> None:
    """The server's volumes given back and deleted as Nova's compute does on delete."""
    if (server.get("system_metadata") or {}).get(sysmeta.HAS_BLOCK_DEVICES) != "True":
        return
    with reader(ctx.engine) as conn:
        rows = block_device_rows.of(conn, server_uuid)
    if ctx.volumes is not None:
        from openkeel_compute.volume import errors as volume_errors

        calls = ctx.volumes.admin()
        for row in rows:
            try:
                if row["attachment_id"]:
                    calls.attachment_delete(row["attachment_id"])
                if row["volume_id"] and row["delete_on_termination"] and row["destination_type"] == "volume":
                    calls.delete_volume(row["volume_id"])
            except volume_errors.VolumeNotFound:
                pass  # deleted behind our back: nothing to give back
            except volume_errors.VolumeError as exc:
                LOG.warning("server %s: volume %s not given back to Cinder on delete: %s", server_uuid,
                            row["volume_id"], exc.message)
    elif any(row["volume_id"] or row["attachment_id"] for row in rows):  # an image's local disk is no volume
        LOG.warning("server %s: its volumes are not given back: [cinder] is not configured", server_uuid)
    with transaction(ctx.engine) as conn:
        block_device_rows.delete_all(conn, server_uuid)
