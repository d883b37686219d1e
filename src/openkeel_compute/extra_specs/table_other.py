"""The hand-written extra specs outside ``hw:``, grouped as Nova registers them.

Allowed values are Nova 34.0.0's; the descriptions are ours. Order inside each group is Nova's.
"""

from __future__ import annotations

from openkeel_compute.extra_specs.model import Parameter, Validator

# Scheduler filters (ComputeCapabilities, AggregateInstanceExtraSpecs) take an operator expression
# such as ">= 4", "s== x86_64", "<in> avx" or "<or> a <or> b", so any string is accepted.
OPERATOR_HINT = "Value: a literal or an operator expression (=, ==, !=, >=, <=, s==, s!=, <in>, <all-in>, <or>)."

ACCEL_VALIDATORS: tuple[Validator, ...] = (
    Validator("accel:device_profile", "accel", "Cyborg device profile whose accelerators the guest gets.",
              "str"),
)

AGGREGATE_VALIDATORS: tuple[Validator, ...] = (
    Validator("aggregate_instance_extra_specs:{key}", "aggregate_instance_extra_specs",
              "Host aggregates must carry metadata {key} satisfying the value "
              f"(AggregateInstanceExtraSpecsFilter). {OPERATOR_HINT}", "str",
              parameters=(Parameter("key", ".+", "Aggregate metadata key to compare.", "ssd"),)),
)

# Plain host attributes. Nova lists 'vcpus_used' in both of its source tuples; a name registers once.
PLAIN_CAPABILITIES = (
    "id", "uuid", "service_id", "host", "vcpus", "memory_mb", "local_gb",
    "vcpus_used", "memory_mb_used", "local_gb_used",
    "hypervisor_type", "hypervisor_version", "hypervisor_hostname",
    "free_ram_mb", "free_disk_gb", "current_workload", "running_vms",
    "disk_available_least", "host_ip", "mapped",
    "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio",
    "total_usable_ram_mb", "total_usable_disk_gb", "disk_mb_used",
    "free_disk_mb", "vcpus_total", "num_instances",
    "num_io_ops", "failed_builds", "aggregates", "cell_uuid", "updated",
)
# Structured host attributes, addressed further with ':'-separated sub-keys.
NESTED_CAPABILITIES = (
    "cpu_info", "metrics", "stats", "numa_topology", "supported_hv_specs", "pci_device_pools",
    "nodename", "pci_stats", "supported_instances", "limits", "instances",
)
CAPABILITY_FILTER = Parameter("filter", r"(:\w+)*", "Optional ':'-separated path into the attribute.", "")

CAPABILITY_VALIDATORS: tuple[Validator, ...] = tuple(
    Validator(f"capabilities:{name}", "capabilities",
              f"Host attribute {name} must satisfy the value (ComputeCapabilitiesFilter). {OPERATOR_HINT}",
              "str")
    for name in PLAIN_CAPABILITIES
) + tuple(
    Validator(f"capabilities:{name}{{filter}}", "capabilities",
              f"Host attribute {name}, or a field inside it, must satisfy the value "
              f"(ComputeCapabilitiesFilter). {OPERATOR_HINT}", "str",
              parameters=(CAPABILITY_FILTER,))
    for name in NESTED_CAPABILITIES
)

HW_RNG_VALIDATORS: tuple[Validator, ...] = (
    Validator("hw_rng:allowed", "hw_rng", "Whether images may configure a random number generator "
              "(on by default since Ussuri).", "bool"),
    Validator("hw_rng:rate_bytes", "hw_rng", "Bytes of host entropy the guest may read per period.", "int",
              minimum=0),
    Validator("hw_rng:rate_period", "hw_rng", "Length of an entropy period in milliseconds.", "int",
              minimum=0),
)

HW_VIDEO_VALIDATORS: tuple[Validator, ...] = (
    Validator("hw_video:ram_max_mb", "hw_video", "Ceiling in MiB for the video RAM an image may request "
              "(hw_video_ram); ignored for vGPUs.", "int", minimum=0),
)

