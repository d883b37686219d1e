"""Image properties into the preference (seed 000 §4), refusing what Nova refuses with Nova's messages.

Nova compares a flavor's ``hw:<x>`` extra specs with the image's ``hw_<x>`` twins: most must be equal
when both are set, an image may not raise the flavor's CPU policy, and the image's page size needs a
flavor that allows one. The messages below are Nova 34.0.0's exception texts (API contract).
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
from collections.abc import Mapping
from typing import Any

from openkeel_compute.kubevirt.admission import (
    ARM64_DISK_BUSES,
    CDROM_BUSES,
    DISK_BUSES,
    INPUT_BUSES,
    INTERFACE_MODELS,
    MACHINE_PATTERNS,
    VIDEO_TYPES,
    Rendered,
)
from openkeel_compute.kubevirt.flavor import Flavor, parse_flavor
from openkeel_compute.kubevirt.guard import check_vm
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS, MappingOptions

_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})
_FALSE = frozenset({"0", "f", "false", "off", "n", "no"})
_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "s390x": "s390x"}
_INT_PROPERTIES = frozenset({"hw_redirected_usb_ports", "hw_serial_port_count"})
_BOOL_PROPERTIES = frozenset({"hw_vif_multiqueue_enabled", "hw_mem_encryption", "hw_pmu"})
_DEVICE_PROPERTIES = {
    "hw_disk_bus": ("devices", "preferredDiskBus"),
    "hw_cdrom_bus": ("devices", "preferredCdromBus"),
    "hw_vif_model": ("devices", "preferredInterfaceModel"),
    "hw_video_model": ("devices", "preferredVideoType"),
    "hw_input_bus": ("devices", "preferredInputBus"),
    "hw_machine_type": ("machine", "preferredMachineType"),
}
_LAUNCH_SECURITY = {"amd-sev": {"sev": {}}, "amd-sev-es": {"sev": {"policy": {"encryptedState": True}}},
                    "amd-sev-snp": {"snp": {}}, "intel-tdx": {"tdx": {}}}


class ImageRefused(ValueError):
    """Nova refuses this flavor and image together; ``nova_exception`` names Nova's exception class."""

    def __init__(self, nova_exception: str, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.nova_exception = nova_exception
        self.message = message
        self.code = code


@dataclasses.dataclass(frozen=True, slots=True)
class ImagePreference:
    """A per-server preference spec: the flavor's preference with the image properties applied."""

    spec: dict[str, Any]
    ignored: tuple[str, ...]  # image properties with no preference target
    dropped: tuple[tuple[str, str], ...] = ()  # (image property, why KubeVirt would refuse it) not applied


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def image_properties(image: Mapping[str, Any]) -> dict[str, Any]:
    """Glance properties with Nova's field types (ImageMetaProps coerces booleans and integers)."""
    props = dict(image.get("properties") or {})
    for key in _BOOL_PROPERTIES & props.keys():
        props[key] = _bool(props[key])
    for key in _INT_PROPERTIES & props.keys():
        props[key] = int(props[key])
    return props


def _conflict(flavor: Flavor, image_name: Any, prefix: str, key: str, flavor_val: Any, image_val: Any) -> ImageRefused:
    return ImageRefused(
        "FlavorImageConflict",
        f"Flavor {flavor.name} has {prefix}:{key} extra spec explicitly set to {flavor_val}, conflicting with "
        f"image {image_name} which has {prefix}_{key} explicitly set to {image_val}.",
    )


def _unique(flavor: Flavor, image_name: Any, props: Mapping[str, Any], key: str, prefix: str = "hw") -> Any:
    flavor_value = flavor.extra_specs.get(f"{prefix}:{key}")
    image_value = props.get(f"{prefix}_{key}")
    if image_value and flavor_value and image_value != flavor_value:
        raise _conflict(flavor, image_name, prefix, key, flavor_value, image_value)
    return flavor_value or image_value


def check_cpu_policies(flavor: Flavor, props: Mapping[str, Any]) -> None:
    """The image's CPU pinning and thread policies may not override the flavor's (Nova's 403s)."""
    flavor_policy = flavor.extra_specs.get("hw:cpu_policy")
    image_policy = props.get("hw_cpu_policy")
    if (flavor_policy == "mixed" and image_policy == "dedicated") or (
            flavor_policy == "shared" and image_policy in ("mixed", "dedicated")):
        raise ImageRefused("ImageCPUPinningForbidden", "Image property 'hw_cpu_policy' is not permitted to "
                           "override CPU pinning policy set against the flavor", 403)
    flavor_threads = flavor.extra_specs.get("hw:cpu_thread_policy")
    image_threads = props.get("hw_cpu_thread_policy")
    if flavor_threads not in (None, "prefer") and image_threads and image_threads != flavor_threads:
        raise ImageRefused("ImageCPUThreadPolicyForbidden", "Image property 'hw_cpu_thread_policy' is not "
                           "permitted to override CPU thread pinning policy set against the flavor", 403)


def check_page_size(flavor: Flavor, props: Mapping[str, Any]) -> str | None:
    """The image's page size, allowed only when the flavor's hw:mem_page_size is any or large."""
    flavor_request = flavor.extra_specs.get("hw:mem_page_size")
    image_request = props.get("hw_mem_page_size")
    if not flavor_request and image_request:
        raise ImageRefused("MemoryPageSizeForbidden", f"Page size {image_request} forbidden against '<empty>'")
    if image_request and flavor_request not in ("any", "large"):
        raise ImageRefused("MemoryPageSizeForbidden",
                           f"Page size {image_request} forbidden against '{flavor_request}'")
    return image_request if image_request else None


def check_mem_encryption(flavor: Flavor, image: Mapping[str, Any], props: Mapping[str, Any]) -> str | None:
    """The memory encryption model the flavor and image ask for together (None: none), or ImageRefused."""
    flavor_str = flavor.extra_specs.get("hw:mem_encryption")
    flavor_on = _bool(flavor_str) if flavor_str is not None else None
    image_on = props.get("hw_mem_encryption")
    if not flavor_on and not image_on:
        return None
    image_name = image.get("name")
    if flavor_on is not None and image_on is not None and flavor_on != image_on:
        raise ImageRefused("FlavorImageConflict",
                           f"Flavor {flavor.name} has hw:mem_encryption extra spec explicitly set to {flavor_str}, "
                           f"conflicting with image {image_name} which has hw_mem_encryption property explicitly "
                           f"set to {image_on}")
    flavor_model = flavor.extra_specs.get("hw:mem_encryption_model")
    image_model = props.get("hw_mem_encryption_model")
    if flavor_model is not None and image_model is not None and flavor_model != image_model:
        raise ImageRefused("FlavorImageConflict",
                           f"Flavor {flavor.name} has hw:mem_encryption_model extra spec explicitly set to "
                           f"{flavor_model}, conflicting with image {image_name} which has hw_mem_encryption_model "
                           f"property explicitly set to {image_model}")
    requesters = []
    if flavor_on:
        requesters.append(f"hw:mem_encryption extra spec in {flavor.name} flavor")
    if image_on:
        requesters.append(f"hw_mem_encryption property of image {image.get('id', '<no-id>')}")
    if props.get("hw_firmware_type") != "uefi":
        raise ImageRefused("FlavorImageConflict",
                           f"Memory encryption is requested by {' and '.join(requesters)} but the image metadata "
                           "doesn't have the 'hw_firmware_type' property set to 'uefi'")
    return str(image_model or flavor_model or "amd-sev")


def check_boot_rules(flavor: Flavor, image: Mapping[str, Any]) -> None:
    """The image-property rules Nova checks against the flavor before anything else at boot, in its
    order (CPU policies, page size, memory encryption); ImageRefused on the first that fails."""
    props = image_properties(image)
    check_cpu_policies(flavor, props)
    check_page_size(flavor, props)
    check_mem_encryption(flavor, image, props)


def preference_with_image(flavor: Mapping[str, Any] | Flavor, image: Mapping[str, Any],
                          options: MappingOptions = DEFAULT_OPTIONS) -> ImagePreference:
    """The flavor's preference spec with a Glance image's properties applied, or ImageRefused as Nova does.

    ``image`` is a Glance image: ``name``, ``id``, ``min_ram`` (MiB), ``min_disk`` (GiB), ``properties``.
    """
    parsed = flavor if isinstance(flavor, Flavor) else parse_flavor(flavor)
    objects = flavor_to_kubevirt(parsed, options)
    spec = copy.deepcopy(objects.preferences[0]["spec"]) if objects.preferences else {}
    props = image_properties(image)
    image_name = image.get("name")
    min_ram = int(image.get("min_ram") or 0)
    if parsed.ram < min_ram:
        raise ImageRefused("FlavorMemoryTooSmall", "Flavor's memory is too small for requested image.")
    min_disk = int(image.get("min_disk") or 0)
    if parsed.disk and min_disk > parsed.disk:
        raise ImageRefused("FlavorDiskSmallerThanMinDisk",
                           "Flavor's disk is smaller than the minimum size specified in image metadata. Flavor disk "
                           f"is {parsed.disk * 1024**3} bytes, minimum size is {min_disk * 1024**3} bytes.")
    check_cpu_policies(parsed, props)
    check_page_size(parsed, props)
    for key in ("tpm_version", "tpm_model", "sound_model", "usb_model", "redirected_usb_ports"):
        _unique(parsed, image_name, props, key)
    secure_boot = _unique(parsed, image_name, props, "secure_boot", prefix="os")
    model = check_mem_encryption(parsed, image, props)
    if parsed.vcpus >= 2:
        flavor_mq = parsed.extra_specs.get("hw:vif_multiqueue_enabled")
        flavor_mq_bool = _bool(flavor_mq) if flavor_mq is not None else None
        image_mq = props.get("hw_vif_multiqueue_enabled")
        if image_mq is not None and flavor_mq_bool is not None and image_mq != flavor_mq_bool:
            raise _conflict(parsed, image_name, "hw", "vif_multiqueue_enabled", flavor_mq_bool, image_mq)
        if image_mq is not None and flavor_mq_bool is None:
            spec.setdefault("devices", {})["preferredNetworkInterfaceMultiQueue"] = image_mq

    ignored: list[str] = []
    dropped: list[tuple[str, str]] = []
    it_spec = objects.instancetypes[0]["spec"] if objects.instancetypes else {}
    flavor_launch = it_spec.get("launchSecurity")
    if model is not None and flavor_launch is not None:
        # The instancetype's launchSecurity is what the cluster runs; the image cannot change it.
        flavor_model = next(name for name, launch in _LAUNCH_SECURITY.items() if launch == flavor_launch)
        if flavor_model != model:
            reason = (f"the flavor's instance type already sets {flavor_model} memory encryption; the image's "
                      f"{model} is not applied.")
            dropped.append(("hw_mem_encryption_model", reason))
            model = flavor_model
    arch = _ARCHITECTURES.get(props.get("hw_architecture", ""), "")
    if arch == "arm64":
        reason = _arm64_blocker(it_spec, objects.vm, model)
        if reason:
            dropped.append(("hw_architecture", reason))
            arch = ""
    checked_arch = arch or "amd64"
    handled = {"hw_cpu_policy", "hw_cpu_thread_policy", "hw_mem_page_size", "hw_tpm_version", "hw_tpm_model",
               "hw_sound_model", "hw_usb_model", "hw_redirected_usb_ports", "os_secure_boot", "hw_mem_encryption",
               "hw_mem_encryption_model", "hw_vif_multiqueue_enabled"}
    for key, value in props.items():
        target = _DEVICE_PROPERTIES.get(key)
        if target is not None:
            refusal = _device_refusal(key, value, checked_arch)
            if refusal:
                dropped.append((key, refusal))
                continue
            spec.setdefault(target[0], {})[target[1]] = value
        elif key == "hw_pointer_model" and value == "usbtablet":
            spec.setdefault("devices", {})["preferredInputType"] = "tablet"
        elif key == "hw_firmware_type":
            if value == "uefi":
                # KubeVirt's EFI defaults to secure boot (which needs SMM); Nova only enables it on request.
                spec.setdefault("firmware", {}).setdefault("preferredEfi", {"secureBoot": False})
            elif checked_arch == "arm64":
                dropped.append((key, "KubeVirt boots aarch64 guests with UEFI only (no BIOS)."))
            else:
                spec.setdefault("firmware", {})["preferredUseBios"] = True
        elif key == "hw_rng_model" and _bool(parsed.extra_specs.get("hw_rng:allowed", "false")):
            spec.setdefault("devices", {})["preferredRng"] = {}
        elif key == "hw_architecture" and value in _ARCHITECTURES:
            if arch:
                spec["preferredArchitecture"] = arch
                spec.setdefault("requirements", {})["architecture"] = arch
        elif key not in handled:
            ignored.append(key)
    devices = spec.setdefault("devices", {})
    if props.get("hw_tpm_version") == "2.0":
        devices.setdefault("preferredTPM", {})
    if props.get("hw_sound_model") in ("ich9", "ac97"):
        devices["preferredSoundModel"] = props["hw_sound_model"]
    if not devices:
        del spec["devices"]
    if secure_boot == "required" and model not in ("amd-sev", "amd-sev-es", "amd-sev-snp"):
        spec.setdefault("firmware", {})["preferredEfi"] = {"secureBoot": True}
        if model != "intel-tdx":
            spec.setdefault("features", {})["preferredSmm"] = {}
    if model is not None:
        if "launchSecurity" not in it_spec:
            spec["preferredLaunchSecurity"] = copy.deepcopy(_LAUNCH_SECURITY[model])
        if model != "intel-tdx":
            spec.setdefault("firmware", {})["preferredEfi"] = {"secureBoot": False}
        else:
            # KubeVirt refuses SMM with TDX; TDX firmware does secure boot without it.
            features = spec.get("features") or {}
            features.pop("preferredSmm", None)
            if "features" in spec and not features:
                del spec["features"]
    if arch == "arm64" and Rendered(it_spec, spec, objects.vm).threads > 1 and it_spec["cpu"].get(
            "dedicatedCPUPlacement"):
        spec["cpu"] = {"preferredCPUTopology": "cores"}
        reason = "KubeVirt allows one thread per core for dedicated CPUs on aarch64: the topology becomes cores only."
        dropped.append(("hw_architecture", reason))
    if min_ram:
        spec.setdefault("requirements", {})["memory"] = {"guest": f"{min_ram}Mi"}
    check_vm(objects.vm, it_spec, spec)  # a RefusedByKubeVirt here is a mapping bug, never the image's fault
    return ImagePreference(spec, tuple(sorted(ignored)), tuple(dropped))


def _arm64_blocker(it_spec: Mapping[str, Any], vm: Mapping[str, Any], model: str | None) -> str:
    """Why the flavor's objects cannot run on aarch64 under KubeVirt, or '' when they can."""
    devices = vm["spec"]["template"]["spec"]["domain"]["devices"]
    if model is not None or "launchSecurity" in it_spec:
        return "KubeVirt supports memory encryption on x86_64 only; the image's aarch64 architecture is not applied."
    if "watchdog" in devices:
        return "KubeVirt has no watchdog on aarch64; the image's aarch64 architecture is not applied."
    if "sound" in devices:
        return "KubeVirt has no sound device on aarch64; the image's aarch64 architecture is not applied."
    return ""


def _device_refusal(key: str, value: Any, arch: str) -> str:
    """Why KubeVirt would refuse this image device property, or '' when it accepts it."""
    text = str(value)
    if key == "hw_disk_bus":
        allowed: tuple[str, ...] = ARM64_DISK_BUSES if arch == "arm64" else DISK_BUSES
        what = "disk buses"
    elif key == "hw_cdrom_bus":
        allowed = tuple(b for b in CDROM_BUSES if arch != "arm64" or b in ARM64_DISK_BUSES)
        what = "CD-ROM buses"
    elif key == "hw_vif_model":
        allowed, what = INTERFACE_MODELS, "interface models"
    elif key == "hw_video_model":
        allowed, what = VIDEO_TYPES.get(arch, ()), "video models"
        if arch not in VIDEO_TYPES:
            return ""
    elif key == "hw_input_bus":
        allowed, what = INPUT_BUSES, "input buses"
    elif key == "hw_machine_type":
        patterns = MACHINE_PATTERNS.get(arch, ())
        if not patterns or any(fnmatch.fnmatchcase(text, p) for p in patterns):
            return ""
        return (f"KubeVirt's default emulated machines are {', '.join(patterns)}; machine type {text} is not "
                "applied.")
    else:
        return ""
    if text in allowed:
        return ""
    return f"KubeVirt accepts only these {what}: {', '.join(allowed)}; {text} is not applied."
