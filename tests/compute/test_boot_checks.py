"""Nova's boot checks of an image against a flavor.

Every message below was read from the real Nova 34.0.0 servers API (booting snapshots carrying the
properties named, on flavors made for the purpose) unless the comment says it comes from Nova's
exception text because the oracle's image service cannot produce such an image.
"""

from __future__ import annotations

import pytest

from openkeel_compute.compute import boot_checks
from openkeel_compute.compute.boot_checks import BootRefused, check_boot

IMAGE_ID = "e576dc6c-f688-46e3-90ff-27b3a5a1ade0"
GiB = 1024**3


def flavor(ram=4096, disk=40, vcpus=2, specs=None, **kw):
    row = {"id": 7, "flavorid": "big", "name": "big", "memory_mb": ram, "vcpus": vcpus, "root_gb": disk,
           "ephemeral_gb": 0, "swap": 0, "rxtx_factor": 1.0, "disabled": False, "is_public": True,
           "extra_specs": dict(specs or {})}
    row.update(kw)
    return row


def image(props=None, **kw):
    body = {"id": IMAGE_ID, "name": "snap", "status": "active", "size": 74185822, "min_ram": 0, "min_disk": 20,
            "disk_format": "qcow2", "container_format": "bare", "properties": dict(props or {})}
    body.update(kw)
    return body


def refused(flv, img, allowed=True, **kw) -> BootRefused:
    with pytest.raises(BootRefused) as info:
        check_boot(flv, img, zero_disk_allowed=lambda: allowed, **kw)
    return info.value


def test_a_fitting_image_passes():
    check_boot(flavor(), image(), zero_disk_allowed=lambda: pytest.fail("policy asked for a sized flavor"))


def test_min_disk_against_the_flavor_disk():
    err = refused(flavor(disk=1), image())
    assert err.code == 400
    assert err.message == ("Flavor's disk is smaller than the minimum size specified in image "
                                       "metadata. Flavor disk is 1073741824 bytes, minimum size is 21474836480 bytes.")
    err = refused(flavor(disk=5), image())
    assert err.message.endswith("Flavor disk is 5368709120 bytes, minimum size is 21474836480 bytes.")
    check_boot(flavor(disk=20), image(), zero_disk_allowed=lambda: False)


def test_zero_disk_flavor_asks_the_policy():
    asked = []
    err = refused(flavor(disk=0), image(), allowed=False)
    assert err.code == 403
    assert err.message == ("Only volume-backed servers are allowed for flavors with zero disk.")
    check_boot(flavor(disk=0), image(), zero_disk_allowed=lambda: asked.append(1) or True)
    assert asked == [1]
    assert boot_checks.ZERO_DISK_FLAVOR_RULE == "os_compute_api:servers:create:zero_disk_flavor"


def test_volume_backed_servers_skip_the_flavor_disk():
    check_boot(flavor(disk=0), image(), zero_disk_allowed=lambda: False, volume_backed=True)
    check_boot(flavor(disk=1), image(), zero_disk_allowed=lambda: False, volume_backed=True, root_volume_gb=20)
    # Nova's exception text (the oracle has no volumes of a chosen size to boot from)
    err = refused(flavor(disk=1), image(), volume_backed=True, root_volume_gb=10)
    assert err.message == ("Volume is smaller than the minimum size specified in image metadata. Volume size is "
                           "10737418240 bytes, minimum size is 21474836480 bytes.")


def test_image_size_against_the_flavor_disk():
    # Nova's exception text: the oracle's images are all far smaller than 1 GiB
    err = refused(flavor(disk=1), image(size=2 * GiB, min_disk=0))
    assert err.code == 400
    assert err.message == ("Flavor's disk is too small for requested image. Flavor disk is "
                                       "1073741824 bytes, image is 2147483648 bytes.")
    # the size is checked before min_disk
    assert refused(flavor(disk=1), image(size=2 * GiB)).nova_exception == "FlavorDiskSmallerThanImage"