# Keys without a namespace ("null" in Nova's entry points).
BARE_VALIDATORS: tuple[Validator, ...] = (
    Validator("hide_hypervisor_id", None, "Old spelling of hw:hide_hypervisor_id; it clashes with "
              "AggregateInstanceExtraSpecsFilter, use the hw: key.", "bool", deprecated=True),
    Validator("group_policy", None, "Whether numbered resource groups must land on different providers "
              "(isolate) or may share them (none).", "str", enum=("isolate", "none")),
)

OS_VALIDATORS: tuple[Validator, ...] = (
    Validator("os:secure_boot", "os", "Require UEFI secure boot, or leave it off (libvirt).", "str",
              enum=("disabled", "required")),
)

PCI_PASSTHROUGH_VALIDATORS: tuple[Validator, ...] = (
    Validator("pci_passthrough:alias", "pci_passthrough", "PCI devices to pass through, as "
              "ALIAS:COUNT[,ALIAS:COUNT...] with aliases from the host configuration (libvirt).", "str",
              pattern=r"[^:]+:\d+(?:\s*,\s*[^:]+:\d+)*"),
)


def _quota_validators() -> tuple[Validator, ...]:
    validators: list[Validator] = []
    # VMware shares/limits/reservations, one set per resource.
    for key, what, unit in (
        ("cpu", "CPU", "MHz"),
        ("memory", "memory", "MB"),
        ("disk_io", "disk I/O", "IOPS"),
        ("vif", "network interface bandwidth", "Mbps"),
    ):
        validators += [
            Validator(f"quota:{key}_limit", "quota",
                      f"Hard cap on {what} in {unit}; 0 means uncapped (VMware).", "int", minimum=0),
            Validator(f"quota:{key}_reservation", "quota",
                      f"{what} in {unit} guaranteed to the guest (VMware).", "int"),
            Validator(f"quota:{key}_shares_level", "quota",
                      f"Share level for {what}; 'custom' takes the count from quota:{key}_shares_share "
                      "(VMware).", "str", enum=("custom", "high", "normal", "low")),
            Validator(f"quota:{key}_shares_share", "quota",
                      f"Relative {what} shares, used only with quota:{key}_shares_level=custom (VMware).",
                      "int", minimum=0),
        ]
    # libvirt CPU tuning.
    validators += [
        Validator("quota:cpu_shares", "quota", "Relative CPU weight against other guests (libvirt).", "int",
                  minimum=0),
        Validator("quota:cpu_period", "quota", "CPU bandwidth enforcement period in microseconds; 0 means "
                  "unset (libvirt).", "int", minimum=0),
        Validator("quota:cpu_quota", "quota", "CPU time in microseconds allowed per period; negative means "
                  "unlimited (libvirt).", "int"),
    ]
    # libvirt disk I/O tuning.
    for direction in ("read", "write", "total"):
        for metric in ("bytes", "iops"):
            validators.append(
                Validator(f"quota:disk_{direction}_{metric}_sec", "quota",
                          f"Disk {direction} throttle in {metric} per second (libvirt).", "int", minimum=0)
            )
    # libvirt network interface shaping.
    for direction in ("inbound", "outbound"):
        for metric in ("average", "peak", "burst"):
            validators.append(
                Validator(f"quota:vif_{direction}_{metric}", "quota",
                          f"Network {direction} {metric} shaping for the interface (libvirt).", "int",
                          minimum=0)
            )
    return tuple(validators)


QUOTA_VALIDATORS = _quota_validators()

VMWARE_VALIDATORS: tuple[Validator, ...] = (
    Validator("vmware:hw_version", "vmware", "VMware virtual hardware version, to steer guests onto "
              "hosts that support it.", "str"),
    Validator("vmware:storage_policy", "vmware", "VMware storage policy for new guests (ignored "
              "without SPBM).", "str"),
)
