"""Hypothesis strategies for valid flavors as GET /flavors/{id} returns them (plus "access")."""

from __future__ import annotations

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
_INT = st.integers(min_value=0, max_value=8).map(str)
_BOOL = st.sampled_from(["true", "false", "yes", "0", "True"])
EXTRA_SPECS: dict[str, st.SearchStrategy[str]] = {
    "hw:cpu_policy": st.sampled_from(["dedicated", "shared", "mixed"]),
    "hw:cpu_thread_policy": st.sampled_from(["prefer", "isolate", "require"]),
    "hw:emulator_threads_policy": st.sampled_from(["isolate", "share"]),
    "hw:cpu_realtime": _BOOL,
    "hw:cpu_realtime_mask": st.sampled_from(["^0", "^0-1", "0", "1-2"]),
    "hw:cpu_sockets": st.integers(1, 8).map(str),
    "hw:cpu_cores": st.integers(1, 8).map(str),
    "hw:cpu_threads": st.integers(1, 4).map(str),
    "hw:cpu_max_sockets": st.integers(1, 64).map(str),
    "hw:numa_nodes": st.integers(1, 4).map(str),
    "hw:numa_cpus.0": st.just("0-1"),
    "hw:mem_page_size": st.sampled_from(["small", "large", "any", "2MB", "1GB", "2048", "4KB", "64KB", "1048576"]),
    "hw:mem_encryption": _BOOL,
    "hw:mem_encryption_model": st.sampled_from(["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx"]),
    "os:secure_boot": st.sampled_from(["required", "disabled"]),
    "hw:tpm_version": st.sampled_from(["1.2", "2.0"]),
    "hw:tpm_model": st.sampled_from(["tpm-tis", "tpm-crb"]),
    "hw:tpm_secret_security": st.sampled_from(["user", "host", "deployment"]),
    "hw:serial_port_count": _INT,
    "hw:sound_model": st.sampled_from(["ich9", "ac97", "virtio", "usb"]),
    "hw:redirected_usb_ports": st.integers(0, 15).map(str),
    "hw:vif_multiqueue_enabled": _BOOL,
    "hw:watchdog_action": st.sampled_from(["none", "pause", "poweroff", "reset", "disabled"]),
    "hw:hide_hypervisor_id": _BOOL,
    "hide_hypervisor_id": _BOOL,
    "hw_rng:allowed": _BOOL,
    "hw:locked_memory": _BOOL,
    "quota:cpu_quota": st.integers(-1, 200000).map(str),
    "quota:cpu_period": st.integers(1000, 1000000).map(str),
    "quota:vif_inbound_average": st.integers(0, 100000).map(str),
    "quota:vif_outbound_average": st.integers(0, 100000).map(str),
    "quota:vif_inbound_peak": _INT,
    "quota:disk_read_iops_sec": _INT,
    "quota:cpu_limit": _INT,
    "trait:HW_CPU_X86_AVX2": st.sampled_from(["required", "forbidden"]),
    "trait1:CUSTOM_GOLD": st.sampled_from(["required", "forbidden"]),
    "aggregate_instance_extra_specs:ssd": st.sampled_from(["true", "<in> r1", "s== x", "fast"]),
    "capabilities:hypervisor_type": st.sampled_from(["QEMU", ">= 2"]),
    "capabilities:cpu_info:arch": st.just("x86_64"),
    "pci_passthrough:alias": st.sampled_from(["a1:2", "nic:1", "a1:1,nic:2", "unknown:1"]),
    "resources:VGPU": st.integers(0, 2).map(str),
    "resources:PCPU": st.integers(1, 4).map(str),
    "resources1:PGPU": st.integers(0, 2).map(str),
    "resources:CUSTOM_FPGA": st.integers(0, 2).map(str),
    "resources:NET_BW_EGR_KILOBIT_PER_SEC": _INT,
    "resources:VCPU": _INT,
    "group_policy": st.sampled_from(["isolate", "none"]),
    "vmware:hw_version": st.just("vmx-13"),
    "accel:device_profile": st.just("fpga-profile"),
    "my-own-key": st.text(max_size=20),
    "hw:not_a_spec": st.just("x"),
}


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
        "description": draw(st.none() | st.text(max_size=60).filter(_DESCRIPTION.match)),
        "ram": draw(st.sampled_from([512, 1024, 2048, 3000, 4096, 16384]) | st.integers(1, 10**6)),
        "disk": draw(st.integers(0, 2000)),
        "vcpus": draw(st.integers(1, 64)),
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
