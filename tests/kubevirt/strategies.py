"""Hypothesis strategies for valid flavors as GET /flavors/{id} returns them (plus "access")."""

from __future__ import annotations

import random
import re
from typing import Any

from hypothesis import strategies as st

from openkeel_compute.api import validation
from openkeel_compute.api.schemas.flavors import FLAVOR_ID
from openkeel_compute.kubevirt.options import MappingOptions

PROPERTY_OPTIONS = MappingOptions(
    pci_alias_resources={"a1": "example.com/a1", "nic": "intel.com/vf"},
    vgpu_type_resources={"nvidia-222": "nvidia.com/GRID"},
    resource_class_resources={"PGPU": "nvidia.com/A100", "CUSTOM_FPGA": "xilinx.com/fpga"},
)

# What POST /flavors accepts, by the API's own patterns: the mapping refuses anything else.
_ID = re.compile(FLAVOR_ID["pattern"])
_NAME = re.compile(validation.name_regex())
_DESCRIPTION = re.compile(validation.description_regex())
_INTS = [str(i) for i in range(9)]
_BOOLS = ["true", "false", "yes", "0", "True"]
_UNICODE_CHARS = ("x", "\u00e9", "\u4e2d", "\ufffd")  # Nova refuses descriptions beyond U+FFFD
# Short descriptions here; random_flavor also draws descriptions up to Nova's 65,535 characters.
DESCRIPTIONS = st.none() | st.text(max_size=60).filter(_DESCRIPTION.match)


def _range(low: int, high: int) -> list[str]:
    return [str(i) for i in range(low, high + 1)]


# The values generated for each extra spec (hypothesis samples from them; so does random_flavor).
SPEC_VALUES: dict[str, list[str]] = {
    "hw:cpu_policy": ["dedicated", "shared", "mixed"],
    "hw:cpu_thread_policy": ["prefer", "isolate", "require"],
    "hw:emulator_threads_policy": ["isolate", "share"],
    "hw:cpu_realtime": _BOOLS,
    "hw:cpu_realtime_mask": ["^0", "^0-1", "0", "1-2"],
    "hw:cpu_sockets": _range(1, 8),
    "hw:cpu_cores": _range(1, 8),
    "hw:cpu_threads": _range(1, 4),
    "hw:cpu_max_sockets": [*_range(1, 64), str(2**32 - 1), str(2**32), str(2**63)],
    "hw:numa_nodes": _range(1, 4),
    "hw:numa_cpus.0": ["0-1"],
    "hw:mem_page_size": ["small", "large", "any", "2MB", "1GB", "2048", "4KB", "64KB", "1048576"],
    "hw:mem_encryption": _BOOLS,
    "hw:mem_encryption_model": ["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx"],
    "os:secure_boot": ["required", "disabled"],
    "hw:tpm_version": ["1.2", "2.0"],
    "hw:tpm_model": ["tpm-tis", "tpm-crb"],
    "hw:tpm_secret_security": ["user", "host", "deployment"],
    "hw:serial_port_count": _INTS,
    "hw:sound_model": ["ich9", "ac97", "virtio", "usb"],
    "hw:redirected_usb_ports": _range(0, 15),
    "hw:vif_multiqueue_enabled": _BOOLS,
    "hw:watchdog_action": ["none", "pause", "poweroff", "reset", "disabled"],
    "hw:hide_hypervisor_id": _BOOLS,
    "hide_hypervisor_id": _BOOLS,
    "hw_rng:allowed": _BOOLS,
    "hw:locked_memory": _BOOLS,
    "quota:cpu_quota": ["-1", "0", "1", "50000", "200000"],
    "quota:cpu_period": ["1000", "100000", "1000000"],
    "quota:vif_inbound_average": ["0", "1", "100000"],
    "quota:vif_outbound_average": ["0", "1", "100000"],
    "quota:vif_inbound_peak": _INTS,
    "quota:disk_read_iops_sec": _INTS,
    "quota:cpu_limit": _INTS,
    "trait:HW_CPU_X86_AVX2": ["required", "forbidden"],
    "trait1:CUSTOM_GOLD": ["required", "forbidden"],
    "trait:CUSTOM A": ["required", "forbidden"],
    "aggregate_instance_extra_specs:ssd": ["true", "<in> r1", "s== x", "fast", "a b", "-x"],
    "aggregate_instance_extra_specs:a b": ["true"],
    "capabilities:hypervisor_type": ["QEMU", ">= 2"],
    "capabilities:cpu_info:arch": ["x86_64"],
    "pci_passthrough:alias": ["a1:2", "nic:1", "a1:1,nic:2", "unknown:1"],
    "resources:VGPU": _range(0, 2),
    "resources:PCPU": _range(1, 4),
    "resources1:PGPU": _range(0, 2),
    "resources:CUSTOM_FPGA": _range(0, 2),
    "resources:NET_BW_EGR_KILOBIT_PER_SEC": _INTS,
    "resources:VCPU": _INTS,
    "group_policy": ["isolate", "none"],
    "vmware:hw_version": ["vmx-13"],
    "accel:device_profile": ["fpga-profile"],
    "my-own-key": ["", "x", "\u00e9\u00e9", "yes", "{\"a\": 1}", "k" * 20],
    "hw:not_a_spec": ["x"],
}
EXTRA_SPECS: dict[str, st.SearchStrategy[str]] = {key: st.sampled_from(values) for key, values in SPEC_VALUES.items()}
EXTRA_SPECS["my-own-key"] = st.text(max_size=20)


