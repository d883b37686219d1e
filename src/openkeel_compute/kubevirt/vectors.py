"""The six reference flavors of seed 000 §6, built from its descriptions (inputs only).

The complete expected objects live in tests/kubevirt/test_vectors.py; ``openkeel-compute flavor
convert --vectors`` prints what the mapping makes of these inputs with ``VECTOR_OPTIONS``.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.kubevirt.options import MappingOptions

# Vector 5 needs a site that maps its vGPU type and PCI alias to device plugin resources.
VECTOR_OPTIONS = MappingOptions(
    vgpu_type_resources={"nvidia-222": "nvidia.com/GRID_A100_4C"},
    pci_alias_resources={"nic-x710": "intel.com/X710_VF"},
)


def _flavor(flavor_id: str, name: str, vcpus: int, ram: int, disk: int, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": flavor_id, "name": name, "description": None, "ram": ram, "disk": disk, "vcpus": vcpus,
        "swap": "", "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False,
        "os-flavor-access:is_public": True, "rxtx_factor": 1.0, "extra_specs": {},
    }
    body.update(extra)
    return body


VECTORS: dict[str, dict[str, Any]] = {
    "1-m1.small": _flavor("2", "m1.small", 1, 2048, 20),
    "2-private-ephemeral-swap": _flavor(
        "6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c", "private.scratch", 2, 4096, 0,
        swap=4096, **{"OS-FLV-EXT-DATA:ephemeral": 100, "os-flavor-access:is_public": False,
                      "access": ["proj-a", "proj-b"], "extra_specs": {"hw:vif_multiqueue_enabled": "true"}},
    ),
    "3-nfv": _flavor("nfv-8", "nfv.realtime", 8, 16384, 40, extra_specs={
        "hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require", "hw:emulator_threads_policy": "isolate",
        "hw:mem_page_size": "1GB", "hw:numa_nodes": "1", "hw:cpu_realtime": "yes",
        "hw:cpu_realtime_mask": "^0-1", "hw:pci_numa_affinity_policy": "required",
    }),
    "4-confidential": _flavor("conf-4", "confidential.snp", 4, 8192, 40, extra_specs={
        "hw:mem_encryption": "true", "hw:mem_encryption_model": "amd-sev-snp", "os:secure_boot": "required",
        "hw:tpm_version": "2.0", "hw:tpm_model": "tpm-crb", "hw:hide_hypervisor_id": "true",
    }),
    "5-gpu-pci-traits": _flavor("gpu-8", "gpu.a100", 8, 32768, 100, extra_specs={
        "resources:VGPU": "1", "pci_passthrough:alias": "nic-x710:2",
        "trait:HW_CPU_X86_AVX512F": "required", "trait:HW_CPU_HYPERTHREADING": "forbidden",
        "aggregate_instance_extra_specs:ssd": "true", "aggregate_instance_extra_specs:region": "<in> r1",
    }),
    "6-qos-devices": _flavor("qos-2", "qos.devices", 2, 4096, 20, extra_specs={
        "hw:cpu_sockets": "2", "hw:serial_port_count": "1", "hw:watchdog_action": "reset",
        "quota:cpu_quota": "50000", "quota:cpu_period": "100000", "quota:vif_inbound_average": "10240",
        "quota:disk_read_iops_sec": "500", "hw:sound_model": "virtio", "hw:locked_memory": "true",
        "my-own-key": "kept",
    }),
}
