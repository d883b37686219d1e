"""The ``hw:`` extra specs, in Nova's registration order (the order decides which regex wins).

Allowed values are Nova 34.0.0's; the descriptions are ours.
"""

from __future__ import annotations

from openkeel_compute.extra_specs.model import Parameter, Validator, ValueType

# Nova writes these two CPU-map patterns differently; both spellings are kept because the pattern text
# appears in the refusal message.
REALTIME_MASK_PATTERN = r"(\^)?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*"
CPU_MAP_PATTERN = r"\^?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*"

GUEST_NUMA_NODE = Parameter("num", r"\d+", "Index of the guest NUMA node.", "0")


def _hw(
    name: str,
    description: str,
    value_type: ValueType,
    *,
    enum: tuple[str, ...] | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    pattern: str | None = None,
    parameters: tuple[Parameter, ...] = (),
) -> Validator:
    return Validator(
        name=f"hw:{name}", namespace="hw", description=description, value_type=value_type,
        enum=enum, minimum=minimum, maximum=maximum, pattern=pattern, parameters=parameters,
    )


HW_VALIDATORS: tuple[Validator, ...] = (
    # realtime
    _hw("cpu_realtime", "Give the guest's vCPUs realtime scheduling priority (libvirt).", "bool"),
    _hw("cpu_realtime_mask", "CPU map of the vCPUs to leave out of realtime scheduling (libvirt).", "str",
        pattern=REALTIME_MASK_PATTERN),
    # hypervisor id
    _hw("hide_hypervisor_id", "Hide the hypervisor signature from the guest (libvirt).", "bool"),
    # CPU policy
    _hw("cpu_policy", "How guest vCPUs map onto host CPUs: shared (overcommitted), dedicated (pinned) "
        "or mixed (per-vCPU via the dedicated or realtime mask).", "str",
        enum=("dedicated", "shared", "mixed")),
    _hw("cpu_thread_policy", "Whether hosts with SMT siblings are preferred, required or avoided "
        "for pinned vCPUs (libvirt).", "str", enum=("prefer", "isolate", "require")),
    _hw("emulator_threads_policy", "Where emulator overhead threads run: a shared pool or a core "
        "of their own (libvirt).", "str", enum=("isolate", "share")),
    _hw("cpu_dedicated_mask", "CPU map of the guest vCPUs that are pinned when cpu_policy is mixed "
        "(libvirt).", "str", pattern=CPU_MAP_PATTERN),
    # memory pages
    _hw("mem_page_size", "Guest memory page size: small, large, any, or an explicit size such as "
        "2MB or 1048576 (libvirt).", "str", pattern=r"(large|small|any|\d+([kKMGT]i?)?(b|bit|B)?)"),
    _hw("locked_memory", "Lock guest memory in host RAM so it is never swapped (libvirt).", "bool"),
    # NUMA
    _hw("numa_nodes", "Number of guest NUMA nodes, each backed by a distinct host node (libvirt).",
        "int", minimum=1),
    _hw("numa_cpus.{num}", "CPU map of the guest vCPUs placed on guest NUMA node {num} (libvirt).",
        "str", pattern=CPU_MAP_PATTERN, parameters=(GUEST_NUMA_NODE,)),
    _hw("numa_mem.{num}", "Guest memory in MiB placed on guest NUMA node {num} (libvirt).", "int",
        minimum=1, parameters=(GUEST_NUMA_NODE,)),
    _hw("pci_numa_affinity_policy", "How strictly PCI and SR-IOV devices must share a NUMA node "
        "with the guest's vCPUs (libvirt).", "str", enum=("required", "preferred", "legacy", "socket")),
    # CPU topology
    _hw("cpu_sockets", "Guest CPU sockets (default: one per vCPU) (libvirt).", "int", minimum=1),
    _hw("cpu_cores", "Guest CPU cores per socket (default 1) (libvirt).", "int", minimum=1),
    _hw("cpu_threads", "Guest CPU threads per core (default 1) (libvirt).", "int", minimum=1),
    _hw("cpu_max_sockets", "Upper bound on the sockets an image may ask for (libvirt).", "int", minimum=1),
    _hw("cpu_max_cores", "Upper bound on the cores per socket an image may ask for (libvirt).", "int",
        minimum=1),
    _hw("cpu_max_threads", "Upper bound on the threads per core an image may ask for (libvirt).", "int",
        minimum=1),
    # feature flags
    _hw("boot_menu", "Show a boot menu when the guest starts (libvirt).", "bool"),
    _hw("vif_multiqueue_enabled", "Give virtio-net one queue per vCPU (libvirt; the guest must "
        "support it).", "bool"),
    _hw("mem_encryption", "Encrypt guest memory (libvirt, AMD SEV hosts).", "bool"),
    _hw("mem_encryption_model", "Which CPU technology encrypts guest memory when mem_encryption is on.",
        "str", enum=("amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx")),
    _hw("pmem", "Comma-separated labels of virtual persistent-memory devices from the host "
        "configuration (libvirt).", "str", pattern="([a-zA-Z0-9_]+(,)?)+"),
    _hw("pmu", "Expose a virtual performance monitoring unit; unset leaves it to the hypervisor "
        "(libvirt).", "bool"),
    _hw("serial_port_count", "Number of serial ports in the guest (libvirt).", "int", minimum=0),
    _hw("tpm_model", "Model of the emulated TPM device (libvirt).", "str", enum=("tpm-tis", "tpm-crb")),
    _hw("tpm_version", "TPM version; needed whenever a vTPM is requested (libvirt).", "str",
        enum=("1.2", "2.0")),
    _hw("tpm_secret_security", "Who may read the vTPM secret: the user, the host or the deployment "
        "(libvirt).", "str", enum=("user", "host", "deployment")),
    _hw("watchdog_action", "What the i6300esb watchdog does when the guest hangs (libvirt).", "str",
        enum=("none", "pause", "poweroff", "reset", "disabled")),
    _hw("viommu_model", "Model of the virtual IOMMU.", "str", enum=("intel", "smmuv3", "virtio", "auto")),
    _hw("virtio_packed_ring", "Let the guest negotiate packed virtqueues (libvirt).", "bool"),
    _hw("sound_model", "Model of the emulated sound device; unset means none (libvirt).", "str",
        enum=("sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio")),
    _hw("usb_model", "Model of the USB controller; unset means none (libvirt).", "str",
        enum=("none", "nec-xhci", "qemu-xhci")),
    _hw("redirected_usb_ports", "Number of redirected USB ports, at most 15 (libvirt).", "int",
        minimum=0, maximum=15),
    # ephemeral encryption
    _hw("ephemeral_encryption", "Encrypt the guest's ephemeral disks.", "bool"),
    _hw("ephemeral_encryption_format", "Encryption format of ephemeral disks when "
        "ephemeral_encryption is on.", "str", enum=("plain", "luks", "luksv2")),
)
