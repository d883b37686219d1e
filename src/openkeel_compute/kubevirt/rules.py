"""The mapping rules as data: one row per flavor field or extra spec (the design's tables 2 and 3).

Each row names the Nova source (``nova/...`` paths, a developer reference never printed), the
KubeVirt target (object and field, as ``extra-specs describe`` prints it) and the fidelity. ``handler`` names the
function of ``mapping.py`` that applies the rule; rows without one only report.

Where this table departs from seed 000 the note starts with "KubeVirt:" and says which KubeVirt rule
wins (see docs/kubevirt-mapping.md). Fidelity counts over Nova's 525 validators: ``fidelity_counts``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
from collections.abc import Iterable, Mapping


class Fidelity(enum.StrEnum):
    """How faithfully KubeVirt reproduces what Nova does with a field or extra spec."""

    EXACT = "exact"
    PARTIAL = "partial"
    APPROXIMATE = "approximate"
    NODE_LEVEL = "node-level"
    NONE = "none"
    NA = "n/a"


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """One row of seed 000 §2/§3."""

    key: str  # the Nova field or extra spec, as the seed writes it
    values: str  # the values Nova allows
    source: str  # where Nova defines it
    target: str  # where it lands in KubeVirt
    fidelity: Fidelity
    note: str
    pattern: str = ""  # regex over concrete extra-spec keys; empty = the key itself
    handler: str = ""  # name of the mapping.py handler applying the rule

    @property
    def is_family(self) -> bool:
        return bool(self.pattern)


E, P, A, N, X, NA = (Fidelity.EXACT, Fidelity.PARTIAL, Fidelity.APPROXIMATE, Fidelity.NODE_LEVEL,
                     Fidelity.NONE, Fidelity.NA)
_HW = "nova/api/validation/extra_specs/hw.py"
_GROUP = r"(?:[a-zA-Z0-9_-]{1,64})?"

# §2: base fields of GET /flavors/{id}.
BASE_FIELD_RULES: tuple[Rule, ...] = (
    Rule("id", "[a-zA-Z0-9. _-], 1-255", "nova/api/openstack/compute/schemas/flavors.py:38-42",
         "metadata.name + annotation openkeel.io/flavor-id", E,
         "Lower-case DNS-1123 label ids are kept (unless they start with fl-); lower-case DNS-1123 "
         "subdomains of at most 60 characters become fl-<id>; others fl-<16 hex of sha1(id)>."),
    Rule("name", "str 1-255", "nova/db/api/models.py:233", "annotation openkeel.io/flavor-name", E,
         "Unique in Nova: the catalogue keeps that check."),
    Rule("description", "str or null", "nova/api/openstack/compute/flavors.py:114-139",
         "annotation openkeel.io/flavor-description", E,
         "The only mutable field; an annotation change creates no new revision. Absent = null."),
    Rule("vcpus", "int >= 1", "nova/api/openstack/compute/views/flavors.py:53", "instancetype spec.cpu.guest", E, ""),
    Rule("ram", "int MiB >= 1", "nova/api/openstack/compute/views/flavors.py:48",
         "instancetype spec.memory.guest '<ram>Mi'", E, "virt-launcher adds its overhead on top, as libvirt does."),
    Rule("disk", "int GiB >= 0", "nova/api/openstack/compute/views/flavors.py:49",
         "VM dataVolumeTemplates[root].spec.storage.resources.requests.storage + annotation openkeel.io/disk", P,
         "No disk in an instancetype. 0 = the image size (the server layer fills it in) or boot from volume."),
    Rule("OS-FLV-EXT-DATA:ephemeral", "int GiB >= 0", "nova/api/openstack/compute/views/flavors.py:51",
         "VM disks + volumes: ephemeral0 emptyDisk.capacity + annotation openkeel.io/ephemeral", P, "One disk; Nova can split it with block device mappings."),
    Rule("swap", "'' or int MiB", "nova/api/openstack/compute/views/flavors.py:50",
         "VM disks + volumes: swap emptyDisk + cloud-init mkswap/swapon + annotation openkeel.io/swap", A, "KubeVirt has no swap device."),
    Rule("os-flavor-access:is_public", "bool", "nova/api/openstack/compute/views/flavors.py:54",
         "kind: Cluster vs namespaced", E, ""),
    Rule("access", "project ids", "nova/objects/flavor.py:72-92", "one namespaced copy per project", E,
         "addTenantAccess / removeTenantAccess = create or delete the copy; annotation openkeel.io/project-id."),
    Rule("OS-FLV-DISABLED:disabled", "bool", "nova/compute/api.py:1131-1132", "annotation openkeel.io/disabled", X,
         "OpenKeel refuses new boots and resizes itself."),
    Rule("rxtx_factor", "float", "nova/api/openstack/compute/views/flavors.py:55",
         "annotation openkeel.io/rxtx-factor", NA, "Removed from the API at 2.102."),
    Rule("vcpu_weight", "int", "nova/objects/flavor.py:221", "none", NA, "Not exposed by the API."),
    Rule("extra_specs", "str -> str", "nova/api/openstack/compute/views/flavors.py:65-66",
         "annotation openkeel.io/extra-specs + the extra-spec rules", E, "Round trip of every key, known or not."),
)

# §3: extra specs. Order matters only for reading; lookups never depend on it (no two rules overlap).
EXTRA_SPEC_RULES: tuple[Rule, ...] = (
    Rule("hw:cpu_policy", "dedicated, shared, mixed", f"{_HW}:65", "instancetype spec.cpu.dedicatedCPUPlacement", P,
         "dedicated -> dedicatedCPUPlacement: true (exact; kubelet static CPU manager); shared -> default; "
         "mixed -> none: KubeVirt cannot mix pinned and floating vCPUs.", handler="cpu_policy"),
    Rule("hw:cpu_dedicated_mask", "pattern", f"{_HW}:131", "none", X, "Only meaningful with hw:cpu_policy=mixed."),
    Rule("hw:cpu_thread_policy", "prefer, isolate, require", f"{_HW}:89", "kubelet CPU manager full-pcpus-only", N,
         "prefer -> default; require -> full-pcpus-only or SMT nodes; isolate -> nodes without SMT."),
    Rule("hw:emulator_threads_policy", "isolate, share", f"{_HW}:110",
         "instancetype spec.cpu.isolateEmulatorThread", P,
         "isolate -> isolateEmulatorThread: true (KubeVirt: only beside dedicatedCPUPlacement); share -> none.",
         handler="emulator_threads"),
    Rule("hw:cpu_realtime", "bool", f"{_HW}:23",
         "instancetype spec.cpu.realtime: {} + spec.cpu.numa.guestMappingPassthrough", P,
         "KubeVirt runs realtime vCPUs only with dedicated CPUs and the guest NUMA layout passed through, "
         "which needs huge pages: with hw:cpu_policy=dedicated and hw:mem_page_size the guest also copies the "
         "host NUMA layout of its pinned CPUs; without huge pages realtime is not applied.", handler="realtime"),
    Rule("hw:cpu_realtime_mask", "pattern", f"{_HW}:35", "instancetype spec.cpu.realtime.mask (+ spec.cpu.numa.guestMappingPassthrough, see hw:cpu_realtime)", E,
         "Applied with hw:cpu_realtime. Nova excludes ('^0-1'), KubeVirt lists in libvirt syntax: '0-<vcpus-1>,<mask>'.", handler="realtime"),
    Rule("hw:cpu_sockets", "int >= 1", f"{_HW}:279", "preference spec.cpu.preferredCPUTopology (+ spreadOptions)", P,
         "The preference picks an axis or a spread ratio, not exact counts.", handler="topology"),
    Rule("hw:cpu_cores", "int >= 1", f"{_HW}:293", "preference spec.cpu.preferredCPUTopology (+ spreadOptions)", P,
         "See hw:cpu_sockets.", handler="topology"),
    Rule("hw:cpu_threads", "int >= 1", f"{_HW}:307", "preference spec.cpu.preferredCPUTopology (+ spreadOptions)", P,
         "See hw:cpu_sockets.", handler="topology"),
    Rule("hw:cpu_max_sockets", "int >= 1", f"{_HW}:321", "instancetype spec.cpu.maxSockets", A,
         "Nova: bound for the topology; KubeVirt: sockets reachable by CPU hotplug.", handler="max_sockets"),
    Rule("hw:cpu_max_cores", "int >= 1", f"{_HW}:337", "none", X, ""),
    Rule("hw:cpu_max_threads", "int >= 1", f"{_HW}:353", "none", X, ""),
    Rule("hw:numa_nodes", "int >= 1", f"{_HW}:182", "instancetype spec.cpu.numa.guestMappingPassthrough: {}", P,
         "Host layout of the pinned CPUs, not N nodes. KubeVirt: needs dedicatedCPUPlacement and hugepages.",
         handler="numa"),
    Rule("hw:numa_cpus.{num}", "pattern", f"{_HW}:197", "none", X, "", pattern=r"hw:numa_cpus\.\d+"),
    Rule("hw:numa_mem.{num}", "int >= 1", f"{_HW}:223", "none", X, "", pattern=r"hw:numa_mem\.\d+"),
    Rule("hw:mem_page_size", "small, large, any, <size>", f"{_HW}:153", "instancetype spec.memory.hugepages.pageSize",
         P, "small/any -> default; large -> the site's large page (approximate); <size> -> 2Mi or 1Gi exact, read "
         "as Nova reads it: digits alone are KiB, otherwise a unit is required (B = bytes, b or bit = bits, "
         "K/M/G/T with an optional i = powers of 1024), so 2MB is 2Mi, 16Mb is 2Mi, 2Mb is 256 KiB (none) and 2M "
         "is refused by Nova at boot (none); other sizes -> none.",
         handler="page_size"),
    Rule("hw:locked_memory", "bool", f"{_HW}:167", "none", X, ""),
    Rule("hw:mem_encryption", "bool", f"{_HW}:399", "instancetype spec.launchSecurity", E,
         "true without a model means AMD SEV, as in Nova. SEV and SNP also set the preference's "
         "preferredEfi.secureBoot: false (see hw:mem_encryption_model).", handler="mem_encryption"),
    Rule("hw:mem_encryption_model", "amd-sev, amd-sev-es, amd-sev-snp, intel-tdx", f"{_HW}:411",
         "instancetype spec.launchSecurity", E,
         "sev: {} / sev.policy.encryptedState / snp: {} / tdx: {}. KubeVirt: SEV and SNP need UEFI without "
         "secure boot, so the preference gets preferredEfi.secureBoot: false.", handler="mem_encryption"),
    Rule("hw:pmem", "pattern", f"{_HW}:429", "none", X, ""),
    Rule("hw:pmu", "bool", f"{_HW}:445", "none", X, ""),
    Rule("hw:serial_port_count", "int >= 0", f"{_HW}:467",
         "preference devices.preferredAutoattachSerialConsole", P,
         "0 -> false; >= 1 -> true (one serial console).", handler="serial_ports"),
    Rule("hw:sound_model", "sb16, es1370, pcspk, ac97, ich6, ich9, usb, virtio", f"{_HW}:578",
         "preference devices.preferredSoundModel + VM devices.sound", P,
         "ich9 and ac97 only; the preference only sets the model of an existing sound device, so the VM gets one.",
         handler="sound"),
    Rule("hw:tpm_model", "tpm-tis, tpm-crb", f"{_HW}:479", "preference devices.preferredTPM: {}", P,
         "KubeVirt emulates one TPM 2.0 model.", handler="tpm"),
    Rule("hw:tpm_version", "1.2, 2.0", f"{_HW}:494", "preference devices.preferredTPM: {}", P,
         "2.0 -> preferredTPM: {}; 1.2 -> none.", handler="tpm"),
    Rule("hw:tpm_secret_security", "user, host, deployment", f"{_HW}:511",
         "preference devices.preferredTPM.persistent", A,
         "Nova chooses who holds the secret; KubeVirt only whether the TPM state persists.", handler="tpm"),
    Rule("hw:usb_model", "none, nec-xhci, qemu-xhci", f"{_HW}:591", "none", X, ""),
    Rule("hw:redirected_usb_ports", "int 0-15", f"{_HW}:604", "VM devices.clientPassthrough: {}", P,
         "KubeVirt enables USB redirection with a fixed number of ports.", handler="usb_redirect"),
    Rule("hw:vif_multiqueue_enabled", "bool", f"{_HW}:385",
         "preference devices.preferredNetworkInterfaceMultiQueue", E, "", handler="multiqueue"),
    Rule("hw:virtio_packed_ring", "bool", f"{_HW}:566", "none", X, ""),
    Rule("hw:viommu_model", "intel, smmuv3, virtio, auto", f"{_HW}:550", "none", X, ""),
    Rule("hw:watchdog_action", "none, pause, poweroff, reset, disabled", f"{_HW}:528",
         "VM devices.watchdog.i6300esb.action", P,
         "poweroff, reset -> same; none -> no watchdog: KubeVirt has no action that does nothing (an i6300esb "
         "without action resets the guest); pause -> no watchdog; disabled -> no watchdog.",
         handler="watchdog"),
    Rule("hw:boot_menu", "bool", f"{_HW}:374", "none", X, ""),
    Rule("hw:hide_hypervisor_id", "bool", f"{_HW}:50", "preference features.preferredKvm.hidden", E, "",
         handler="hide_hypervisor"),
    Rule("hide_hypervisor_id", "bool", "nova/api/validation/extra_specs/null.py:22",
         "preference features.preferredKvm.hidden", E, "Deprecated alias of hw:hide_hypervisor_id.",
         handler="hide_hypervisor"),
    Rule("hw:ephemeral_encryption", "bool", f"{_HW}:621", "StorageClass of the ephemeral volume", N, ""),
    Rule("hw:ephemeral_encryption_format", "plain, luks, luksv2", f"{_HW}:631", "StorageClass of the ephemeral volume",
         N, ""),
    Rule("hw:pci_numa_affinity_policy", "required, preferred, legacy, socket", f"{_HW}:249",
         "kubelet Topology Manager policy", N, ""),
    Rule("hw_rng:allowed", "bool", "nova/api/validation/extra_specs/hw_rng.py:23",
         "preference devices.preferredRng: {}", P,
         "Nova only lets the image ask for an RNG; KubeVirt attaches one.", handler="rng"),
    Rule("hw_rng:rate_bytes", "int >= 0", "nova/api/validation/extra_specs/hw_rng.py:35", "none", X, ""),
    Rule("hw_rng:rate_period", "int >= 0", "nova/api/validation/extra_specs/hw_rng.py:46", "none", X, ""),
    Rule("hw_video:ram_max_mb", "int >= 0", "nova/api/validation/extra_specs/hw_video.py:23", "none", X, ""),
    Rule("os:secure_boot", "disabled, required", "nova/api/validation/extra_specs/os.py:24",
         "preference firmware.preferredEfi.secureBoot", E,
         "required -> preferredEfi {secureBoot: true} + features.preferredSmm: {}; disabled -> secureBoot: false. "
         "KubeVirt: refused beside SEV/SNP, which then wins (secureBoot: false).", handler="secure_boot"),
    Rule("quota:cpu_shares", "int >= 0", "nova/api/validation/extra_specs/quota.py:99",
         "none (cgroup weight follows the pod requests)", X, ""),
    Rule("quota:cpu_period", "int >= 0", "nova/api/validation/extra_specs/quota.py:116", "none", X, ""),
    Rule("quota:cpu_quota", "int", "nova/api/validation/extra_specs/quota.py:131", "none", X,
         "The CPU limit it implies (vcpus x quota / period) would go to VM resources.limits.cpu, but KubeVirt "
         "refuses that field on a VM that references an instancetype, so no object carries it.", handler="cpu_quota"),
    Rule("quota:disk_*_sec", "(family)", "nova/api/validation/extra_specs/quota.py:150-168",
         "StorageClass / CSI QoS", N, "", pattern=r"quota:disk_(?:read|write|total)_(?:bytes|iops)_sec"),
    Rule("quota:vif_*", "(family)", "nova/api/validation/extra_specs/quota.py:170-185",
         "VM template annotations kubernetes.io/ingress-bandwidth, kubernetes.io/egress-bandwidth (the pod's CNI "
         "bandwidth plugin)", A,
         "Pod network only; the average in KB/s becomes '<8 x n>k'; peak and burst have no target.",
         pattern=r"quota:vif_(?:inbound|outbound)_(?:average|peak|burst)", handler="bandwidth"),
    Rule("quota:{cpu,memory,disk_io,vif}_{limit,reservation,shares_level,shares_share}", "(family)",
         "nova/api/validation/extra_specs/quota.py:24-94", "none", NA, "VMware driver only.",
         pattern=r"quota:(?:cpu|memory|disk_io|vif)_(?:limit|reservation|shares_level|shares_share)"),
    Rule("vmware:*", "(family)", "nova/api/validation/extra_specs/vmware.py:20-44", "none", NA, "",
         pattern=r"vmware:.+"),
    Rule("resources{group}:PCPU", "int", "nova/api/validation/extra_specs/resources.py:24-39",
         "instancetype spec.cpu.dedicatedCPUPlacement: true", P,
         "Exact when PCPU = vcpus; a VCPU/PCPU split is 'mixed', which KubeVirt lacks.",
         pattern=rf"resources{_GROUP}:PCPU", handler="pcpu"),
    Rule("resources{group}:VGPU", "int", "nova/api/validation/extra_specs/resources.py:24-39",
         "instancetype spec.gpus[] (deviceName = mediated device resource)", P,
         "Needs the mdev type -> resource name of permittedHostDevices (site option).",
         pattern=rf"resources{_GROUP}:VGPU", handler="vgpu"),
    Rule("resources{group}:MEM_ENCRYPTION_CONTEXT", "int", "nova/api/validation/extra_specs/resources.py:24-39",
         "implied by spec.launchSecurity", P, "",
         pattern=rf"resources{_GROUP}:MEM_ENCRYPTION_CONTEXT"),
    Rule("resources{group}:VCPU, MEMORY_MB, DISK_GB", "(family)", "nova/api/validation/extra_specs/resources.py:24-39",
         "none (overrides the Placement request only)", NA, "",
         pattern=rf"resources{_GROUP}:(?:VCPU|MEMORY_MB|DISK_GB)"),
    Rule("resources{group}:<other standard class>", "(family)", "nova/api/validation/extra_specs/resources.py:24-62",
         "instancetype spec.hostDevices[] (device plugin resource)", P,
         "PGPU, SRIOV_NET_VF, FPGA, CUSTOM_*...: each needs a device plugin resource (site option).",
         pattern=rf"resources{_GROUP}:(?!(?:PCPU|VGPU|MEM_ENCRYPTION_CONTEXT|VCPU|MEMORY_MB|DISK_GB)$)[A-Z0-9_]+",
         handler="resource_class"),
    Rule("trait{group}:<TRAIT>", "required, forbidden", "nova/api/validation/extra_specs/traits.py:24-70",
         "required: instancetype spec.nodeSelector[<trait label>] = 'true'; forbidden: VM nodeAffinity NotIn", P,
         "Node labels the site publishes for each trait (prefix: [kubevirt] trait_label_prefix); an instancetype "
         "has no affinity, so 'forbidden' goes to the VirtualMachine.", pattern=rf"trait{_GROUP}:[A-Z0-9_]+", handler="trait"),
    Rule("group_policy", "isolate, none", "nova/api/validation/extra_specs/null.py:38", "none", NA,
         "Placement granular request policy."),
    Rule("aggregate_instance_extra_specs:{key}", "str", "nova/api/validation/extra_specs/aggregate_instance_extra_specs.py:53",
         "instancetype spec.nodeSelector[<aggregate label><key>] = <value>", P,
         "Plain values only; the filter's operators (s==, <in>, <or>...) are not translated.",
         pattern=r"aggregate_instance_extra_specs:.+", handler="aggregate"),
    Rule("capabilities:*", "(family)", "nova/api/validation/extra_specs/capabilities.py:58-108",
         "instancetype spec.nodeSelector[<capability label><name>]", P,
         "Plain values only; ComputeCapabilitiesFilter operators are not translated.",
         pattern=r"capabilities:.+", handler="capability"),
    Rule("pci_passthrough:alias", "'<alias>:<count>[,...]'", "nova/api/validation/extra_specs/pci_passthrough.py:22",
         "instancetype spec.hostDevices[] (one per device)", P,
         "Each [pci] alias must map to a permittedHostDevices resource (site option).", handler="pci_alias"),
    Rule("accel:device_profile", "str", "nova/api/validation/extra_specs/accel.py:22", "none (Cyborg)", X, ""),
)

UNKNOWN_RULE = Rule("<unknown>", "any", "-", "annotation openkeel.io/extra-specs only", X,
                    "Not one of Nova's extra specs; kept in the annotation so the API round trip stays exact.")

_EXACT: dict[str, Rule] = {r.key: r for r in EXTRA_SPEC_RULES if not r.is_family}
_FAMILIES: tuple[tuple[re.Pattern[str], Rule], ...] = tuple(
    (re.compile(r.pattern), r) for r in EXTRA_SPEC_RULES if r.is_family
)
# The namespace before the first ":" selects the few family rules worth trying.
_FAMILIES_BY_PREFIX: dict[str, tuple[tuple[re.Pattern[str], Rule], ...]] = {}
for _regex, _rule in _FAMILIES:
    _prefix = re.split(r"[:{(\\]", _rule.key, maxsplit=1)[0]
    _FAMILIES_BY_PREFIX[_prefix] = (*_FAMILIES_BY_PREFIX.get(_prefix, ()), (_regex, _rule))
_NAMESPACE = re.compile(r"(trait|resources)[a-zA-Z0-9_-]*")


def _prefix_of(key: str) -> str:
    namespace = key.split(":", 1)[0]
    match = _NAMESPACE.fullmatch(namespace)
    return match.group(1) if match else namespace.split(".", 1)[0]


@functools.lru_cache(maxsize=4096)  # catalogues repeat a few hundred keys; family lookups run regexes
def rule_for_extra_spec(key: str) -> Rule | None:
    """The rule of an extra-spec key (target, fidelity, note), or None when no rule covers it."""
    rule = _EXACT.get(key)
    if rule is not None:
        return rule
    for regex, candidate in _FAMILIES_BY_PREFIX.get(_prefix_of(key), ()):
        if regex.fullmatch(key):
            return candidate
    return None


def rules_matching(key: str) -> list[Rule]:
    """Every rule whose key or pattern matches: a coverage check expects exactly one."""
    found = [r for r in EXTRA_SPEC_RULES if not r.is_family and r.key == key]
    found.extend(r for regex, r in _FAMILIES if regex.fullmatch(key))
    return found


def fidelity_counts(keys: Iterable[str]) -> Mapping[Fidelity, int]:
    """Fidelity histogram over concrete keys (e.g. one example key per Nova validator)."""
    counts = dict.fromkeys(Fidelity, 0)
    for key in keys:
        rule = rule_for_extra_spec(key)
        counts[(rule or UNKNOWN_RULE).fidelity] += 1
    return counts