@st.composite
def extra_specs(draw: st.DrawFn) -> dict[str, str]:
    keys = draw(st.lists(st.sampled_from(sorted(EXTRA_SPECS)), max_size=12, unique=True))
    return {key: draw(EXTRA_SPECS[key]) for key in keys}


@st.composite
def flavors(draw: st.DrawFn, *, private_has_access: bool = True) -> dict[str, Any]:
    """A valid flavor; private flavors get one or more projects when private_has_access."""
    is_public = draw(st.booleans())
    flavor: dict[str, Any] = {
        "id": draw(st.text(alphabet="abcdXYZ0129. _-", min_size=1, max_size=40).filter(_ID.match)),
        "name": draw(st.text(min_size=1, max_size=40).filter(_NAME.search)),
        "description": draw(DESCRIPTIONS),
        "ram": draw(st.sampled_from([512, 1024, 2048, 3000, 4096, 16384]) | st.integers(1, 10**6)),
        "disk": draw(st.integers(0, 2000)),
        "vcpus": draw(st.integers(1, 64) | st.just(2**31 - 1)),
        "swap": draw(st.just("") | st.integers(0, 65536)),
        "OS-FLV-EXT-DATA:ephemeral": draw(st.integers(0, 1000)),
        "OS-FLV-DISABLED:disabled": draw(st.booleans()),
        "os-flavor-access:is_public": is_public,
        "rxtx_factor": draw(st.sampled_from([1.0, 0.5, 2.0, 1.25])),
        "extra_specs": draw(extra_specs()),
    }
    if not is_public:
        projects = st.text(alphabet="abcdef0123456789-_P", min_size=1, max_size=40)
        flavor["access"] = draw(st.lists(projects, min_size=1 if private_has_access else 0, max_size=3,
                                         unique=True))
    return flavor


