"""Server bodies per microversion, in the key order Nova 34.0.0 writes them.

``brief`` is an item of GET /servers; ``full`` the body of GET /servers/{id} and an item of
/servers/detail. What a handler must read before building them is in ``ServerData``; the policy
decisions that change a body (extended attributes, flavor extra specs, host status) are taken
once per request by the handler and passed in as ``Shown``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from openkeel_compute.compute import names, networks
from openkeel_compute.compute.instances import instance_faults, store
from openkeel_compute.model import image_properties, states

COLLECTION = "servers"
_PROGRESS_STATUSES = frozenset({"ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING"})
_FAULT_STATUSES = frozenset({"ERROR", "DELETED"})
IMAGE_PREFIX = "image_"
# The image properties 2.98 shows from system metadata: Nova's image property names and the
# legacy names it still accepts. Other image_* keys (min_ram, disk_format, ...) are not shown.
IMAGE_PROPERTIES = image_properties.ALL_NAMES


@dataclasses.dataclass(slots=True)
class ServerData:
    """A server row and what a full body needs beside it."""

    row: dict
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    system_metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    tags: list[str] = dataclasses.field(default_factory=list)
    fault: dict | None = None
    security_groups: list[str] = dataclasses.field(default_factory=list)  # names, [] hides the key
    host_status: str | None = None  # its host's state as its node shows it (None: from the row alone)
    server_groups: list[str] = dataclasses.field(default_factory=list)  # uuids of its groups (2.71)
    volumes: list[dict] = dataclasses.field(default_factory=list)  # its block devices with a volume id, in order


@dataclasses.dataclass(frozen=True, slots=True)
class Shown:
    """The policy decisions of one request that change server bodies."""

    extended_attributes: bool = False
    flavor_extra_specs: bool = False
    host_status: bool | None = None  # True: any; False: UNKNOWN only; None: never
    is_admin: bool = False
    server_groups: bool = False  # GET /servers/{id} from 2.71, never in lists


def isotime(value: dt.datetime | None) -> str:
    """Seconds and "Z"; a row never updated shows the current time, as Nova's helper does."""
    return (value or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plain_time(value: dt.datetime | None):
    return value.replace(tzinfo=None).isoformat() if value else None


def _json(text: str | None, default):
    return json.loads(text) if text else default


def host_status(row: dict) -> str:
    """The host's state as 2.16 shows it: the controller runs every server's host, so "UP" when
    the server has one, "" when it has none (never scheduled) or is deleted."""
    return "UP" if row["host"] and not row.get("deleted") else ""  # Nova finds no service for a deleted one


def _default_zone(req) -> str:
    return networks.default_zone(req.environ["openkeel.services"].conf)


def brief(links, row: dict) -> dict:
    return {"id": row["uuid"], "name": row["display_name"], "links": links.links(COLLECTION, row["uuid"])}


def _flavor(req, links, row: dict, show_extra_specs: bool) -> dict:
    flavor = store.flavors_of(row).cur
    if req.version >= (2, 47):
        body = {"vcpus": flavor["vcpus"], "ram": flavor["memory_mb"], "disk": flavor["root_gb"],
                "ephemeral": flavor["ephemeral_gb"], "swap": flavor["swap"], "original_name": flavor["name"]}
        if show_extra_specs:
            body["extra_specs"] = flavor.get("extra_specs") or {}
        return body
    flavor_id = str(flavor["flavorid"])
    return {"id": flavor_id, "links": [{"rel": "bookmark", "href": f"{links.bookmark_prefix}flavors/{flavor_id}"}]}


def _image(req, links, data: ServerData):
    image_ref = data.row["image_ref"]
    if not image_ref:
        return ""
    image_id = image_ref.rstrip("/").rsplit("/", 1)[-1]
    image = {"id": image_id, "links": [{"rel": "bookmark", "href": f"{links.bookmark_prefix}images/{image_id}"}]}
    if req.version >= (2, 98):
        cut = len(IMAGE_PREFIX)
        image["properties"] = {key[cut:]: value for key, value in data.system_metadata.items()
                               if key.startswith(IMAGE_PREFIX) and key[cut:] in IMAGE_PROPERTIES
                               and value is not None}
    return image


def _addresses(row: dict, extended: bool) -> dict:
    # Addresses are hidden while the server builds; a deleted server's network was let go with it (Nova
    # empties its network info cache at the delete).
    if row["vm_state"] == states.BUILDING or row.get("deleted"):
        return {}
    addresses = _json(row["network_info"], {})
    if extended:
        return addresses
    return {net: [{"version": a["version"], "addr": a["addr"]} for a in items] for net, items in addresses.items()}


def full(req, links, data: ServerData, shown: Shown, *, in_list: bool = False, update: bool = False) -> dict:
    """The server body; ``update``: the smaller body PUT answers before 2.75."""
    version = req.version
    row = data.row
    status = store.status(row)
    every = not update
    body = {
        "accessIPv4": row["access_ip_v4"] or "",
        "accessIPv6": row["access_ip_v6"] or "",
        "addresses": _addresses(row, every),
        "created": isotime(row["created_at"]),
        "flavor": _flavor(req, links, row, shown.flavor_extra_specs),
        "hostId": names.host_id(row["host"], str(row["project_id"])),
        "id": row["uuid"],
        "image": _image(req, links, data),
        "links": links.links(COLLECTION, row["uuid"]),
        "metadata": data.metadata,
        "name": row["display_name"],
        "status": status,
        "tenant_id": row["project_id"] or "",
        "user_id": row["user_id"] or "",
        "updated": isotime(row["updated_at"]),
        "OS-DCF:diskConfig": "AUTO" if row["auto_disk_config"] else "MANUAL",
    }
    if status in _FAULT_STATUSES and data.fault:
        body["fault"] = instance_faults.fault_view(data.fault, is_admin=shown.is_admin)
    if status in _PROGRESS_STATUSES:
        body["progress"] = row["progress"]
    if update:
        return _update_tail(version, body, data, shown)
    # the zone asked for at boot, else the default zone ([DEFAULT] default_availability_zone)
    body["OS-EXT-AZ:availability_zone"] = (row["availability_zone"] or _default_zone(req)) if row["host"] \
        else (row["availability_zone"] or "")
    body["config_drive"] = row["config_drive"] if row["config_drive"] is not None else ""
    body["key_name"] = row["key_name"]
    body["OS-SRV-USG:launched_at"] = _plain_time(row["launched_at"])
    body["OS-SRV-USG:terminated_at"] = _plain_time(row["terminated_at"])
    if data.security_groups and not in_list:
        body["security_groups"] = [{"name": name} for name in data.security_groups]
    if shown.extended_attributes:
        body["OS-EXT-SRV-ATTR:host"] = row["host"]
        body["OS-EXT-SRV-ATTR:instance_name"] = row["vm_name"] or f"instance-{row['id']:08x}"
        body["OS-EXT-SRV-ATTR:hypervisor_hostname"] = row["node"]
        if version >= (2, 3):
            body["OS-EXT-SRV-ATTR:hostname"] = row["hostname"]
            body["OS-EXT-SRV-ATTR:kernel_id"] = row["kernel_id"] if row["kernel_id"] is not None else ""
            body["OS-EXT-SRV-ATTR:launch_index"] = row["launch_index"]
            body["OS-EXT-SRV-ATTR:ramdisk_id"] = row["ramdisk_id"] if row["ramdisk_id"] is not None else ""
            body["OS-EXT-SRV-ATTR:reservation_id"] = row["reservation_id"]
            body["OS-EXT-SRV-ATTR:root_device_name"] = row["root_device_name"]
            body["OS-EXT-SRV-ATTR:user_data"] = row["user_data"]
    body["OS-EXT-STS:task_state"] = row["task_state"]
    body["OS-EXT-STS:vm_state"] = row["vm_state"]
    body["OS-EXT-STS:power_state"] = row["power_state"]
    body["os-extended-volumes:volumes_attached"] = _volumes_attached(version, data.volumes)
    if version >= (2, 9):
        body["locked"] = bool(row["locked_by"])
    if version >= (2, 16) and not in_list and shown.host_status is not None:
        _add_host_status(body, data, shown.host_status)
    if version >= (2, 19):
        body["description"] = row["display_description"]
    if version >= (2, 26):
        body["tags"] = data.tags
    if version >= (2, 63):
        body["trusted_image_certificates"] = _json(row["trusted_certs"], None)
    if shown.server_groups and not in_list:
        body["server_groups"] = list(data.server_groups)
    if version >= (2, 73):
        body["locked_reason"] = row["locked_reason"]
    if version >= (2, 90) and not shown.extended_attributes:
        body["OS-EXT-SRV-ATTR:hostname"] = row["hostname"]
    if version >= (2, 96):
        body["pinned_availability_zone"] = row["pinned_availability_zone"]
    if version >= (2, 100):
        body["scheduler_hints"] = _json(row["scheduler_hints"], {})
    if version >= (2, 16) and in_list and shown.host_status is not None:
        # Lists add host_status after the rest of the body.
        _add_host_status(body, data, shown.host_status)
    if data.security_groups and in_list:
        # Lists add the groups of all their servers last.
        body["security_groups"] = [{"name": name} for name in data.security_groups]
    return body


def _volumes_attached(version, volumes: list[dict]) -> list[dict]:
    """Each block device with a volume, in the order written; ``delete_on_termination`` from 2.3."""
    if version >= (2, 3):
        return [{"id": v["volume_id"], "delete_on_termination": bool(v["delete_on_termination"])} for v in volumes]
    return [{"id": v["volume_id"]} for v in volumes]


def _update_tail(version, body: dict, data: ServerData, shown: Shown) -> dict:
    """What PUT shows after the common part before 2.75: no zone, config drive, key, usage
    times, states, volumes, extended attributes or host status."""
    row = data.row
    if version >= (2, 9):
        body["locked"] = bool(row["locked_by"])
    if version >= (2, 19):
        body["description"] = row["display_description"]
    if version >= (2, 26):
        body["tags"] = data.tags
    if version >= (2, 63):
        body["trusted_image_certificates"] = _json(row["trusted_certs"], None)
    if shown.server_groups:
        body["server_groups"] = list(data.server_groups)
    if version >= (2, 73):
        body["locked_reason"] = row["locked_reason"]
    return body


def _add_host_status(body: dict, data: ServerData, any_status: bool) -> None:
    value = host_status(data.row)
    if value and data.host_status is not None:
        value = data.host_status
    if any_status or value == "UNKNOWN":
        body["host_status"] = value


def collection(req, links, rows: list[dict], items: list[dict], collection_name: str, limit: int | None,
               max_limit: int, params: dict) -> dict:
    result: dict = {"servers": items}
    max_items = min(limit, max_limit) if limit is not None else max_limit
    if max_items and max_items == len(rows):
        result["servers_links"] = [
            {"rel": "next", "href": links.next_link(collection_name, params, rows[-1]["uuid"])}]
    return result
