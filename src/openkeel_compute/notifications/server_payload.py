"""Server notification payloads, versioned and legacy, as Nova 34.0.0 builds them from an instance.

Everything here is pure: a ``ServerView`` (the instance row as read, its flavor copy, metadata, system
metadata, tags, key pairs and the request's context) goes in, plain JSON-ready data comes out.

Versioned (``instance.*``): an ``InstancePayload`` family object in Nova's envelope. The payload name
and version depend on the event (``PAYLOADS``): ``InstanceActionPayload`` 1.9 for most actions,
``InstanceCreatePayload`` 1.13, ``InstanceActionRebuildPayload`` 1.10,
``InstanceActionResizePrepPayload`` 1.4, ``InstanceUpdatePayload`` 2.1 and ``InstanceExistsPayload``
2.1. ``block_devices`` lists the server's volumes (BlockDevicePayload 1.0) in the events Nova's compute
sends with them, and in every event with ``[notifications] bdms_in_notifications``; it is null otherwise,
as Nova's. ``shares`` is null (``include_share_mapping`` off; no Manila).

Legacy (``compute.instance.*``): the flat dict of Nova's ``info_from_instance``, with its odd types kept
(``created_at`` as ``str()`` of the timestamp, the other times as ``%Y-%m-%dT%H:%M:%S.%f`` or ``""``,
``progress`` ``""`` when zero, ``cell_name`` ``""``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from openkeel_compute.model import sysmeta
from openkeel_compute.notifications.base import envelope
from openkeel_compute.notifications.flavor import FlavorAction, build_flavor_payload_data

#: power_state (Nova's integer) -> the name versioned payloads carry
POWER_STATES = {0: "pending", 1: "running", 3: "paused", 4: "shutdown", 6: "crashed", 7: "suspended"}

#: versioned payload object name and version, by the kind of event
PAYLOADS: dict[str, tuple[str, str]] = {
    "action": ("InstanceActionPayload", "1.9"),
    "create": ("InstanceCreatePayload", "1.13"),
    "rebuild": ("InstanceActionRebuildPayload", "1.10"),
    "rescue": ("InstanceActionRescuePayload", "1.4"),
    "resize_prep": ("InstanceActionResizePrepPayload", "1.4"),
    "update": ("InstanceUpdatePayload", "2.1"),
    "exists": ("InstanceExistsPayload", "2.1"),
    "volume": ("InstanceActionVolumePayload", "1.7"),
    "volume_swap": ("InstanceActionVolumeSwapPayload", "1.9"),
    "snapshot": ("InstanceActionSnapshotPayload", "1.10"),  # with snapshot_image_id (the image being made)
}
EXCEPTION_PAYLOAD = ("ExceptionPayload", "1.1")
STATE_UPDATE_PAYLOAD = ("InstanceStateUpdatePayload", "1.0")
AUDIT_PERIOD_PAYLOAD = ("AuditPeriodPayload", "1.0")
IP_PAYLOAD = ("IpPayload", "1.0")
KEYPAIR_PAYLOAD = ("KeypairPayload", "1.0")
BLOCK_DEVICE_PAYLOAD = ("BlockDevicePayload", "1.0")


@dataclasses.dataclass
class ServerView:
    """One server as a notification describes it, and who asked (the request's context)."""

    row: Mapping[str, Any]  # the instances row (deleted ones too)
    flavor: Mapping[str, Any]  # the current flavor copy's fields (compute/flavor_copy.py)
    metadata: dict[str, str]
    system_metadata: dict[str, str]
    tags: list[str]
    keypairs: list[dict[str, Any]]  # user_id, name, fingerprint, public_key, type
    addresses: dict[str, list[dict[str, Any]]]  # the server's addresses by network, as the API shows them
    request_id: str | None = None
    user_id: str | None = None  # the action's initiator
    project_id: str | None = None
    new_flavor: Mapping[str, Any] | None = None  # a resize's target flavor
    #: the server's block device mappings that name a volume (device_name, boot_index,
    #: delete_on_termination, volume_id, tag), in the order written
    volumes: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Fault:
    """What went wrong, as an ExceptionPayload carries it."""

    exception: str
    message: str
    traceback: str = ""
    module_name: str = "openkeel_compute.controller"
    function_name: str = "run"
    code: int = 500


def iso(value: Any) -> str | None:
    """A versioned payload's datetime: ``2012-10-29T13:42:11Z``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _legacy_time(value: Any) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if isinstance(value, dt.datetime) else (str(value) if value else "")


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _power_state(value: Any) -> str | None:
    return None if value is None else POWER_STATES.get(int(value), "pending")


def flavor_payload(flavor: Mapping[str, Any]) -> dict[str, Any]:
    """The FlavorPayload of an instance's flavor: extra specs loaded, projects not (null)."""
    data = build_flavor_payload_data({**flavor, "projects": None}, FlavorAction.UPDATE)
    data["projects"] = None
    return envelope("FlavorPayload", "1.4", data)


def ip_payloads(addresses: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """IpPayloads from the server's addresses: one per fixed address, labelled with its network. The pod
    network has no Neutron port, so ``port_uuid`` and ``device_name`` are null."""
    found = []
    for label, entries in addresses.items():
        for entry in entries:
            if entry.get("OS-EXT-IPS:type", "fixed") != "fixed":
                continue
            found.append(envelope(*IP_PAYLOAD, {
                "label": label, "mac": entry.get("OS-EXT-IPS-MAC:mac_addr"), "meta": {},
                "port_uuid": entry.get("port_id"), "version": int(entry.get("version") or 4),
                "address": entry.get("addr"), "device_name": entry.get("device_name")}))
    return found


def fault_payload(fault: Fault | None) -> dict[str, Any] | None:
    if fault is None:
        return None
    return envelope(*EXCEPTION_PAYLOAD, {
        "module_name": fault.module_name, "function_name": fault.function_name, "exception": fault.exception,
        "exception_message": fault.message, "traceback": fault.traceback})


def instance_data(view: ServerView) -> dict[str, Any]:
    """The InstancePayload fields every versioned server payload shares."""
    row = view.row
    system_metadata = view.system_metadata
    periodic = not (view.user_id and view.project_id)
    return {
        "uuid": str(row["uuid"]),
        "user_id": _opt(row.get("user_id")),
        "tenant_id": _opt(row.get("project_id")),
        "reservation_id": _opt(row.get("reservation_id")),
        "display_name": _opt(row.get("display_name")),
        "display_description": _opt(row.get("display_description")),
        "host_name": _opt(row.get("hostname")),
        "host": _opt(row.get("host")),
        "node": _opt(row.get("node")),
        "os_type": _opt(row.get("os_type")),
        "architecture": _opt(row.get("architecture")),
        "availability_zone": _opt(row.get("availability_zone")),
        "flavor": flavor_payload(view.flavor),
        "image_uuid": _opt(row.get("image_ref")),
        "key_name": _opt(row.get("key_name")),
        "kernel_id": _opt(row.get("kernel_id")),
        "ramdisk_id": _opt(row.get("ramdisk_id")),
        "created_at": iso(row.get("created_at")),
        "launched_at": iso(row.get("launched_at")),
        "terminated_at": iso(row.get("terminated_at")),
        "deleted_at": iso(row.get("deleted_at")),
        "updated_at": iso(row.get("updated_at")),
        "state": _opt(row.get("vm_state")),
        "power_state": _power_state(row.get("power_state")),
        "task_state": _opt(row.get("task_state")),
        "progress": row.get("progress"),
        "ip_addresses": ip_payloads(view.addresses),
        "block_devices": None,
        "metadata": dict(view.metadata),
        "locked": bool(row.get("locked")),
        "auto_disk_config": "AUTO" if row.get("auto_disk_config") else "MANUAL",
        "request_id": None if periodic else view.request_id,
        "action_initiator_user": view.user_id,
        "action_initiator_project": view.project_id,
        "locked_reason": row.get("locked_reason") or system_metadata.get("locked_reason"),
        "shares": None,
    }


def block_device_payloads(view: ServerView) -> list[dict[str, Any]]:
    """The server's volumes as BlockDevicePayloads (Nova's lists only the mappings with a volume)."""
    return [envelope(*BLOCK_DEVICE_PAYLOAD, {
        "device_name": _opt(bdm.get("device_name")), "boot_index": bdm.get("boot_index"),
        "delete_on_termination": bool(bdm.get("delete_on_termination")), "volume_id": str(bdm["volume_id"]),
        "tag": _opt(bdm.get("tag"))}) for bdm in view.volumes if bdm.get("volume_id")]


def versioned_payload(kind: str, view: ServerView, *, fault: Fault | None = None,
                      extra: Mapping[str, Any] | None = None, with_block_devices: bool = False) -> dict[str, Any]:
    """The versioned payload of one event of ``kind`` (a key of ``PAYLOADS``). ``with_block_devices``:
    Nova's compute hands this event the server's block device mappings, or ``[notifications]
    bdms_in_notifications`` is true: ``block_devices`` lists the server's volumes; else it is null."""
    data = instance_data(view)
    if with_block_devices:
        data["block_devices"] = block_device_payloads(view)
    if kind not in ("update", "exists"):
        data["fault"] = fault_payload(fault)
    if kind == "create":
        data["keypairs"] = [envelope(*KEYPAIR_PAYLOAD, {
            "user_id": _opt(k.get("user_id")), "name": str(k["name"]), "fingerprint": _opt(k.get("fingerprint")),
            "public_key": _opt(k.get("public_key")), "type": str(k.get("type") or "ssh")}) for k in view.keypairs]
        data["tags"] = list(view.tags)
        data["trusted_image_certificates"] = _trusted_certs(view.row)
        data["instance_name"] = f"instance-{int(view.row.get('id') or 0):08x}"
    elif kind == "rebuild":
        data["trusted_image_certificates"] = _trusted_certs(view.row)
    elif kind == "rescue":
        data["rescue_image_ref"] = view.system_metadata.get(sysmeta.RESCUE_IMAGE_REF) or None
    elif kind == "resize_prep":
        data["new_flavor"] = flavor_payload(view.new_flavor or view.flavor)
    elif kind == "update":
        data["tags"] = list(view.tags)
    data.update(extra or {})
    return envelope(*PAYLOADS[kind], data)


def _trusted_certs(row: Mapping[str, Any]) -> list[str] | None:
    import json

    text = row.get("trusted_certs")
    if not text:
        return None
    value = json.loads(text)
    ids = value.get("ids") if isinstance(value, dict) else value
    return list(ids) if ids else None


def state_update(old_state: str | None, state: str | None, old_task_state: str | None,
                 new_task_state: str | None) -> dict[str, Any]:
    return envelope(*STATE_UPDATE_PAYLOAD, {"old_state": old_state, "state": state,
                                            "old_task_state": old_task_state, "new_task_state": new_task_state})


def audit_period(beginning: str, ending: str) -> dict[str, Any]:
    """An AuditPeriodPayload from the legacy strings (``%Y-%m-%dT%H:%M:%S.%f``)."""
    return envelope(*AUDIT_PERIOD_PAYLOAD, {"audit_period_beginning": iso(beginning),
                                            "audit_period_ending": iso(ending)})


def legacy_payload(view: ServerView, *, fault: Fault | None = None, with_network: bool = False,
                   image_service: str | None = None, **extra: Any) -> dict[str, Any]:
    """Nova's ``info_from_instance`` (plus a fault's ``message``/``code`` and the ``extra`` keys).
    ``fixed_ips`` only ``with_network`` (Nova passes its network info to create.end only);
    ``image_ref_url`` is the image's URL at ``image_service`` (without one, the image id, as Nova)."""
    row = view.row
    flavor = view.flavor
    created = row.get("created_at")
    fixed_ips: list[dict[str, Any]] = [{"address": e.get("addr"), "version": int(e.get("version") or 4), "type": "fixed",
                  "floating_ips": [], "meta": {}, "label": label, "vif_mac": e.get("OS-EXT-IPS-MAC:mac_addr")}
                 for label, entries in view.addresses.items() for e in entries
                 if e.get("OS-EXT-IPS:type", "fixed") == "fixed"]
    info: dict[str, Any] = {
        "tenant_id": row.get("project_id"),
        "user_id": row.get("user_id"),
        "instance_id": row["uuid"],
        "display_name": row.get("display_name"),
        "reservation_id": row.get("reservation_id"),
        "hostname": row.get("hostname"),
        "instance_type": flavor.get("name", ""),
        "instance_type_id": row.get("instance_type_id"),
        "instance_flavor_id": flavor.get("flavorid", ""),
        "architecture": row.get("architecture"),
        "memory_mb": flavor.get("memory_mb"),
        "disk_gb": int(flavor.get("root_gb") or 0) + int(flavor.get("ephemeral_gb") or 0),
        "vcpus": flavor.get("vcpus"),
        "root_gb": flavor.get("root_gb"),
        "ephemeral_gb": flavor.get("ephemeral_gb"),
        "host": row.get("host"),
        "node": row.get("node"),
        "availability_zone": row.get("availability_zone"),
        "cell_name": "",
        "created_at": str(created.replace(tzinfo=dt.UTC)) if isinstance(created, dt.datetime) else str(created),
        "terminated_at": _legacy_time(row.get("terminated_at")),
        "deleted_at": _legacy_time(row.get("deleted_at")),
        "launched_at": _legacy_time(row.get("launched_at")),
        "image_ref_url": f"{image_service.rstrip('/')}/images/{row.get('image_ref')}"
        if image_service and row.get("image_ref") else row.get("image_ref"),
        "os_type": row.get("os_type"),
        "kernel_id": row.get("kernel_id"),
        "ramdisk_id": row.get("ramdisk_id"),
        "state": row.get("vm_state"),
        "state_description": row.get("task_state") or "",
        "progress": int(row["progress"]) if row.get("progress") else "",
        "access_ip_v4": row.get("access_ip_v4"),
        "access_ip_v6": row.get("access_ip_v6"),
        "image_meta": {k[len("image_"):]: v for k, v in view.system_metadata.items() if k.startswith("image_")},
        "metadata": dict(view.metadata),
    }
    if with_network:
        info["fixed_ips"] = fixed_ips
    info.update(extra)
    if fault is not None:
        info.update({"exception": fault.message, "message": fault.message, "code": fault.code})
    return info
