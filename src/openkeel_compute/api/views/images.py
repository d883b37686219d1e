"""Bodies of the image proxy (/images), as Nova 34.0.0's images view builds them from Glance's images."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, cast

from oslo_utils import strutils

from openkeel_compute.api import links as links_module
from openkeel_compute.api.links import LinkBuilder

_STATUS: dict[Any, str] = {"active": "ACTIVE", "queued": "SAVING", "saving": "SAVING", "deleted": "DELETED",
           "pending_delete": "DELETED", "killed": "ERROR"}
_PROGRESS: dict[Any, int] = {"queued": 25, "saving": 50, "active": 100}
# Properties Nova keeps as JSON text in Glance and shows decoded (its _convert_from_string).
_JSON_PROPERTIES = ("block_device_mapping", "mappings")


def properties(image: dict) -> dict[str, Any]:
    shown = dict(image.get("properties") or {})
    for name in _JSON_PROPERTIES:
        if isinstance(shown.get(name), str):
            try:
                shown[name] = json.loads(shown[name])
            except ValueError:
                pass
    return shown


def _isotime(value: str | None) -> str | None:
    """Glance's time as Nova writes it (utils.isotime): to the second, Z for UTC, else the zone's name."""
    if not value:
        return None
    moment = dt.datetime.fromisoformat(value)
    # a fixed offset always has a name
    zone = cast(str, moment.tzinfo.tzname(None)) if moment.tzinfo else "UTC"
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + ("Z" if zone in ("UTC", "UTC+00:00") else zone)


class ImageLinks:
    """self, bookmark and the image service's "alternate" link of one request."""

    def __init__(self, builder: LinkBuilder, glance_base: str, glance_link_prefix: str | None):
        self.builder = builder
        self.glance_base = links_module.update_link_prefix(glance_base, glance_link_prefix)

    def of(self, image_id: str) -> list[dict]:
        return [*self.builder.links("images", image_id),
                {"rel": "alternate", "type": "application/vnd.openstack.image",
                 "href": "/".join([self.glance_base, "images", str(image_id)])}]


def basic(image: dict, image_links: ImageLinks) -> dict:
    return {"id": image.get("id"), "name": image.get("name"), "links": image_links.of(image["id"])}


def detailed(image: dict, image_links: ImageLinks) -> dict:
    metadata = properties(image)
    body = {
        "id": image.get("id"),
        "name": image.get("name"),
        "minRam": int(image.get("min_ram") or 0),
        "minDisk": int(image.get("min_disk") or 0),
        "metadata": metadata,
        "created": _isotime(image.get("created_at")),
        "updated": _isotime(image.get("updated_at")),
        "status": _STATUS.get(image.get("status"), "UNKNOWN"),
        "progress": _PROGRESS.get(image.get("status"), 0),
        "OS-EXT-IMG-SIZE:size": image.get("size"),
        "links": image_links.of(image["id"]),
    }
    instance_uuid = metadata.get("instance_uuid")
    if instance_uuid is not None:
        body["server"] = {"id": instance_uuid, "links": image_links.builder.links("servers", instance_uuid)}
    auto_disk_config = metadata.get("auto_disk_config")
    if auto_disk_config is not None:
        body["OS-DCF:diskConfig"] = "AUTO" if strutils.bool_from_string(auto_disk_config) else "MANUAL"
    return body
