"""Nova's checks of a flavor and an image at boot, in Nova's order, with Nova's messages.

Pure functions over a flavor dict (the catalogue's row: ``id``, ``flavorid``, ``name``, ``memory_mb``,
``root_gb``, …, ``extra_specs``; the API's shape with ``ram`` and ``disk`` is read too) and an image
dict (Glance's fields with custom properties under ``properties``, as images.glance returns it). A
refusal is a BootRefused carrying the status and message ``POST /servers`` answers with; nothing is
written anywhere, so a refusal leaves nothing behind.

The order is the one Nova 34.0.0 follows when it creates a server from an image:

1. the flavor is enabled (a disabled flavor is "Flavor <internal id> could not be found.", 400);
2. image properties Nova parses before anything else: ``img_config_drive`` must be ``optional`` or
   ``mandatory``, then the CPU pinning, page size and memory encryption rules against the flavor's
   extra specs;
3. an image uploaded from an encrypted volume cannot be booted directly;
4. the image is ``active``;
5. the flavor's memory is at least the image's ``min_ram``;
6. the root disk: the image's size and ``min_disk`` must fit in the flavor's ``root_gb`` (or
   ``min_disk`` in the root volume when the server boots from a volume); a zero-disk flavor needs
   the ``os_compute_api:servers:create:zero_disk_flavor`` policy (403 otherwise).

The API handler reads the image first (images.glance: not found, not authorized, unreachable),
then calls check_boot, as Nova fetches the image before it looks at the flavor's state.

The property rules themselves live in kubevirt/image.py (``check_boot_rules``) and are used from there. Conflicts Nova
only meets when its driver builds the guest (TPM, sound and USB models, secure boot) are not boot
checks: Nova accepts the request, so they are reported when the VM's preference is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from openkeel_compute.kubevirt.flavor import DISABLED, Flavor, parse_flavor
from openkeel_compute.model.flavor import api_body_of_row

if TYPE_CHECKING:
    from openkeel_compute.kubevirt.image import ImageRefused

ZERO_DISK_FLAVOR_RULE = "os_compute_api:servers:create:zero_disk_flavor"
GiB = 1024**3
_CONFIG_DRIVE_VALUES = ("optional", "mandatory")


class BootRefused(Exception):
    """Nova refuses to boot this flavor with this image: ``code`` and ``message`` are its answer."""

    def __init__(self, nova_exception: str, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.nova_exception = nova_exception
        self.message = message
        self.code = code


def _ram(flavor: Mapping[str, Any]) -> int:
    return int(flavor["memory_mb"] if "memory_mb" in flavor else flavor["ram"])


def _root_gb(flavor: Mapping[str, Any]) -> int:
    return int(flavor["root_gb"] if "root_gb" in flavor else flavor["disk"])


def _disabled(flavor: Mapping[str, Any]) -> bool:
    return bool(flavor.get("disabled", flavor.get(DISABLED, False)))


def _rules_flavor(flavor: Mapping[str, Any]) -> Flavor:
    """The flavor as kubevirt/image.py reads it: a catalogue row (``memory_mb``, ...) or the API's shape."""
    return parse_flavor(dict(flavor) if "memory_mb" not in flavor else api_body_of_row(flavor))


def _refused(exc: ImageRefused) -> BootRefused:
    # At boot every flavor/image conflict is a 400, whatever the exception's own code.
    return BootRefused(exc.nova_exception, exc.message, 400)


def check_flavor_enabled(flavor: Mapping[str, Any]) -> None:
    """A disabled flavor cannot be booted; Nova names it by its internal id."""
    if _disabled(flavor):
        raise BootRefused("FlavorNotFound", f"Flavor {flavor['id']} could not be found.")


def check_image(flavor: Mapping[str, Any], image: Mapping[str, Any], *,
                zero_disk_allowed: Callable[[], bool],
                root_volume_gb: int | None = None, volume_backed: bool = False) -> None:
    """Nova's image-against-flavor checks at boot (steps 2-6 above); BootRefused on the first failure.

    ``zero_disk_allowed`` is asked only when an image-backed server gets a flavor with
    ``root_gb`` 0: the caller evaluates ZERO_DISK_FLAVOR_RULE for the request's credentials.
    ``volume_backed`` means the root disk is a volume (of ``root_volume_gb`` when it is to be created).
    """
    image_id = image.get("id")
    props = image.get("properties") or {}
    rules_flavor = _rules_flavor(flavor)

    config_drive = props.get("img_config_drive", "optional")
    if config_drive not in _CONFIG_DRIVE_VALUES:
        raise BootRefused("InvalidRequest", f"Invalid image metadata. Error: Field value {config_drive} is invalid")
    # The image rules bring the KubeVirt mapping's tables: imported by the first boot, not at start.
    from openkeel_compute.kubevirt import image as image_rules

    try:
        image_rules.check_boot_rules(rules_flavor, image)
    except image_rules.ImageRefused as exc:
        raise _refused(exc) from None

    if props.get("cinder_encryption_key_id") and image_id:
        raise BootRefused("ImageUnacceptable", f"Image {image_id} is unacceptable: Direct booting of an image "
                          "uploaded from an encrypted volume is unsupported.")
    if image.get("status") != "active":
        raise BootRefused("ImageNotActive", f"Image {image_id} is not active.")
    if _ram(flavor) < int(image.get("min_ram") or 0):
        raise BootRefused("FlavorMemoryTooSmall", "Flavor's memory is too small for requested image.")

    min_disk = int(image.get("min_disk") or 0) * GiB
    size = int(image.get("size") or 0)
    if volume_backed:
        if root_volume_gb is not None and min_disk > root_volume_gb * GiB:
            raise BootRefused("VolumeSmallerThanMinDisk",
                              "Volume is smaller than the minimum size specified in image metadata. Volume size "
                              f"is {root_volume_gb * GiB} bytes, minimum size is {min_disk} bytes.")
    else:
        dest = _root_gb(flavor) * GiB
        if dest:
            if size > dest:
                raise BootRefused("FlavorDiskSmallerThanImage",
                                  f"Flavor's disk is too small for requested image. Flavor disk is {dest} bytes, "
                                  f"image is {size} bytes.")
            if min_disk > dest:
                raise BootRefused("FlavorDiskSmallerThanMinDisk",
                                  "Flavor's disk is smaller than the minimum size specified in image metadata. "
                                  f"Flavor disk is {dest} bytes, minimum size is {min_disk} bytes.")
        elif not zero_disk_allowed():
            raise BootRefused("BootFromVolumeRequiredForZeroDiskFlavor",
                              "Only volume-backed servers are allowed for flavors with zero disk.", 403)


def check_boot(flavor: Mapping[str, Any], image: Mapping[str, Any], *, zero_disk_allowed: Callable[[], bool],
               root_volume_gb: int | None = None, volume_backed: bool = False) -> None:
    """Every check above, in Nova's order: the flavor enabled, then the image against it."""
    check_flavor_enabled(flavor)
    check_image(flavor, image, zero_disk_allowed=zero_disk_allowed, root_volume_gb=root_volume_gb,
                volume_backed=volume_backed)