def test_min_ram_before_the_disk():
    # Nova's exception text: snapshots in the oracle always carry min_ram 0
    err = refused(flavor(ram=512, disk=1), image(min_ram=1024))
    assert err.code == 400
    assert err.message == ("Flavor's memory is too small for requested image.")
    check_boot(flavor(ram=1024), image(min_ram=1024), zero_disk_allowed=lambda: True)


def test_image_must_be_active():
    for status in ("queued", "saving", "importing", "deactivated", "killed"):
        err = refused(flavor(ram=1, disk=1), image(status=status, min_ram=9999))
        assert err.code == 400
        assert err.message == f"Image {IMAGE_ID} is not active."


def test_cpu_policy_is_a_400_before_the_disk():
    img = image({"hw_cpu_policy": "dedicated"})
    err = refused(flavor(disk=1, specs={"hw:cpu_policy": "shared"}), img)
    assert err.code == 400
    assert err.message == ("Image property 'hw_cpu_policy' is not permitted to override CPU "
                                       "pinning policy set against the flavor")


def test_page_size_is_checked_before_min_disk():
    err = refused(flavor(disk=1), image({"hw_mem_page_size": "large", "hw_tpm_version": "2.0",
                                         "hw_mem_encryption": "true"}))
    assert err.code == 400
    assert err.message == ("Page size large forbidden against '<empty>'")


def test_memory_encryption_needs_uefi_before_min_disk():
    err = refused(flavor(disk=1), image({"hw_mem_encryption": "true"}))
    assert err.code == 400
    assert err.message == (f"Memory encryption is requested by hw_mem_encryption property of image {IMAGE_ID} but the image "
        "metadata doesn't have the 'hw_firmware_type' property set to 'uefi'")


def test_invalid_config_drive_property_comes_first():
    err = refused(flavor(disk=1), image({"hw_mem_page_size": "large", "img_config_drive": "bad"}))
    assert err.code == 400
    assert err.message == ("Invalid image metadata. Error: Field value bad is invalid")
    check_boot(flavor(), image({"img_config_drive": "mandatory"}), zero_disk_allowed=lambda: True)


def test_image_from_an_encrypted_volume():
    err = refused(flavor(), image({"cinder_encryption_key_id": "abc"}))
    assert err.code == 400
    assert err.message == (f"Image {IMAGE_ID} is unacceptable: Direct booting of an image "
                                       "uploaded from an encrypted volume is unsupported.")
    # the CPU policy is parsed before
    err = refused(flavor(specs={"hw:cpu_policy": "shared"}), image({"cinder_encryption_key_id": "abc",
                                                                   "hw_cpu_policy": "dedicated"}))
    assert err.nova_exception == "ImageCPUPinningForbidden"


def test_driver_time_conflicts_are_not_boot_checks():
    # Nova accepts a TPM version the flavor contradicts at the API (202): its driver meets it later.
    specs = {"hw:tpm_version": "1.2", "hw:tpm_model": "tpm-tis"}
    check_boot(flavor(ram=512, vcpus=1, specs=specs), image({"hw_tpm_version": "2.0"}),
               zero_disk_allowed=lambda: True)
    err = refused(flavor(ram=512, disk=1, vcpus=1, specs=specs), image({"hw_tpm_version": "2.0"}))
    assert err.nova_exception == "FlavorDiskSmallerThanMinDisk"


def test_disabled_flavor_is_not_found_by_its_internal_id():
    # Nova's compute API names the flavor by its database id (flavors cannot be disabled through the API).
    err = refused(flavor(disabled=True), image())
    assert err.code == 400
    assert err.message == ("Flavor 7 could not be found.")


def test_api_shaped_flavors_are_read_too():
    api = {"id": "big", "name": "big", "ram": 4096, "disk": 1, "vcpus": 2, "extra_specs": {}}
    assert refused(api, image()).nova_exception == "FlavorDiskSmallerThanMinDisk"
    check_boot(dict(api, disk=20), image(), zero_disk_allowed=lambda: False)
