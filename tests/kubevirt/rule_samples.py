"""Sample values for every extra-spec validator, and flavors that carry them (for the rule tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from openkeel_compute.extra_specs import VALIDATORS, Validator
from openkeel_compute.kubevirt.options import MappingOptions

# Options under which every configurable target has a resource to emit.
OPTIONS = MappingOptions(
    vgpu_type_resources={"nvidia-222": "nvidia.com/GRID_A100_4C"},
    pci_alias_resources={"a1": "intel.com/X710_VF"},
    resource_class_resources={"FPGA": "example.com/fpga", "CUSTOM_X": "example.com/x",
                              "PGPU": "example.com/pgpu", "SRIOV_NET_VF": "example.com/vf"},
)

# Values of the free-form validators (a pattern or any string) that Nova accepts.
_STRING_SAMPLES: dict[str, tuple[str, ...]] = {
    "hw:cpu_realtime_mask": ("^0-1", "^0"),
    "hw:cpu_dedicated_mask": ("^0", "0-1"),
    "hw:mem_page_size": ("small", "large", "any", "4", "2048", "1048576", "2MB", "2MiB", "1GB", "1GiB",
                         "16Mb", "8Gb", "2Mb", "2M", "1Gi", "2kB", "4KB", "3MB", "512MB"),
    "hw:numa_cpus.{num}": ("0-1",),
    "hw:pmem": ("SMALL",),
    "pci_passthrough:alias": ("a1:1", "a1:2", "unknown:1"),
}
_ANY_STRING = ("ssd", "s== x")

# Extra specs a key needs beside it for KubeVirt to honour it at all (the supportive context).
CONTEXT: dict[str, dict[str, str]] = {
    "hw:emulator_threads_policy": {"hw:cpu_policy": "dedicated"},
    "hw:cpu_realtime": {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB"},
    "hw:cpu_realtime_mask": {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB", "hw:cpu_realtime": "yes"},
    "hw:numa_nodes": {"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2MB"},
    "hw:mem_encryption_model": {"hw:mem_encryption": "true"},
    "hw:tpm_model": {"hw:tpm_version": "2.0"},
    "hw:tpm_secret_security": {"hw:tpm_version": "2.0"},
    "hw:cpu_dedicated_mask": {"hw:cpu_policy": "mixed"},
}

VCPUS = 4
RAM = 4096


def sample_values(validator: Validator) -> tuple[str, ...]:
    """Values Nova accepts for this validator, covering each enum member and a few integers."""
    if validator.value_type == "bool":
        return ("true", "false")
    if validator.value_type == "int":
        low = validator.minimum if validator.minimum is not None else 0
        values = [low, low + 1, 2, VCPUS]
        if validator.maximum is not None:
            values = [v for v in values if v <= validator.maximum]
        return tuple(str(v) for v in dict.fromkeys(v for v in values if v >= low))
    if validator.enum is not None:
        return validator.enum
    return _STRING_SAMPLES.get(validator.name, _ANY_STRING)


def flavor_with(key: str, value: str | None, flavor_id: str = "sample") -> dict[str, Any]:
    """A flavor carrying key=value (None: only the key's context) in the key's supportive context."""
    context = CONTEXT.get(key, {})
    if key.startswith(("hw:numa_cpus.", "hw:numa_mem.")):
        context = {"hw:numa_nodes": "1"}
    specs = dict(context)
    if value is not None:
        specs[key] = value
    return {"id": flavor_id, "name": flavor_id, "vcpus": VCPUS, "ram": RAM, "disk": 10, "extra_specs": specs}


def samples() -> Iterator[tuple[Validator, str, str]]:
    """(validator, concrete key, value) for every validator and each of its sample values."""
    for validator in VALIDATORS.values():
        key = validator.example_key
        for value in sample_values(validator):
            yield validator, key, value


def sample_flavors() -> Iterator[dict[str, Any]]:
    for index, (_validator, key, value) in enumerate(samples()):
        yield flavor_with(key, value, f"s{index}")
