"""What a KubeVirt v1.9.0 cluster refuses in the objects OpenKeel emits: the admission table.

Each ``AdmissionRule`` is one refusal a field the mapping can emit may trigger: KubeVirt's (or the
Kubernetes API server's) own message, where KubeVirt v1.9.0 raises it (``source``, for developers:
a path and lines at the v1.9.0 tag, or in the apimachinery it vendors), a check over the rendered
objects, and what OpenKeel emits instead. ``guard.py`` runs every row over every object the mapping
and the image path emit; the conflict list (fields a VM may not set beside an instancetype) stays in
``guard.instancetype_conflicts``.

The checks read the objects the way KubeVirt applies them to the VMI: the instancetype's CPU and
memory, the preference's topology, firmware, features and device preferences filling what the VM
leaves empty, then the VMI create admitter and the per-architecture webhooks.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from openkeel_compute.kubevirt.quantity import to_bytes as _to_bytes

to_bytes = functools.lru_cache(maxsize=4096)(_to_bytes)  # the same few memory sizes recur

UINT32_MAX = 2**32 - 1
ANNOTATIONS_LIMIT = 256 * 1024  # bytes of keys plus values, per object
PAGE_BYTES = {"2Mi": 2 * 1024**2, "1Gi": 1024**3}
TOPOLOGIES = ("sockets", "cores", "threads", "spread", "any",
              "preferSockets", "preferCores", "preferThreads", "preferSpread", "preferAny")
SPREAD_ACROSS = ("SocketsCores", "CoresThreads", "SocketsCoresThreads")
DISK_BUSES = ("virtio", "scsi", "sata", "usb")
CDROM_BUSES = ("scsi", "sata", "usb")  # virtio is refused for CD-ROMs, ide everywhere
ARM64_DISK_BUSES = ("virtio", "scsi")
INTERFACE_MODELS = ("e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139", "virtio")
VIDEO_TYPES = {"amd64": ("vga", "cirrus", "virtio", "ramfb", "bochs"), "arm64": ("virtio", "ramfb")}
INPUT_BUSES = ("virtio", "usb")
SOUND_MODELS = ("ich9", "ac97")
# KubeVirt's default emulatedMachines per architecture (a site may configure others).
MACHINE_PATTERNS = {"amd64": ("q35*", "pc-q35*"), "arm64": ("virt*",), "s390x": ("s390-ccw-virtio*",)}

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_TMPL = "spec.template.spec"


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        # type() first: the objects checked are plain dicts, and the ABC check costs ~4x more.
        if type(obj) is not dict and not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


@functools.lru_cache(maxsize=4096)  # the same label and annotation keys recur in every object
def qualified_name_ok(key: str) -> bool:
    """Kubernetes' qualified name: an optional DNS-1123 subdomain prefix and a 1-63 character name."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or _DNS1123_SUBDOMAIN.fullmatch(prefix) is None):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


