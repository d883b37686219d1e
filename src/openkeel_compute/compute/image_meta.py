"""The image a server was booted from, as Nova keeps it in system metadata.

At boot Nova copies the image's properties into the server's system metadata as
``image_<property>`` (each value cut to 255 bytes of UTF-8, never inside a character), together
with ``image_min_ram``, ``image_min_disk`` (at least the flavor's root disk, except for VHD
images, which take the root disk as it is), ``image_disk_format`` and
``image_container_format``. Block-device mappings are not copied. The copy is what the server
keeps of its image: 2.98 shows its properties, and the controller builds the VM's preference
from it, whatever later happens to the image.
"""

from __future__ import annotations

from openkeel_compute.model import sysmeta

PREFIX = sysmeta.IMAGE_PREFIX
INHERITABLE = ("min_ram", "min_disk", "disk_format", "container_format")
SKIPPED = ("mappings", "block_device_mapping", "img_mappings", "img_block_device_mapping")


def truncate_utf8(value: str, length: int = 255) -> str:
    """``value`` cut to ``length`` bytes of UTF-8 without splitting a character."""
    return value.encode("utf-8")[:length].decode("utf-8", "ignore")


def system_metadata(image: dict, flavor: dict | None = None) -> dict[str, str]:
    """The ``image_*`` system metadata of a server booted from ``image`` (Glance's fields, with
    ``properties``) with ``flavor`` (its ``root_gb``)."""
    meta: dict[str, str] = {}
    for key, value in (image.get("properties") or {}).items():
        if key in SKIPPED:
            continue
        meta[PREFIX + key] = truncate_utf8(str(value))
    for key in INHERITABLE:
        value = image.get(key)
        if key == "min_disk" and flavor is not None:
            value = flavor["root_gb"] if image.get("disk_format") == "vhd" else max(value or 0, flavor["root_gb"])
        if value is not None:
            meta[PREFIX + key] = str(value)
    return meta


def name_metadata(image: dict) -> dict[str, str]:
    """The image's name as the server keeps it for notifications (``sysmeta.IMAGE_NAME``)."""
    return {sysmeta.IMAGE_NAME: truncate_utf8(str(image.get("name") or ""))}


def image_from_system_metadata(system_meta: dict[str, str]) -> dict:
    """The inverse: the inheritable fields at top level, everything else under ``properties``."""
    image: dict = {}
    properties: dict = {}
    for key, value in system_meta.items():
        if value is None:
            continue
        key = key.removeprefix(PREFIX)
        if key in SKIPPED:
            continue
        if key in INHERITABLE:
            image[key] = value
        else:
            properties[key] = value
    image["properties"] = properties
    return image