IMAGE_VALUES: dict[str, list[str]] = {
    "hw_disk_bus": ["virtio", "scsi", "sata", "usb", "ide", "fdc", "lxc", "uml", "xen"],
    "hw_cdrom_bus": ["ide", "sata", "scsi", "virtio", "usb"],
    "hw_vif_model": ["virtio", "e1000", "e1000e", "rtl8139", "vmxnet3", "netfront", "igb"],
    "hw_video_model": ["vga", "cirrus", "virtio", "qxl", "none", "bochs", "gop", "vmvga"],
    "hw_input_bus": ["usb", "virtio"],
    "hw_pointer_model": ["usbtablet"],
    "hw_machine_type": ["q35", "pc-q35-8.2", "pc-i440fx-2.11", "virt", "pc"],
    "hw_firmware_type": ["uefi", "bios"],
    "hw_architecture": ["x86_64", "aarch64", "s390x"],
    "os_secure_boot": ["required", "disabled", "optional"],
    "hw_mem_encryption": ["true", "false"],
    "hw_mem_encryption_model": ["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx"],
    "hw_rng_model": ["virtio"],
    "hw_tpm_version": ["1.2", "2.0"],
    "hw_sound_model": ["ich9", "ac97", "sb16"],
    "hw_vif_multiqueue_enabled": ["true", "false"],
}
IMAGE_PROPERTIES = {key: st.sampled_from(values) for key, values in IMAGE_VALUES.items()}


@st.composite
def images(draw: st.DrawFn) -> dict[str, Any]:
    """A Glance image with a random subset of the properties the image path reads."""
    keys = draw(st.lists(st.sampled_from(sorted(IMAGE_PROPERTIES)), max_size=8, unique=True))
    return {"name": "img", "id": "i1", "min_ram": draw(st.sampled_from([0, 0, 512, 4096])),
            "properties": {key: draw(IMAGE_PROPERTIES[key]) for key in keys}}


# -- a plain seeded generator, for the 10,000-flavor admission property (hypothesis costs ~10x more) ------

_RAMS = [512, 1024, 2048, 3000, 4096, 16384, 1, 1000, 2047, 999_999]
_VCPUS = [*range(1, 65), 2**31 - 1]  # Nova's bound: POST /flavors refuses more


def random_flavor(rng: random.Random) -> dict[str, Any]:
    """A valid flavor drawn from the same values as ``flavors()``."""
    keys = rng.sample(sorted(SPEC_VALUES), rng.randint(0, 12))
    is_public = rng.random() < 0.5
    roll = rng.random()
    description = (None if roll < 0.3 else rng.choice(_UNICODE_CHARS) * rng.randint(60_000, 65_535)
                   if roll > 0.99 else "".join(rng.choice("ab \u00e9\u4e2d\ufffd") for _ in range(rng.randint(0, 60))))
    flavor: dict[str, Any] = {
        "id": "".join(rng.choice("abcdXYZ0129._-") for _ in range(rng.randint(1, 40))),
        "name": "n" + "".join(rng.choice("ab \u00e9") for _ in range(rng.randint(0, 40))) + "n",
        "description": description,
        "ram": rng.choice(_RAMS) if rng.random() < 0.7 else rng.randint(1, 10**6),
        "disk": rng.randint(0, 2000),
        "vcpus": rng.choice(_VCPUS),
        "swap": rng.choice(["", 0, 512, 65536]),
        "OS-FLV-EXT-DATA:ephemeral": rng.randint(0, 1000),
        "OS-FLV-DISABLED:disabled": rng.random() < 0.5,
        "os-flavor-access:is_public": is_public,
        "rxtx_factor": rng.choice([1.0, 0.5, 2.0, 1.25]),
        "extra_specs": {key: rng.choice(SPEC_VALUES[key]) for key in keys},
    }
    if not is_public:
        flavor["access"] = rng.sample(["p1", "project-2", "P" * 255, "abc_def"], rng.randint(1, 3))
    return flavor


def random_image(rng: random.Random) -> dict[str, Any]:
    """A Glance image with a random subset of the image properties of ``images()``."""
    keys = rng.sample(sorted(IMAGE_VALUES), rng.randint(0, 8))
    return {"name": "img", "id": "i1", "min_ram": rng.choice([0, 0, 512, 4096]),
            "properties": {key: rng.choice(IMAGE_VALUES[key]) for key in keys}}
