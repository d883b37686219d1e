"""Image properties into the preference, refused with Nova 34.0.0's messages where Nova refuses."""

from __future__ import annotations

from typing import Any

import pytest

from openkeel_compute.kubevirt.image import ImageRefused, preference_with_image


def _flavor(**specs: str) -> dict[str, Any]:
    return {"id": "f1", "name": "small", "ram": 2048, "vcpus": 2, "disk": 20, "extra_specs": specs}


def _image(min_ram: int = 0, **props: Any) -> dict[str, Any]:
    return {"id": "img-1", "name": "cirros", "min_ram": min_ram, "properties": props}


def _refusal(flavor: dict[str, Any], image: dict[str, Any]) -> ImageRefused:
    with pytest.raises(ImageRefused) as caught:
        preference_with_image(flavor, image)
    return caught.value


def test_twin_properties_must_be_equal() -> None:
    error = _refusal(_flavor(**{"hw:tpm_version": "2.0"}), _image(hw_tpm_version="1.2"))
    assert (error.nova_exception, error.message) == (
        "FlavorImageConflict",
        ("Flavor small has hw:tpm_version extra spec explicitly set to 2.0, conflicting with image cirros which "
        "has hw_tpm_version explicitly set to 1.2."))


def test_secure_boot_twin_uses_the_os_prefix() -> None:
    error = _refusal(_flavor(**{"os:secure_boot": "required"}), _image(os_secure_boot="disabled"))
    assert error.message == ("Flavor small has os:secure_boot extra spec explicitly set to required, conflicting "
                             "with image cirros which has os_secure_boot explicitly set to disabled.")


def test_multiqueue_conflict_compares_booleans() -> None:
    error = _refusal(_flavor(**{"hw:vif_multiqueue_enabled": "false"}), _image(hw_vif_multiqueue_enabled="true"))
    assert error.message == ("Flavor small has hw:vif_multiqueue_enabled extra spec explicitly set to False, "
                             "conflicting with image cirros which has hw_vif_multiqueue_enabled explicitly set "
                             "to True.")


@pytest.mark.parametrize(("flavor_policy", "image_policy"), [("shared", "dedicated"), ("shared", "mixed"),
                                                             ("mixed", "dedicated")])
def test_an_image_may_not_raise_the_cpu_policy(flavor_policy: str, image_policy: str) -> None:
    error = _refusal(_flavor(**{"hw:cpu_policy": flavor_policy}), _image(hw_cpu_policy=image_policy))
    assert (error.nova_exception, error.code, error.message) == (
        "ImageCPUPinningForbidden", 403,
        "Image property 'hw_cpu_policy' is not permitted to override CPU pinning policy set against the flavor")


def test_an_image_may_lower_or_set_the_cpu_policy() -> None:
    preference_with_image(_flavor(**{"hw:cpu_policy": "dedicated"}), _image(hw_cpu_policy="shared"))
    preference_with_image(_flavor(), _image(hw_cpu_policy="dedicated"))


def test_thread_policy_conflict() -> None:
    error = _refusal(_flavor(**{"hw:cpu_thread_policy": "isolate"}), _image(hw_cpu_thread_policy="require"))
    assert error.message == ("Image property 'hw_cpu_thread_policy' is not permitted to override CPU thread "
                             "pinning policy set against the flavor")


def test_image_page_size_needs_a_flavor_that_allows_it() -> None:
    assert _refusal(_flavor(), _image(hw_mem_page_size="2MB")).message == "Page size 2MB forbidden against '<empty>'"
    assert _refusal(_flavor(**{"hw:mem_page_size": "small"}), _image(hw_mem_page_size="2MB")).message == (
        "Page size 2MB forbidden against 'small'")
    preference_with_image(_flavor(**{"hw:mem_page_size": "large"}), _image(hw_mem_page_size="2MB"))


def test_min_ram_above_the_flavor_is_refused_and_otherwise_becomes_a_requirement() -> None:
    error = _refusal(_flavor(), _image(min_ram=4096))
    assert (error.nova_exception, error.message) == (
        "FlavorMemoryTooSmall", "Flavor's memory is too small for requested image.")
    spec = preference_with_image(_flavor(), _image(min_ram=1024)).spec
    assert spec["requirements"] == {"memory": {"guest": "1024Mi"}}


def test_memory_encryption_needs_a_uefi_image() -> None:
    error = _refusal(_flavor(**{"hw:mem_encryption": "true"}), _image())
    assert error.message == ("Memory encryption is requested by hw:mem_encryption extra spec in small flavor but "
                             "the image metadata doesn't have the 'hw_firmware_type' property set to 'uefi'")


def test_image_only_properties_fill_the_preference() -> None:
    result = preference_with_image(
        _flavor(**{"hw:vif_multiqueue_enabled": "true"}),
        _image(hw_disk_bus="virtio", hw_vif_model="e1000e", hw_machine_type="q35", hw_architecture="x86_64",
               hw_firmware_type="uefi", os_distro="fedora"))
    assert result.spec == {
        "devices": {"preferredNetworkInterfaceMultiQueue": True, "preferredDiskBus": "virtio",
                    "preferredInterfaceModel": "e1000e"},
        "machine": {"preferredMachineType": "q35"},
        "preferredArchitecture": "amd64",
        "requirements": {"architecture": "amd64"},
        "firmware": {"preferredEfi": {"secureBoot": False}},
    }
    assert result.ignored == ("os_distro",)


def test_image_preference_is_strict_valid_and_admissible(strict_errors: Any) -> None:
    from openkeel_compute.kubevirt.guard import cluster_refusals
    from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt

    flavor = _flavor(**{"hw:mem_encryption": "true", "hw:tpm_version": "2.0", "os:secure_boot": "required"})
    image = _image(min_ram=1024, hw_firmware_type="uefi", hw_disk_bus="virtio", hw_video_model="virtio",
                   hw_architecture="x86_64")
    spec = preference_with_image(flavor, image).spec
    preference = {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachinePreference",
                  "metadata": {"name": "server-1"}, "spec": spec}
    assert strict_errors(preference) == [], spec
    instancetype = flavor_to_kubevirt(flavor).instancetypes[0]["spec"]
    assert cluster_refusals(instancetype, spec) == [], spec
    assert spec["firmware"] == {"preferredEfi": {"secureBoot": False}}, "SEV keeps secure boot off"