@functools.lru_cache(maxsize=4096)
def label_value_ok(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def annotations_size(annotations: Mapping[str, str]) -> int:
    """Bytes Kubernetes counts against the annotation limit (UTF-8 keys plus values)."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())


def annotations_over_limit(annotations: Mapping[str, str]) -> bool:
    """True when Kubernetes refuses these annotations for their total size."""
    characters = sum(map(len, annotations)) + sum(map(len, annotations.values()))
    if characters * 4 <= ANNOTATIONS_LIMIT:  # a character is at most four UTF-8 bytes
        return False
    return characters > ANNOTATIONS_LIMIT or annotations_size(annotations) > ANNOTATIONS_LIMIT


class Rendered:
    """The objects of one flavor (and image) as KubeVirt sees them once applied to the VMI."""

    __slots__ = ("_disks", "arch", "bios", "cores", "cpu", "dedicated", "devices", "efi", "guest", "it", "launch",
                 "memory", "metadata", "numa", "page", "pref", "pref_cpu", "pref_devices", "smm", "sockets", "threads",
                 "tmpl", "topology", "vm")

    def __init__(self, instancetype_spec: Mapping[str, Any], preference_spec: Mapping[str, Any] | None = None,
                 vm: Mapping[str, Any] | None = None, metadata: Iterable[Mapping[str, Any]] = ()) -> None:
        it = instancetype_spec
        pref = preference_spec or {}
        self.it, self.pref, self.vm = it, pref, vm or {}
        self.metadata = tuple(metadata)
        self.cpu = it.get("cpu") or {}
        self.memory = it.get("memory") or {}
        guest = self.cpu.get("guest")
        self.guest = guest if type(guest) is int else 0
        self.dedicated = self.cpu.get("dedicatedCPUPlacement") is True
        self.page = _get(self.memory, "hugepages", "pageSize")
        self.numa = _get(self.cpu, "numa", "guestMappingPassthrough")
        self.pref_cpu = pref.get("cpu") or {}
        self.pref_devices = pref.get("devices") or {}
        self.topology = self.pref_cpu.get("preferredCPUTopology")
        self.tmpl = _get(self.vm, "spec", "template", "spec") or {}
        domain = self.tmpl.get("domain") or {}
        self.devices = domain.get("devices") or {}
        self.arch = self.tmpl.get("architecture") or pref.get("preferredArchitecture") or "amd64"
        self.launch = it.get("launchSecurity") or pref.get("preferredLaunchSecurity")
        firmware = _get(domain, "firmware", "bootloader")
        if firmware:
            self.bios, self.efi = "bios" in firmware, firmware.get("efi")
        else:
            pref_fw = pref.get("firmware") or {}
            self.bios = pref_fw.get("preferredUseBios") is True
            self.efi = None if self.bios else pref_fw.get("preferredEfi")
        smm = _get(domain, "features", "smm")
        if smm is None:
            smm = _get(pref, "features", "preferredSmm")
        self.smm = smm is not None and smm.get("enabled", True) is not False
        self.sockets, self.cores, self.threads = self._topology()
        self._disks: list[tuple[str, str]] | None = None

    def _topology(self) -> tuple[int, int, int]:
        """sockets, cores, threads as KubeVirt derives them from the guest vCPUs and the preference."""
        vcpus = self.guest
        if vcpus <= 1:
            return 1, 1, 1
        topology = self.topology or "sockets"
        ratio, across = self.spread()
        if topology in ("cores", "preferCores"):
            return 1, vcpus, 1
        if topology in ("threads", "preferThreads"):
            return 1, 1, vcpus
        if topology in ("spread", "preferSpread") and isinstance(ratio, int) and ratio > 0:
            if across == "SocketsCores":
                return vcpus // ratio, ratio, 1
            if across == "CoresThreads":
                return 1, vcpus // ratio, ratio
            if across == "SocketsCoresThreads":
                return vcpus // 2 // ratio, ratio, 2
        if topology in ("spread", "preferSpread"):
            return 1, 1, 1
        return vcpus, 1, 1

    def spread(self) -> tuple[Any, Any]:
        options = self.pref_cpu.get("spreadOptions") or {}
        ratio = options.get("ratio", self.pref.get("preferSpreadSocketToCoreRatio") or 2)
        return ratio, options.get("across", "SocketsCores")

    def disks(self) -> list[tuple[str, str]]:
        """(device type, bus) of every VM disk, with the preference's bus where the VM sets none."""
        if self._disks is not None:
            return self._disks
        found = []
        for disk in self.devices.get("disks") or ():
            for kind in ("disk", "cdrom", "lun"):
                if kind in disk:
                    bus = (disk[kind] or {}).get("bus")
                    if not bus:
                        preferred = "preferredCdromBus" if kind == "cdrom" else "preferredDiskBus"
                        bus = self.pref_devices.get(preferred)
                    found.append((kind, bus or ""))
        self._disks = found
        return found


class AdmissionRule(NamedTuple):
    """One refusal of KubeVirt v1.9.0 admission that an emitted field could trigger."""

    id: str
    message: str  # KubeVirt's message (format placeholders as KubeVirt fills them)
    source: str  # where KubeVirt v1.9.0 raises it (developer-facing)
    check: Callable[[Rendered], str | None]  # the filled message when the objects are refused, else None
    instead: str  # what OpenKeel emits instead, in the operator's words


def _isolate(r: Rendered) -> str | None:
    if r.cpu.get("isolateEmulatorThread") and not r.dedicated:
        return "IsolateEmulatorThread should be only set in combination with DedicatedCPUPlacement"
    return None


def _realtime_dedicated(r: Rendered) -> str | None:
    if r.cpu.get("realtime") is not None and not r.dedicated:
        return (f"{_TMPL}.domain.cpu.dedicatedCpuPlacement must be set to true when {_TMPL}.domain.cpu.realtime "
                "is used")
    return None


def _realtime_numa(r: Rendered) -> str | None:
    if r.cpu.get("realtime") is not None and r.numa is None:
        return (f"{_TMPL}.domain.cpu.numa.guestMappingPassthrough must be defined when {_TMPL}.domain.cpu.realtime "
                "is used")
    return None


def _numa_dedicated(r: Rendered) -> str | None:
    if r.numa is not None and not r.dedicated:
        return (f"{_TMPL}.domain.cpu.dedicatedCpuPlacement must be set to true when NUMA topology strategy is set "
                f"in {_TMPL}.domain.cpu.numa.guestMappingPassthrough")
    return None


def _numa_hugepages(r: Rendered) -> str | None:
    if r.numa is not None and r.page is None:
        return (f"{_TMPL}.domain.memory.hugepages must be requested when NUMA topology strategy is set in "
                f"{_TMPL}.domain.cpu.numa.guestMappingPassthrough")
    return None


def _dedicated_threads(r: Rendered) -> str | None:
    if r.dedicated and r.threads > 2:
        return (f"Not more than two threads must be provided at {_TMPL}.domain.cpu.threads (got {r.threads}) "
                "when DedicatedCPUPlacement is true")
    return None


def _arm64_threads(r: Rendered) -> str | None:
    if r.dedicated and r.threads > 1 and r.arch == "arm64":
        return (f"threads must not be greater than 1 at {_TMPL}.domain.cpu.threads (got {r.threads}) when "
                f"{_TMPL}.architecture is arm64")
    return None


def _max_sockets(r: Rendered) -> str | None:
    maximum = r.cpu.get("maxSockets")
    if type(maximum) is int and maximum and r.sockets > maximum:
        return "Number of sockets in CPU topology is greater than the maximum sockets allowed"
    return None


def _uint32(r: Rendered) -> str | None:
    spread_ratio = _get(r.pref_cpu, "spreadOptions", "ratio")
    for path, value in (("spec.cpu.guest", r.cpu.get("guest")), ("spec.cpu.maxSockets", r.cpu.get("maxSockets")),
                        ("spec.cpu.spreadOptions.ratio", spread_ratio)):
        if value is not None and (type(value) is not int or not 0 <= value <= UINT32_MAX):
            return f"json: cannot unmarshal number {value} into Go struct field of type uint32 ({path})"
    return None


def _guest_present(r: Rendered) -> str | None:
    if type(r.cpu.get("guest")) is not int or r.guest < 1:
        return "spec.cpu.guest: Required value"
    return None


def _topology_known(r: Rendered) -> str | None:
    topology = r.topology
    if topology is not None and topology not in TOPOLOGIES:
        return f"unknown preferredCPUTopology {topology}"
    return None


def _spread_across(r: Rendered) -> str | None:
    if r.topology in ("spread", "preferSpread"):
        across = r.spread()[1]
        if across not in SPREAD_ACROSS:
            return f"across {across} is not supported"
    return None


def _spread_cores_threads(r: Rendered) -> str | None:
    if r.topology in ("spread", "preferSpread"):
        ratio, across = r.spread()
        if across == "CoresThreads" and ratio != 2:
            return "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads"
    return None


def _spread_divisible(r: Rendered) -> str | None:
    if r.topology not in ("spread", "preferSpread"):
        return None
    ratio, across = r.spread()
    if not isinstance(ratio, int) or ratio < 1:
        return f"spreadOptions.ratio {ratio} is not a positive whole number"
    guest = r.guest
    if across == "SocketsCores" and guest % ratio:
        return (f"{guest} vCPUs provided by the instance type are not divisible by the "
                f"Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio} provided by "
                "the preference")
    if across == "CoresThreads" and guest % ratio:
        return f"{guest} vCPUs provided by the instance type are not divisible by the number of threads per core {ratio}"
    if across == "SocketsCoresThreads" and (guest % 2 or (guest // 2) % ratio):
        return (f"{guest} vCPUs provided by the instance type are not divisible by the number of threads per core "
                f"2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio}")
    return None


def _hugepages_size(r: Rendered) -> str | None:
    if r.page is None:
        return None
    page_bytes = PAGE_BYTES.get(r.page)
    if page_bytes is None:
        return f"{_TMPL}.domain.memory.hugepages.pageSize '{r.page}': OpenKeel emits 2Mi and 1Gi only"
    guest = to_bytes(r.memory["guest"])
    if guest < page_bytes:
        return (f"{_TMPL}.domain.resources.requests.memory '{r.memory['guest']}' must be equal to or larger than "
                f"page size {_TMPL}.domain.memory.hugepages.pageSize '{r.page}'")
    if guest % page_bytes:
        return (f"{_TMPL}.domain.resources.requests.memory '{r.memory['guest']}' is not a multiple of the page size "
                f"{_TMPL}.domain.memory.hugepages.pageSize '{r.page}'")
    return None


def _overcommit_range(r: Rendered) -> str | None:
    overcommit = r.memory.get("overcommitPercent")
    if overcommit is not None and not 0 <= overcommit <= 100:
        return f"spec.memory.overcommitPercent '{overcommit}': must be in range between 0 and 100."
    return None


def _overcommit_hugepages(r: Rendered) -> str | None:
    if r.memory.get("overcommitPercent") and r.page is not None:
        return "spec.memory.overcommitPercent and spec.memory.hugepages should not be requested together."
    return None


def _secure_boot_smm(r: Rendered) -> str | None:
    tdx = r.launch is not None and "tdx" in r.launch
    if r.efi is not None and r.efi.get("secureBoot", True) is not False and not r.smm and not tdx:
        return f"{_TMPL}.domain has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled."
    return None


def _launch_kind(r: Rendered) -> str:
    assert r.launch is not None
    return "SEV" if "sev" in r.launch else "SNP" if "snp" in r.launch else "TDX" if "tdx" in r.launch else ""


def _launch_arch(r: Rendered) -> str | None:
    if r.launch is not None and r.arch not in ("amd64", "s390x"):
        return f"No launchSecurity support for architecture: {r.arch}"
    return None


def _launch_one(r: Rendered) -> str | None:
    if r.launch is not None and r.arch == "amd64" and sum(k in r.launch for k in ("sev", "snp", "tdx")) != 1:
        return "One and only one launchSecurity type can be set"
    return None


def _launch_efi(r: Rendered) -> str | None:
    if r.launch is not None and r.arch == "amd64" and _launch_kind(r) and r.efi is None:
        return f"{_launch_kind(r)} requires OVMF (UEFI)"
    return None


def _launch_secure_boot(r: Rendered) -> str | None:
    if (r.launch is not None and r.arch == "amd64" and ("sev" in r.launch or "snp" in r.launch)
            and r.efi is not None and r.efi.get("secureBoot", True) is not False):
        return f"{_launch_kind(r)} does not work along with SecureBoot"
    return None


def _tdx_smm(r: Rendered) -> str | None:
    if r.launch is not None and r.arch == "amd64" and "tdx" in r.launch and r.smm:
        return "TDX does not work along with SMM"
    return None


def _launch_persistent_efi(r: Rendered) -> str | None:
    if (r.launch is not None and r.arch == "amd64" and ("snp" in r.launch or "tdx" in r.launch)
            and r.efi is not None and r.efi.get("persistent") is True):
        return f"{_launch_kind(r)} does not work along with Persistent EFI variables"
    return None


def _arm64_bios(r: Rendered) -> str | None:
    if r.arch == "arm64" and r.bios:
        return "Arm64 does not support bios boot, please change to uefi boot"
    return None


def _disk_bus_ide(r: Rendered) -> str | None:
    if any(bus == "ide" for _kind, bus in r.disks()):
        return "IDE bus is not supported"
    return None


def _cdrom_bus_virtio(r: Rendered) -> str | None:
    if any(kind == "cdrom" and bus == "virtio" for kind, bus in r.disks()):
        return "Bus type virtio is invalid for CD-ROM device"
    return None


def _disk_bus_known(r: Rendered) -> str | None:
    for index, (kind, bus) in enumerate(r.disks()):
        if bus and bus != "ide" and bus not in DISK_BUSES:
            return (f"{_TMPL}.domain.devices.disks[{index}] is set with an unrecognized bus {bus}, must be one of: "
                    "[virtio scsi sata usb]")
    return None


def _arm64_disk_bus(r: Rendered) -> str | None:
    if r.arch == "arm64" and any(bus not in ("", *ARM64_DISK_BUSES) for _kind, bus in r.disks()):
        return "Arm64 not support this disk bus type, please use virtio or scsi"
    return None


def _interface_model(r: Rendered) -> str | None:
    model = r.pref_devices.get("preferredInterfaceModel")
    if model is not None and model not in INTERFACE_MODELS:
        return f"{_TMPL}.domain.devices.interfaces[0].model has invalid value {model}"
    return None


def _video_type(r: Rendered) -> str | None:
    video = r.pref_devices.get("preferredVideoType") or _get(r.devices, "video", "type")
    allowed = VIDEO_TYPES.get(r.arch)
    if video is not None and allowed is not None and video not in allowed:
        return f"video model '{video}' is not supported on {r.arch} architecture"
    return None


def _input_bus(r: Rendered) -> str | None:
    bus = r.pref_devices.get("preferredInputBus")
    if bus is not None and bus not in INPUT_BUSES:
        return "Input device can have only virtio or usb bus."
    return None


def _input_type(r: Rendered) -> str | None:
    kind = r.pref_devices.get("preferredInputType")
    if kind is not None and kind != "tablet":
        return "Input device can have only tablet type."
    return None


def _sound(r: Rendered) -> str | None:
    sound = r.devices.get("sound")
    if sound is None:
        return None
    model = sound.get("model") or r.pref_devices.get("preferredSoundModel")
    if model and model not in SOUND_MODELS:
        return "Sound device type is not supported. Options: 'ich9' or 'ac97'"
    if not sound.get("name"):
        return "Sound device requires a name field."
    return None


def _arm64_sound(r: Rendered) -> str | None:
    if r.arch == "arm64" and r.devices.get("sound") is not None:
        return "Arm64 not support sound device"
    return None


def _watchdog(r: Rendered) -> str | None:
    watchdog = r.devices.get("watchdog")
    if watchdog is None:
        return None
    if r.arch == "arm64":
        return "Arm64 not support Watchdog device"
    if r.arch == "amd64" and ("i6300esb" not in watchdog or "diag288" in watchdog):
        return "amd64 only supports I6300ESB watchdog device"
    return None


def _machine_type(r: Rendered) -> str | None:
    machine = _get(r.pref, "machine", "preferredMachineType")
    patterns = MACHINE_PATTERNS.get(r.arch)
    if machine is not None and patterns is not None and not any(fnmatch.fnmatchcase(machine, p) for p in patterns):
        return (f"{_TMPL}.domain.machine.type is not supported: {machine} (allowed values: "
                f"[{' '.join(patterns)}])")
    return None


def _affinity_keys(r: Rendered) -> str | None:
    terms = _get(r.tmpl, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                 "nodeSelectorTerms") or ()
    for term in terms:
        for expression in term.get("matchExpressions") or ():
            if not qualified_name_ok(expression["key"]):
                return f"{_TMPL}.affinity...matchExpressions.key: Invalid value: {expression['key']!r}"
            for value in expression.get("values") or ():
                if not label_value_ok(value):
                    return f"{_TMPL}.affinity...matchExpressions.values: Invalid value: {value!r}"
    return None


def _node_selector(r: Rendered) -> str | None:
    selector = r.it.get("nodeSelector") or {}
    for key, value in selector.items():
        if not qualified_name_ok(key) or not label_value_ok(value):
            return f"spec.nodeSelector: Invalid value: {key!r}: {value!r}"
    return None


def _requirements(r: Rendered) -> str | None:
    need_cpu = _get(r.pref, "requirements", "cpu", "guest")
    if need_cpu is not None and r.guest < need_cpu:
        return (f"insufficient CPU resources of {r.guest} vCPU provided by instance type, preference requires "
                f"{need_cpu} vCPU")
    need_memory = _get(r.pref, "requirements", "memory", "guest")
    if need_memory is not None and to_bytes(r.memory["guest"]) < to_bytes(need_memory):
        return (f"insufficient Memory resources of {r.memory['guest']} provided by instance type, preference "
                f"requires {need_memory}")
    return None


def _annotations_total(r: Rendered) -> str | None:
    for meta in r.metadata:
        annotations = meta.get("annotations")
        if annotations and annotations_over_limit(annotations):
            return f"metadata.annotations: Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"
    template_meta = ((r.vm.get("spec") or {}).get("template") or {}).get("metadata")
    if template_meta and annotations_over_limit(template_meta.get("annotations") or {}):
        return f"spec.template.metadata.annotations: Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"
    if "annotations" in r.it and annotations_over_limit(r.it["annotations"] or {}):
        return f"spec.annotations: Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"
    return None


_GOOD_ANNOTATION_KEYS: set[str] = set()  # keys already found valid (OpenKeel's are few and fixed)
_GOOD_LABELS: set[tuple[str, str]] = set()


def _annotation_keys(r: Rendered) -> str | None:
    for meta in r.metadata:
        annotations = meta.get("annotations") or {}
        for key in annotations.keys() - _GOOD_ANNOTATION_KEYS:
            if not qualified_name_ok(key.lower()):
                return f"metadata.annotations: Invalid value: {key!r}"
            if len(_GOOD_ANNOTATION_KEYS) < 4096:
                _GOOD_ANNOTATION_KEYS.add(key)
    return None


def _labels(r: Rendered) -> str | None:
    for meta in r.metadata:
        labels = meta.get("labels") or {}
        for key, value in labels.items() - _GOOD_LABELS:
            if not qualified_name_ok(key) or not label_value_ok(value):
                return f"metadata.labels: Invalid value: {value!r}"
            if len(_GOOD_LABELS) < 4096:
                _GOOD_LABELS.add((key, value))
    return None


@functools.lru_cache(maxsize=4096)
def _name_ok(name: str) -> bool:
    return len(name) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


def _name(r: Rendered) -> str | None:
    for meta in r.metadata:
        name = meta.get("name")
        if name is not None and not _name_ok(name):
            return (f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of lower "
                    "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
    return None


# -- a server's VM: hostname, cloud-init, key pair, disks and volumes, the pod network --------------------
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_MAC = re.compile(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}")
_CLOUD_INIT = ("cloudInitNoCloud", "cloudInitConfigDrive")
CLOUD_INIT_INLINE_MAX = 2048


def _volumes(r: Rendered) -> list[Mapping[str, Any]]:
    return [v for v in r.tmpl.get("volumes") or () if type(v) is dict]


def _hostname(r: Rendered) -> str | None:
    hostname = r.tmpl.get("hostname")
    if hostname and (len(hostname) > 63 or _DNS1123_LABEL.fullmatch(hostname) is None):
        return f"{_TMPL}.hostname does not conform to the kubernetes DNS_LABEL rules : {hostname!r}"
    return None


def _access_credentials(r: Rendered) -> str | None:
    volumes = _volumes(r)
    has = {source: any(source in v for v in volumes) for source in _CLOUD_INIT}
    for idx, cred in enumerate(r.tmpl.get("accessCredentials") or ()):
        method = _get(cred, "sshPublicKey", "propagationMethod") or {}
        for key, source, name in (("noCloud", "cloudInitNoCloud", "noCloud"),
                                  ("configDrive", "cloudInitConfigDrive", "configDrive")):
            if key in method and not has[source]:
                return (f"{_TMPL}.accessCredentials[{idx}] requires a {name} volume to exist when the {name} "
                        "propagationMethod is in use.")
    return None


def _cloud_init_source(r: Rendered) -> str | None:
    for idx, volume in enumerate(_volumes(r)):
        for kind in _CLOUD_INIT:
            source = volume.get(kind)
            if source is None:
                continue
            user = sum(1 for key in ("userData", "userDataBase64") if source.get(key))
            user += 1 if _get(source, "secretRef", "name") else 0
            network = sum(1 for key in ("networkData", "networkDataBase64") if source.get(key))
            network += 1 if _get(source, "networkDataSecretRef", "name") else 0
            if user > 1:
                return f"{_TMPL}.volumes[{idx}].{kind} must have only one userdatasource set."
            if user == 0 and network == 0:
                return (f"{_TMPL}.volumes[{idx}].{kind} must have at least one userdatasource or one "
                        "networkdatasource set.")
    return None


def _cloud_init_inline(r: Rendered) -> str | None:
    for idx, volume in enumerate(_volumes(r)):
        for kind in _CLOUD_INIT:
            inline = (volume.get(kind) or {}).get("userData") or ""
            if len(inline.encode()) > CLOUD_INIT_INLINE_MAX:
                return (f"{_TMPL}.volumes[{idx}].{kind} userdata exceeds {CLOUD_INIT_INLINE_MAX} byte limit. Should "
                        "use UserDataSecretRef for larger data.")
    return None


_VOLUME_SOURCES = frozenset({
    "cloudInitConfigDrive", "cloudInitNoCloud", "configMap", "containerDisk", "dataVolume", "downwardAPI",
    "downwardMetrics", "emptyDisk", "ephemeral", "hostDisk", "memoryDump", "persistentVolumeClaim", "secret",
    "serviceAccount", "sysprep", "containerPath"})


def _volume_one_source(r: Rendered) -> str | None:
    for idx, volume in enumerate(_volumes(r)):
        if len(volume.keys() & _VOLUME_SOURCES) != 1:
            return f"{_TMPL}.volumes[{idx}] must have exactly one source type set"
    return None


def _disks_match_volumes(r: Rendered) -> str | None:
    volumes = {v.get("name") for v in _volumes(r)}
    disks = r.devices.get("disks") or ()
    for idx, disk in enumerate(disks):
        if disk.get("name") not in volumes and disk.get("cdrom") is None:
            return f"{_TMPL}.domain.devices.disks[{idx}].Name '{disk.get('name')}' not found."
    disk_names = {d.get("name") for d in disks} | {f.get("name") for f in r.devices.get("filesystems") or ()}
    for idx, volume in enumerate(_volumes(r)):
        if "memoryDump" not in volume and volume.get("name") not in disk_names:
            return f"{_TMPL}.domain.volumes[{idx}].name '{volume.get('name')}' not found."
    return None


def _data_volume_templates(r: Rendered) -> str | None:
    claimed = set()
    for volume in _volumes(r):
        claimed.add(_get(volume, "dataVolume", "name"))
        claimed.add(_get(volume, "persistentVolumeClaim", "claimName"))
    for idx, template in enumerate(_get(r.vm, "spec", "dataVolumeTemplates") or ()):
        name = _get(template, "metadata", "name")
        if not name:
            return f"'name' field must not be empty for DataVolumeTemplate entry spec.dataVolumeTemplate[{idx}].name."
        if name not in claimed:
            return (f"DataVolumeTemplate entry spec.dataVolumeTemplate[{idx}] must be referenced in the VMI "
                    "template's 'volumes' list")
    return None


def _interfaces_networks(r: Rendered) -> str | None:
    interfaces = r.devices.get("interfaces") or ()
    networks = {n.get("name"): n for n in r.tmpl.get("networks") or ()}
    names = {i.get("name") for i in interfaces}
    for idx, iface in enumerate(interfaces):
        if iface.get("name") not in networks:
            return f"{_TMPL}.domain.devices.interfaces[{idx}].name '{iface.get('name')}' not found."
    for idx, name in enumerate(networks):
        if name not in names:
            return f"{_TMPL}.networks[{idx}].name '{name}' not found."
    for iface in interfaces:
        if "masquerade" in iface and "pod" not in networks[iface.get("name")]:
            return "Masquerade interface only implemented with pod network"
    return None


def _mac_address(r: Rendered) -> str | None:
    for idx, iface in enumerate(r.devices.get("interfaces") or ()):
        mac = iface.get("macAddress")
        if not mac:
            continue
        if _MAC.fullmatch(mac) is None:
            return f"interface {_TMPL}.domain.devices.interfaces[{idx}].name has malformed MAC address ({mac})."
        if "masquerade" in iface and mac == "02:00:00:00:00:00":
            return "The requested MAC address is reserved for the in-pod bridge. Please choose another one."
    return None


_VMI = "pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go"
_AMD64 = "pkg/virt-api/webhooks/amd64.go"
_ARM64 = "pkg/virt-api/webhooks/arm64.go"
_DISKS = "pkg/storage/admitters/disks.go"
_PREF = "pkg/instancetype/preference/webhooks/admitter.go"
_IT_ADMIT = "pkg/instancetype/webhooks/admitter.go"
_OBJECTMETA = "vendor/k8s.io/apimachinery/pkg/api/validation/objectmeta.go"
_TYPES = "staging/src/kubevirt.io/api/instancetype/v1beta1/types.go"

ADMISSION_TABLE: tuple[AdmissionRule, ...] = (
    # -- CPU --------------------------------------------------------------------------------------------
    AdmissionRule("cpu-guest-required", "spec.cpu.guest: Required value", f"{_TYPES}:139", _guest_present,
                  "every instancetype carries the flavor's vcpus (at least 1)."),
    AdmissionRule("cpu-uint32", "json: cannot unmarshal number … of type uint32",
                  f"{_TYPES}:139,169,412", _uint32,
                  "a flavor with more vCPUs than 4294967295 is refused with a message naming vcpus; "
                  "hw:cpu_max_sockets beyond 4294967295 is not applied (none)."),
    AdmissionRule("isolate-emulator-needs-dedicated",
                  "IsolateEmulatorThread should be only set in combination with DedicatedCPUPlacement",
                  f"{_VMI}:706-717", _isolate,
                  "hw:emulator_threads_policy=isolate without hw:cpu_policy=dedicated is not applied (none)."),
    AdmissionRule("realtime-needs-dedicated",
                  "spec.domain.cpu.dedicatedCpuPlacement must be set to true when spec.domain.cpu.realtime is used",
                  f"{_VMI}:1184-1197", _realtime_dedicated,
                  "hw:cpu_realtime without hw:cpu_policy=dedicated is not applied (none)."),
    AdmissionRule("realtime-needs-numa-passthrough",
                  "spec.domain.cpu.numa.guestMappingPassthrough must be defined when spec.domain.cpu.realtime "
                  "is used", f"{_VMI}:1199-1212", _realtime_numa,
                  "realtime CPUs get numa.guestMappingPassthrough when huge pages are requested (partial); "
                  "without huge pages hw:cpu_realtime is not applied (none)."),
    AdmissionRule("numa-needs-dedicated",
                  "spec.domain.cpu.dedicatedCpuPlacement must be set to true when NUMA topology strategy is set "
                  "in spec.domain.cpu.numa.guestMappingPassthrough", f"{_VMI}:734-753", _numa_dedicated,
                  "hw:numa_nodes without dedicated CPUs is not applied (none)."),
    AdmissionRule("numa-needs-hugepages",
                  "spec.domain.memory.hugepages must be requested when NUMA topology strategy is set in "
                  "spec.domain.cpu.numa.guestMappingPassthrough", f"{_VMI}:754-763", _numa_hugepages,
                  "hw:numa_nodes without huge pages is not applied (none)."),
    AdmissionRule("dedicated-max-two-threads",
                  "Not more than two threads must be provided at spec.domain.cpu.threads (got N) when "
                  "DedicatedCPUPlacement is true", f"{_VMI}:791-803", _dedicated_threads,
                  "with dedicated CPUs a flavor's threads per core above 2 become 2 (or 1 when odd), cores "
                  "grow to keep the vCPU count (partial)."),
    AdmissionRule("arm64-dedicated-one-thread",
                  "threads must not be greater than 1 at spec.domain.cpu.threads (got N) when spec.architecture "
                  "is arm64", f"{_VMI}:769-789", _arm64_threads,
                  "an aarch64 image on a flavor with dedicated CPUs gets one thread per core "
                  "(preferredCPUTopology cores)."),
    AdmissionRule("max-sockets-below-topology",
                  "Number of sockets in CPU topology is greater than the maximum sockets allowed",
                  f"{_VMI}:2041-2053", _max_sockets,
                  "hw:cpu_max_sockets below the sockets of the topology is not applied (none)."),
    AdmissionRule("preferred-topology-known", "unknown preferredCPUTopology …", f"{_PREF}:61-79",
                  _topology_known, "only sockets, cores, threads and spread are written."),
    AdmissionRule("spread-across-known", "across … is not supported", f"{_PREF}:89-107", _spread_across,
                  "only SocketsCores, CoresThreads and SocketsCoresThreads are written."),
    AdmissionRule("spread-cores-threads-ratio",
                  "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads",
                  f"{_PREF}:108-115", _spread_cores_threads, "CoresThreads is written with ratio 2 only."),
    AdmissionRule("spread-divisible",
                  "N vCPUs provided by the instance type are not divisible by … ratio … provided by the preference",
                  "pkg/instancetype/preference/validation/cpu.go:57-91", _spread_divisible,
                  "spread is written only when the vCPUs divide evenly; otherwise KubeVirt's default (none)."),
    # -- memory -----------------------------------------------------------------------------------------
    AdmissionRule("hugepages-fit-guest-memory",
                  "spec.domain.resources.requests.memory '…' is not a multiple of the page size "
                  "spec.domain.memory.hugepages.pageSize '…'", f"{_VMI}:1049-1098", _hugepages_size,
                  "hw:mem_page_size is applied only as 2Mi or 1Gi pages dividing the flavor's RAM (else none)."),
    AdmissionRule("overcommit-range", "spec.memory.overcommitPercent '…': must be in range between 0 and 100.",
                  f"{_IT_ADMIT}:51-64", _overcommit_range, "OpenKeel never writes overcommitPercent."),
    AdmissionRule("overcommit-not-with-hugepages",
                  "spec.memory.overcommitPercent and spec.memory.hugepages should not be requested together.",
                  f"{_IT_ADMIT}:66-80", _overcommit_hugepages, "OpenKeel never writes overcommitPercent."),
    # -- firmware and memory encryption -----------------------------------------------------------------
    AdmissionRule("secure-boot-needs-smm",
                  "spec.domain has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled.",
                  f"{_VMI}:1471-1491", _secure_boot_smm,
                  "secure boot is written with preferredSmm, except under TDX; plain UEFI is written with "
                  "secureBoot: false."),
    AdmissionRule("launch-security-architecture", "No launchSecurity support for architecture: arm64",
                  f"{_VMI}:589-610", _launch_arch,
                  "an aarch64 image on a flavor with memory encryption keeps the flavor's x86_64 placement "
                  "(hw_architecture is dropped)."),
    AdmissionRule("launch-security-one-type", "One and only one launchSecurity type can be set",
                  f"{_AMD64}:98-104", _launch_one, "exactly one of sev, snp, tdx is written."),
    AdmissionRule("launch-security-needs-uefi", "SEV requires OVMF (UEFI) / SNP … / TDX requires OVMF (UEFI)",
                  f"{_AMD64}:122-129", _launch_efi,
                  "memory encryption always comes with preferredEfi (secure boot off unless requested and "
                  "allowed)."),
    AdmissionRule("sev-snp-no-secure-boot", "SEV does not work along with SecureBoot / SNP does not work along "
                  "with SecureBoot", f"{_AMD64}:131-139", _launch_secure_boot,
                  "with SEV, SEV-ES or SEV-SNP, os:secure_boot=required is not applied (none) and preferredEfi has "
                  "secureBoot: false."),
    AdmissionRule("tdx-no-smm", "TDX does not work along with SMM", f"{_AMD64}:113-120", _tdx_smm,
                  "with TDX, secure boot is written without preferredSmm (TDX firmware needs none)."),
    AdmissionRule("snp-tdx-no-persistent-efi", "SNP does not work along with Persistent EFI variables",
                  f"{_AMD64}:141-148", _launch_persistent_efi, "OpenKeel never writes preferredEfi.persistent."),
    AdmissionRule("arm64-no-bios", "Arm64 does not support bios boot, please change to uefi boot",
                  f"{_ARM64}:63-74", _arm64_bios,
                  "an aarch64 image's non-UEFI hw_firmware_type is not applied."),
    # -- devices ----------------------------------------------------------------------------------------
    AdmissionRule("disk-bus-ide", "IDE bus is not supported", f"{_DISKS}:179-192", _disk_bus_ide,
                  "image hw_disk_bus=ide (and hw_cdrom_bus=ide) is not applied; disks keep KubeVirt's default bus."),
    AdmissionRule("cdrom-bus-virtio", "Bus type virtio is invalid for CD-ROM device", f"{_DISKS}:193-201",
                  _cdrom_bus_virtio, "image hw_cdrom_bus=virtio is not applied."),
    AdmissionRule("disk-bus-known", "… is set with an unrecognized bus …, must be one of: [virtio scsi sata usb]",
                  f"{_DISKS}:212-219", _disk_bus_known,
                  "image disk and CD-ROM buses outside virtio, scsi, sata, usb (fdc, uml, xen, lxc) are not applied."),
    AdmissionRule("arm64-disk-bus", "Arm64 not support this disk bus type, please use virtio or scsi",
                  f"{_ARM64}:88-120", _arm64_disk_bus,
                  "for an aarch64 image, disk buses other than virtio and scsi are not applied."),
    AdmissionRule("interface-model", "… model has invalid value …", "pkg/network/admitter/netiface.go:139-160",
                  _interface_model, "image hw_vif_model outside e1000, e1000e, igb, ne2k_pci, pcnet, rtl8139, "
                  "virtio is not applied."),
    AdmissionRule("video-type", "video model '…' is not supported on amd64 architecture",
                  f"{_AMD64}:43-58, {_ARM64}:50-61", _video_type,
                  "image hw_video_model outside vga, cirrus, virtio, ramfb, bochs (virtio, ramfb on aarch64) "
                  "is not applied."),
    AdmissionRule("input-bus", "Input device can have only virtio or usb bus.", f"{_VMI}:380-389", _input_bus,
                  "image hw_input_bus outside virtio and usb is not applied."),
    AdmissionRule("input-type", "Input device can have only tablet type.", f"{_VMI}:390-397", _input_type,
                  "only hw_pointer_model=usbtablet becomes an input device (tablet)."),
    AdmissionRule("sound-model", "Sound device type is not supported. Options: 'ich9' or 'ac97'",
                  f"{_VMI}:565-586", _sound, "hw:sound_model other than ich9 and ac97 is not applied (none)."),
    AdmissionRule("arm64-no-sound", "Arm64 not support sound device", f"{_ARM64}:131-140", _arm64_sound,
                  "an aarch64 image is not applied to a flavor whose VM has a sound device "
                  "(hw_architecture is dropped)."),
    AdmissionRule("watchdog-model", "amd64 only supports I6300ESB watchdog device / Arm64 not support Watchdog "
                  "device", f"{_AMD64}:60-77, {_ARM64}:122-130", _watchdog,
                  "the watchdog is always i6300esb; an aarch64 image is not applied to a flavor with a watchdog "
                  "(hw_architecture is dropped)."),
    AdmissionRule("machine-type", "spec.domain.machine.type is not supported: … (allowed values: […])",
                  f"{_VMI}:997-1022", _machine_type,
                  "image hw_machine_type outside KubeVirt's default emulated machines (q35*, pc-q35* on x86_64) "
                  "is not applied."),
    AdmissionRule("preference-requirements", "insufficient CPU/Memory resources of … provided by instance type, "
                  "preference requires …", "pkg/instancetype/preference/requirements/cpu.go:30-60, memory.go:33-60",
                  _requirements, "image min_ram above the flavor's RAM is refused as Nova does (FlavorMemoryTooSmall)."),
    # -- scheduling -------------------------------------------------------------------------------------
    AdmissionRule("affinity-label-syntax", "… matchExpressions[0].key: Invalid value: …",
                  f"{_VMI}:1965-1983", _affinity_keys,
                  "traits whose label key or value Kubernetes refuses are not applied (none)."),
    AdmissionRule("node-selector-label-syntax", "spec.nodeSelector: Invalid value: …",
                  "vendor/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go:113-125 (the virt-launcher pod's nodeSelector)", _node_selector,
                  "traits, aggregates and capabilities whose label key or value Kubernetes refuses are not "
                  "applied (none)."),
    # -- object metadata ----------------------------------------------------------------------------------
    AdmissionRule("annotations-total-size", "metadata.annotations: Too long: may not be more than 262144 bytes",
                  f"{_OBJECTMETA}:44-67", _annotations_total,
                  "when an object's annotations would exceed 256 KiB, the larger of the description and the "
                  "extra-specs copy is left out of the object (none); the catalogue keeps it."),
    AdmissionRule("annotation-key-syntax", "metadata.annotations: Invalid value: …", f"{_OBJECTMETA}:44-51",
                  _annotation_keys, "OpenKeel's annotation keys are fixed and valid."),
    AdmissionRule("label-syntax", "metadata.labels: Invalid value: …",
                  "vendor/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go:113-125", _labels,
                  "OpenKeel's labels are fixed and valid."),
    AdmissionRule("object-name", "metadata.name: Invalid value: …: a lowercase RFC 1123 subdomain …",
                  f"{_OBJECTMETA}:155-190", _name, "object names follow the naming contract (always valid)."),
    # -- a server's VM ----------------------------------------------------------------------------------
    AdmissionRule("hostname-dns-label", f"{_TMPL}.hostname does not conform to the kubernetes DNS_LABEL rules : …",
                  f"{_VMI}:1163-1172,1213-1220", _hostname,
                  "the server's hostname is cut to its first label of at most 63 characters; a hostname that is "
                  "still not a DNS label is left out (the guest takes the server's UUID)."),
    AdmissionRule("access-credential-volume", f"{_TMPL}.accessCredentials[…] requires a noCloud volume to exist "
                  "when the noCloud propagationMethod is in use. / … requires a configDrive volume …",
                  f"{_VMI}:1491-1543", _access_credentials,
                  "the key pair travels through the cloud-init source the server uses (NoCloud or config drive)."),
    AdmissionRule("cloud-init-data-source", f"{_TMPL}.volumes[…].cloudInit… must have at least one userdatasource "
                  "or one networkdatasource set. / … must have only one userdatasource set.",
                  f"{_VMI}:1709-1760,1806-1813", _cloud_init_source,
                  "cloud-init always reads user data from one Secret; a server without user data gets an empty "
                  "cloud-config."),
    AdmissionRule("cloud-init-inline-size", f"{_TMPL}.volumes[…].cloudInit… userdata exceeds 2048 byte limit. "
                  "Should use UserDataSecretRef for larger data.", f"{_VMI}:63-64,1763-1768", _cloud_init_inline,
                  "a server's user data always travels in a Secret, never inline."),
    AdmissionRule("volume-one-source", f"{_TMPL}.volumes[…] must have exactly one source type set",
                  f"{_VMI}:1617-1706", _volume_one_source, "each volume has exactly one source."),
    AdmissionRule("disk-volume-match", f"{_TMPL}.domain.devices.disks[…].Name '…' not found. / "
                  f"{_TMPL}.domain.volumes[…].name '…' not found.", f"{_VMI}:288-316,613-636",
                  _disks_match_volumes, "every disk has its volume and every volume its disk."),
    AdmissionRule("datavolume-template-referenced", "DataVolumeTemplate entry spec.dataVolumeTemplate[…] must be "
                  "referenced in the VMI template's 'volumes' list", "pkg/storage/admitters/data-volume-template.go:74-110",
                  _data_volume_templates, "the root disk's DataVolume is the root volume's source."),
    AdmissionRule("interface-network-match", f"{_TMPL}.domain.devices.interfaces[…].name '…' not found. / "
                  "Masquerade interface only implemented with pod network",
                  "pkg/network/admitter/netiface.go:39-72; pkg/network/admitter/binding.go:82-90", _interfaces_networks,
                  "one interface, masquerade on the pod network, named like its network."),
    AdmissionRule("mac-address", "interface … has malformed MAC address (…). / The requested MAC address is "
                  "reserved for the in-pod bridge. Please choose another one.",
                  "pkg/network/admitter/netiface.go:166-178; pkg/network/admitter/binding.go:91-97", _mac_address,
                  "the interface's MAC is fa:16:3e followed by three bytes of the server UUID's hash."),
)

RULES_BY_ID = {rule.id: rule for rule in ADMISSION_TABLE}
# The rows over object metadata alone: all that can apply to a plain size (see guard.cluster_refusals).
METADATA_RULES = tuple(RULES_BY_ID[i] for i in ("annotations-total-size", "annotation-key-syntax", "label-syntax",
                                                 "object-name"))


# Rows grouped by the fields they read: a group whose fields are all absent cannot refuse anything,
# so admission_refusals skips it (the mapping runs the table for every flavor). Rows not listed read
# fields every object has, and always run.
_GROUPS = {
    "cpu": ("isolate-emulator-needs-dedicated", "realtime-needs-dedicated", "realtime-needs-numa-passthrough",
            "numa-needs-dedicated", "numa-needs-hugepages", "dedicated-max-two-threads", "arm64-dedicated-one-thread"),
    "topology": ("preferred-topology-known", "spread-across-known", "spread-cores-threads-ratio", "spread-divisible"),
    "memory": ("hugepages-fit-guest-memory", "overcommit-range", "overcommit-not-with-hugepages"),
    "firmware": ("secure-boot-needs-smm", "launch-security-architecture", "launch-security-one-type",
                 "launch-security-needs-uefi", "sev-snp-no-secure-boot", "tdx-no-smm", "snp-tdx-no-persistent-efi",
                 "arm64-no-bios"),
    "devices": ("disk-bus-ide", "cdrom-bus-virtio", "disk-bus-known", "arm64-disk-bus", "interface-model",
                "video-type", "input-bus", "input-type", "sound-model", "arm64-no-sound", "watchdog-model",
                "machine-type"),
    "requirements": ("preference-requirements",),
    "scheduling": ("affinity-label-syntax", "node-selector-label-syntax"),
    "server": ("hostname-dns-label", "access-credential-volume", "cloud-init-data-source", "cloud-init-inline-size",
               "volume-one-source", "disk-volume-match", "datavolume-template-referenced", "interface-network-match",
               "mac-address"),
}
_GROUP_OF = {rule_id: group for group, ids in _GROUPS.items() for rule_id in ids}
_CPU_PLAIN = frozenset({"guest", "maxSockets"})
_SERVER_FIELDS = frozenset({"hostname", "accessCredentials", "volumes", "networks"})


def _active_groups(r: Rendered) -> frozenset[str]:
    """The groups whose fields these objects set."""
    active = {""}
    if r.cpu.keys() - _CPU_PLAIN:
        active.add("cpu")
    if r.pref_cpu or "preferSpreadSocketToCoreRatio" in r.pref:
        active.add("topology")
    if len(r.memory) > 1:
        active.add("memory")
    if r.efi is not None or r.bios or r.launch is not None or r.smm or r.arch != "amd64":
        active.add("firmware")
    if (r.pref_devices or "machine" in r.pref or r.devices.keys() - {"disks"} or r.arch != "amd64"
            or any(len(disk.keys() - {"name", "bootOrder", "serial"}) != 1 or (disk.get("disk") or {}).get("bus")
                   or "disk" not in disk for disk in r.devices.get("disks") or ())):
        active.add("devices")
    if "requirements" in r.pref:
        active.add("requirements")
    if "affinity" in r.tmpl or "nodeSelector" in r.it:
        active.add("scheduling")
    if r.tmpl.keys() & _SERVER_FIELDS or "interfaces" in r.devices or "dataVolumeTemplates" in (r.vm.get("spec") or {}):
        active.add("server")
    return frozenset(active)


@functools.lru_cache(maxsize=256)  # at most 2^8 combinations of groups
def _rows_of(active: frozenset[str]) -> tuple[AdmissionRule, ...]:
    return tuple(rule for rule in ADMISSION_TABLE if _GROUP_OF.get(rule.id, "") in active)


def admission_refusals(instancetype_spec: Mapping[str, Any], preference_spec: Mapping[str, Any] | None = None,
                       vm: Mapping[str, Any] | None = None, metadata: Iterable[Mapping[str, Any]] = (),
                       rules: Iterable[AdmissionRule] = ADMISSION_TABLE) -> list[tuple[str, str]]:
    """(rule id, KubeVirt's message) for every row of the table (or of ``rules``) these objects break."""
    rendered = Rendered(instancetype_spec, preference_spec, vm, metadata)
    rows = _rows_of(_active_groups(rendered))
    if rules is not ADMISSION_TABLE:
        wanted = {rule.id for rule in rules}
        rows = tuple(rule for rule in rows if rule.id in wanted)
    found = []
    for rule in rows:
        message = rule.check(rendered)
        if message is not None:
            found.append((rule.id, message))
    return found


class _MetadataView(NamedTuple):
    """What the metadata rows read; building it costs far less than ``Rendered``."""

    metadata: tuple[Mapping[str, Any], ...]
    vm: Mapping[str, Any]
    it: Mapping[str, Any]


def metadata_refusals(metadata: Iterable[Mapping[str, Any]], vm: Mapping[str, Any] | None = None,
                      instancetype_spec: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """The metadata rows alone: all that can refuse a plain size, the mapping's most common object."""
    view = _MetadataView(tuple(metadata), vm or {}, instancetype_spec or {})
    found = []
    for rule in METADATA_RULES:
        message = rule.check(view)  # type: ignore[arg-type]  # these rows read metadata, vm and it only
        if message is not None:
            found.append((rule.id, message))
    return found
