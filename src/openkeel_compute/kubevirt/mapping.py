"""Flavor -> KubeVirt objects, following the rows of ``rules.py`` (seed 000 §1, §2, §3, §5).

``flavor_to_kubevirt`` is pure: a flavor dict and site options in, plain dicts out. The hot path is a
dict lookup per extra spec plus one handler per rule group; cross-key constraints that KubeVirt
enforces (dedicated CPUs before emulator isolation, realtime or NUMA; page sizes that divide the
guest memory; UEFI without secure boot under SEV/SNP) are settled here, so no emitted object is one a
cluster would refuse (``guard.py`` re-checks it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from oslo_utils import strutils

from openkeel_compute.kubevirt.admission import (
    ANNOTATIONS_LIMIT,
    UINT32_MAX,
    annotations_size,
    qualified_name_ok,
)
from openkeel_compute.kubevirt.flavor import Flavor, FlavorCheck, InvalidFlavor, parse_flavor
from openkeel_compute.kubevirt.guard import check_vm
from openkeel_compute.kubevirt.names import kubernetes_name
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS, MappingOptions
from openkeel_compute.kubevirt.rules import (
    BASE_FIELD_RULES,
    UNKNOWN_RULE,
    Fidelity,
    Rule,
    rule_for_extra_spec,
)

INSTANCETYPE_API = "instancetype.kubevirt.io/v1beta1"
VM_API = "kubevirt.io/v1"
CLUSTER_INSTANCETYPE = "VirtualMachineClusterInstancetype"
INSTANCETYPE = "VirtualMachineInstancetype"
CLUSTER_PREFERENCE = "VirtualMachineClusterPreference"
PREFERENCE = "VirtualMachinePreference"

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "openkeel"
ANN_ID = "openkeel.io/flavor-id"
ANN_NAME = "openkeel.io/flavor-name"
ANN_DESCRIPTION = "openkeel.io/flavor-description"
ANN_EXTRA_SPECS = "openkeel.io/extra-specs"
ANN_LEFT_OUT = "openkeel.io/left-out"  # which of the above did not fit Kubernetes' annotation limit
ANN_DISABLED = "openkeel.io/disabled"
ANN_DISK = "openkeel.io/disk"
ANN_EPHEMERAL = "openkeel.io/ephemeral"
ANN_SWAP = "openkeel.io/swap"
ANN_RXTX = "openkeel.io/rxtx-factor"
ANN_PROJECT = "openkeel.io/project-id"

ROOT_DISK = "root"
SWAP_DISK = "swap"
CLOUD_INIT_DISK = "cloudinitdisk"
SWAP_DEVICE = "/dev/disk/by-id/virtio-swap"
SWAP_USER_DATA = (
    "#cloud-config\n"
    "bootcmd:\n"
    f"  - [mkswap, {SWAP_DEVICE}]\n"
    f"  - [swapon, {SWAP_DEVICE}]\n"
)

_BASE_RULES = {rule.key: rule for rule in BASE_FIELD_RULES}
_encode_specs = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})
_FALSE = frozenset({"0", "f", "false", "off", "n", "no"})
_KUBEVIRT_PAGES = {2048: "2Mi", 1048576: "1Gi"}
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_FILTER_OPERATORS = ("=", "==", "!=", ">=", "<=", "s==", "s!=", "s>=", "s>", "s<=", "s<", "<in>", "<all-in>", "<or>")
_GROUPED_KEY = re.compile(r"(trait|resources)([a-zA-Z0-9_-]*):(.+)")
_PCI_ALIAS = re.compile(r"([^:,]+)(?::(\d+))?")


class ReportEntry(NamedTuple):
    """What happened to one field or extra spec of one flavor."""

    key: str
    value: str
    fidelity: Fidelity
    target: str
    note: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "fidelity": str(self.fidelity),
                "target": self.target, "note": self.note}


class FlavorObjects(NamedTuple):
    """Everything one flavor becomes."""

    flavor: Flavor
    name: str  # Kubernetes name of the instancetype and preference
    instancetypes: tuple[dict[str, Any], ...]  # one cluster object, or one per project namespace
    preferences: tuple[dict[str, Any], ...]  # same names, kinds and namespaces
    vm: dict[str, Any]  # VirtualMachine fragment: what the server layer completes
    report: tuple[ReportEntry, ...]

    @property
    def untranslated(self) -> tuple[ReportEntry, ...]:
        """Report entries KubeVirt does not reproduce exactly."""
        return tuple(e for e in self.report if e.fidelity is not Fidelity.EXACT)

    def documents(self) -> list[dict[str, Any]]:
        """The objects to apply, instancetype before preference, namespace by namespace."""
        docs: list[dict[str, Any]] = []
        for instancetype, preference in zip(self.instancetypes, self.preferences, strict=True):
            docs.append(instancetype)
            docs.append(preference)
        return docs


class _Build:
    """Mutable state while one flavor is converted."""

    __slots__ = ("cpu", "dedicated", "devices", "flavor", "launch", "memory", "not_in", "options", "page_kib",
                 "pod_annotations", "pref", "report", "sockets", "spec")

    def __init__(self, flavor: Flavor, options: MappingOptions) -> None:
        self.flavor = flavor
        self.options = options
        self.report: list[ReportEntry] = []
        self.cpu: dict[str, Any] = {"guest": flavor.vcpus}
        self.memory: dict[str, Any] = {"guest": f"{flavor.ram}Mi"}
        self.spec: dict[str, Any] = {}
        self.pref: dict[str, dict[str, Any]] = {}
        self.devices: dict[str, Any] = {}
        self.not_in: dict[str, None] = {}
        self.pod_annotations: dict[str, str] = {}
        self.dedicated = False
        self.launch = ""
        self.page_kib = 0
        self.sockets = flavor.vcpus

    def note(self, key: str, value: str, fidelity: Fidelity, rule: Rule, note: str = "") -> None:
        self.report.append(ReportEntry(key, value, fidelity, rule.target, note or rule.note))

    def pref_section(self, name: str) -> dict[str, Any]:
        section = self.pref.get(name)
        if section is None:
            section = self.pref[name] = {}
        return section

    def node_selector(self) -> dict[str, str]:
        selector: dict[str, str] = self.spec.setdefault("nodeSelector", {})
        return selector


Item = tuple[str, str, Rule]


def _bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise InvalidFlavor(key, f"{value!r} is not a valid boolean-like value")


def _int(key: str, value: str, minimum: int = 0) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidFlavor(key, f"{value!r} is not a valid integer value") from None
    if number < minimum:
        raise InvalidFlavor(key, f"{value!r} is less than the min value of '{minimum}'")
    return number


def _enum(key: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidFlavor(key, f"{value!r} is not one of: {', '.join(allowed)}")
    return value


# -- CPU ----------------------------------------------------------------------------------------------


def _cpu_policy(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        policy = _enum(key, value, ("dedicated", "shared", "mixed"))
        if policy == "dedicated":
            b.dedicated = True
            b.cpu["dedicatedCPUPlacement"] = True
            b.note(key, value, Fidelity.EXACT, rule, "dedicatedCPUPlacement: true; nodes need the static CPU manager.")
        elif policy == "shared":
            b.note(key, value, Fidelity.EXACT, rule, "shared CPUs are KubeVirt's default.")
        else:
            b.note(key, value, Fidelity.NONE, rule, "KubeVirt cannot mix pinned and floating vCPUs.")


def _pcpu(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        count = _int(key, value)
        if count == b.flavor.vcpus and b.flavor.extra_specs.get("hw:cpu_policy", "dedicated") == "dedicated":
            b.dedicated = True
            b.cpu["dedicatedCPUPlacement"] = True
            b.note(key, value, Fidelity.EXACT, rule, "every vCPU dedicated: dedicatedCPUPlacement: true.")
        else:
            b.note(key, value, Fidelity.NONE, rule,
                   f"{count} dedicated of {b.flavor.vcpus} vCPUs is Nova's 'mixed' policy, which KubeVirt lacks.")


def _emulator_threads(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        if _enum(key, value, ("isolate", "share")) == "share":
            b.note(key, value, Fidelity.NONE, rule, "Nova's cpu_shared_set has no KubeVirt equivalent.")
        elif b.dedicated:
            b.cpu["isolateEmulatorThread"] = True
            b.note(key, value, Fidelity.EXACT, rule, "isolateEmulatorThread: true (one more dedicated CPU).")
        else:
            b.note(key, value, Fidelity.NONE, rule,
                   "KubeVirt refuses isolateEmulatorThread without dedicatedCPUPlacement (hw:cpu_policy=dedicated).")


def _realtime(b: _Build, items: list[Item]) -> None:
    values = {key: (value, rule) for key, value, rule in items}
    enabled = "hw:cpu_realtime" in values and _bool("hw:cpu_realtime", values["hw:cpu_realtime"][0])
    if "hw:cpu_realtime" in values:
        value, rule = values["hw:cpu_realtime"]
        if not enabled:
            b.note("hw:cpu_realtime", value, Fidelity.EXACT, rule, "no realtime: KubeVirt's default.")
        elif b.dedicated and "numa" in b.cpu:
            b.cpu["realtime"] = {}
            b.note("hw:cpu_realtime", value, Fidelity.EXACT, rule, "realtime: {}.")
        elif b.dedicated and b.page_kib:
            b.cpu["realtime"] = {}
            b.cpu["numa"] = {"guestMappingPassthrough": {}}
            b.note("hw:cpu_realtime", value, Fidelity.PARTIAL, rule,
                   "realtime: {} with numa.guestMappingPassthrough, which KubeVirt requires for realtime vCPUs; "
                   "the guest copies the host NUMA layout of its pinned CPUs.")
        elif b.dedicated:
            b.note("hw:cpu_realtime", value, Fidelity.NONE, rule,
                   "KubeVirt refuses realtime without numa.guestMappingPassthrough, which needs huge pages "
                   "(hw:mem_page_size); not applied.")
        else:
            b.note("hw:cpu_realtime", value, Fidelity.NONE, rule,
                   "KubeVirt refuses realtime without dedicatedCPUPlacement; Nova needs hw:cpu_policy=dedicated too.")
    if "hw:cpu_realtime_mask" in values:
        mask, rule = values["hw:cpu_realtime_mask"]
        if enabled and "realtime" in b.cpu:
            stripped = mask.strip()
            kube_mask = f"0-{b.flavor.vcpus - 1},{stripped}" if stripped.startswith("^") else stripped
            b.cpu["realtime"] = {"mask": kube_mask}
            b.note("hw:cpu_realtime_mask", mask, Fidelity.EXACT, rule, f"realtime.mask: {kube_mask}.")
        else:
            b.note("hw:cpu_realtime_mask", mask, Fidelity.NONE, rule, "no realtime vCPUs to mask.")


def _nova_page_kib(value: str) -> float | None:
    """The page size Nova asks for, in KiB, read as Nova reads it; None when Nova refuses it at boot.

    Digits alone are KiB. Anything else goes through oslo.utils' IEC reading, as Nova's does: a unit
    suffix is required (b or bit = bits, B = bytes), K/M/G/T with an optional i are powers of 1024,
    a lower-case k is refused, and bits are rounded up to whole bytes.
    """
    if value.isdigit():
        try:
            return int(value)
        except ValueError:  # other scripts' digits
            return None
    try:
        return strutils.string_to_bytes(value, return_int=True) / 1024
    except ValueError:
        return None


def _page_size(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        if value in ("small", "any"):
            fidelity = Fidelity.EXACT if value == "small" else Fidelity.APPROXIMATE
            b.note(key, value, fidelity, rule, "small pages: KubeVirt's default.")
            continue
        approximate = value == "large"
        if approximate:
            page = b.options.large_page_size
            kib: float | None = {v: k for k, v in _KUBEVIRT_PAGES.items()}.get(page, 0)
        else:
            kib = _nova_page_kib(value)
            if kib is None:
                b.note(key, value, Fidelity.NONE, rule,
                       f"Nova refuses to boot with it: Invalid memory page size '{value}'.")
                continue
            if kib == 4:
                b.note(key, value, Fidelity.EXACT, rule, "4 KiB pages: KubeVirt's default.")
                continue
            page = _KUBEVIRT_PAGES.get(int(kib), "") if kib == int(kib) else ""
        ram_kib = b.flavor.ram * 1024
        if not page or not kib:
            shown = f"{kib:g} KiB" if kib else "this size"
            b.note(key, value, Fidelity.NONE, rule, f"Nova asks for {shown} pages; KubeVirt supports 2Mi and 1Gi only.")
        elif ram_kib % kib:
            b.note(key, value, Fidelity.NONE, rule,
                   f"KubeVirt refuses {b.flavor.ram}Mi of guest memory: not a multiple of the {page} page size.")
        else:
            b.page_kib = int(kib)
            b.memory["hugepages"] = {"pageSize": page}
            b.note(key, value, Fidelity.APPROXIMATE if approximate else Fidelity.EXACT, rule,
                   f"hugepages.pageSize: {page}" + (" (the site's choice for 'large')." if approximate else "."))


def _numa(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        nodes = _int(key, value, 1)
        if b.dedicated and b.page_kib:
            b.cpu["numa"] = {"guestMappingPassthrough": {}}
            b.note(key, value, Fidelity.PARTIAL, rule,
                   f"guestMappingPassthrough copies the host NUMA layout of the pinned CPUs, not {nodes} node(s).")
        else:
            b.note(key, value, Fidelity.NONE, rule,
                   "KubeVirt refuses guestMappingPassthrough without dedicatedCPUPlacement and hugepages.")


def _topology(b: _Build, items: list[Item]) -> None:
    given = {key: _int(key, value, 1) for key, value, _rule in items}
    vcpus = b.flavor.vcpus
    threads = given.get("hw:cpu_threads", 1)
    sockets = given.get("hw:cpu_sockets")
    cores = given.get("hw:cpu_cores")
    adjusted = ""
    if b.dedicated and threads > 2:
        # KubeVirt refuses more than two threads per core with dedicated CPUs: halve the threads (or
        # drop to one when odd) and give the cores what the threads lose, so the vCPU count stays.
        kept = 2 if threads % 2 == 0 else 1
        adjusted = (f"KubeVirt refuses more than two threads per core with dedicated CPUs; the flavor's {threads} "
                    f"threads become {kept}. ")
        if cores is not None:
            cores = cores * (threads // kept)
        threads = kept
    if sockets is None and cores is None:
        sockets, cores = (1, vcpus // threads) if vcpus % threads == 0 else (0, 0)
    elif sockets is None:
        assert cores is not None
        sockets = vcpus // (cores * threads) if vcpus % (cores * threads) == 0 else 0
    elif cores is None:
        cores = vcpus // (sockets * threads) if vcpus % (sockets * threads) == 0 else 0
    cpu: dict[str, Any] | None = None
    if sockets and cores and sockets * cores * threads == vcpus:
        if sockets == vcpus:
            cpu = {"preferredCPUTopology": "sockets"}
        elif cores == vcpus:
            cpu = {"preferredCPUTopology": "cores"}
        elif threads == vcpus:
            cpu = {"preferredCPUTopology": "threads"}
        elif threads == 1:
            cpu = {"preferredCPUTopology": "spread", "spreadOptions": {"across": "SocketsCores", "ratio": cores}}
        elif threads == 2 and sockets == 1:
            cpu = {"preferredCPUTopology": "spread", "spreadOptions": {"across": "CoresThreads", "ratio": 2}}
        elif threads == 2:
            cpu = {"preferredCPUTopology": "spread",
                   "spreadOptions": {"across": "SocketsCoresThreads", "ratio": cores}}
    shown = f"{sockets} socket(s) x {cores} core(s) x {threads} thread(s)"
    for key, value, rule in items:
        if cpu is None:
            b.note(key, value, Fidelity.NONE, rule,
                   f"{adjusted}no KubeVirt topology gives {shown} for {vcpus} vCPUs; KubeVirt's default (all sockets) "
                   "is used.")
        else:
            b.note(key, value, Fidelity.PARTIAL, rule,
                   f"{adjusted}{shown} via preferredCPUTopology {cpu['preferredCPUTopology']}; a resize keeps the "
                   "axis or ratio, not the counts.")
    if cpu is not None:
        b.pref_section("cpu").update(cpu)
        b.sockets = sockets or vcpus


def _max_sockets(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        maximum = _int(key, value, 1)
        if maximum > UINT32_MAX:
            b.note(key, value, Fidelity.NONE, rule,
                   f"KubeVirt's maxSockets holds at most {UINT32_MAX}; not applied.")
        elif maximum < b.sockets:
            b.note(key, value, Fidelity.NONE, rule,
                   f"KubeVirt refuses maxSockets below the {b.sockets} socket(s) of the topology.")
        else:
            b.cpu["maxSockets"] = maximum
            b.note(key, value, Fidelity.APPROXIMATE, rule)


# -- memory encryption and firmware ---------------------------------------------------------------------

_LAUNCH_SECURITY = {
    "amd-sev": {"sev": {}},
    "amd-sev-es": {"sev": {"policy": {"encryptedState": True}}},
    "amd-sev-snp": {"snp": {}},
    "intel-tdx": {"tdx": {}},
}


def _mem_encryption(b: _Build, items: list[Item]) -> None:
    values = {key: (value, rule) for key, value, rule in items}
    enabled = "hw:mem_encryption" in values and _bool("hw:mem_encryption", values["hw:mem_encryption"][0])
    model = "amd-sev"
    if "hw:mem_encryption_model" in values:
        model_value, model_rule = values["hw:mem_encryption_model"]
        model = _enum("hw:mem_encryption_model", model_value, tuple(_LAUNCH_SECURITY))
        if enabled:
            b.note("hw:mem_encryption_model", model_value, Fidelity.EXACT, model_rule,
                   f"launchSecurity: {json.dumps(_LAUNCH_SECURITY[model])}.")
        else:
            b.note("hw:mem_encryption_model", model_value, Fidelity.NONE, model_rule,
                   "ignored by Nova too without hw:mem_encryption=true.")
    if "hw:mem_encryption" in values:
        value, rule = values["hw:mem_encryption"]
        if enabled:
            b.launch = model
            b.spec["launchSecurity"] = json.loads(json.dumps(_LAUNCH_SECURITY[model]))
            note = f"launchSecurity ({model}); KubeVirt v1.9 warns that instancetype launchSecurity is deprecated."
            b.pref_section("firmware")["preferredEfi"] = {"secureBoot": False}
            if model != "intel-tdx":
                note += " KubeVirt runs SEV/SNP guests only on UEFI without secure boot: preferredEfi.secureBoot false."
            else:
                note += " KubeVirt runs TDX guests only on UEFI: preferredEfi (secure boot only if os:secure_boot asks)."
            b.note("hw:mem_encryption", value, Fidelity.EXACT, rule, note)
        else:
            b.note("hw:mem_encryption", value, Fidelity.EXACT, rule, "no memory encryption: KubeVirt's default.")


def _secure_boot(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        policy = _enum(key, value, ("disabled", "required"))
        if policy == "disabled":
            b.pref_section("firmware")["preferredEfi"] = {"secureBoot": False}
            b.note(key, value, Fidelity.EXACT, rule, "preferredEfi.secureBoot: false.")
        elif b.launch in ("amd-sev", "amd-sev-es", "amd-sev-snp"):
            b.note(key, value, Fidelity.NONE, rule,
                   "KubeVirt v1.9 refuses secure boot with SEV/SNP; memory encryption wins, secure boot is off.")
        elif b.launch == "intel-tdx":
            b.pref_section("firmware")["preferredEfi"] = {"secureBoot": True}
            b.note(key, value, Fidelity.EXACT, rule,
                   "preferredEfi.secureBoot: true without SMM: KubeVirt refuses SMM with TDX, whose firmware "
                   "needs none.")
        else:
            b.pref_section("firmware")["preferredEfi"] = {"secureBoot": True}
            b.pref_section("features")["preferredSmm"] = {}
            b.note(key, value, Fidelity.EXACT, rule, "preferredEfi.secureBoot: true + preferredSmm.")


# -- devices ---------------------------------------------------------------------------------------------


def _tpm(b: _Build, items: list[Item]) -> None:
    values = {key: (value, rule) for key, value, rule in items}
    version = values.get("hw:tpm_version", ("", UNKNOWN_RULE))[0]
    if version:
        version = _enum("hw:tpm_version", version, ("1.2", "2.0"))
    on = version == "2.0"
    tpm: dict[str, Any] = {}
    for key, (value, rule) in values.items():
        if key == "hw:tpm_version":
            fidelity, note = (Fidelity.EXACT, "preferredTPM: {} (TPM 2.0).") if on else (
                Fidelity.NONE, "KubeVirt emulates TPM 2.0 only.")
        elif key == "hw:tpm_model":
            _enum(key, value, ("tpm-tis", "tpm-crb"))
            fidelity, note = (Fidelity.PARTIAL, "KubeVirt picks the TPM model itself.") if on else (
                Fidelity.NONE, "no TPM 2.0 requested.")
        else:
            _enum(key, value, ("user", "host", "deployment"))
            if on:
                tpm["persistent"] = True
                fidelity, note = Fidelity.APPROXIMATE, "preferredTPM.persistent: true (needs VM state storage)."
            else:
                fidelity, note = Fidelity.NONE, "no TPM 2.0 requested."
        b.note(key, value, fidelity, rule, note)
    if on:
        b.pref_section("devices")["preferredTPM"] = tpm


def _serial_ports(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        count = _int(key, value)
        b.pref_section("devices")["preferredAutoattachSerialConsole"] = count > 0
        fidelity = Fidelity.EXACT if count <= 1 else Fidelity.PARTIAL
        b.note(key, value, fidelity, rule, "one serial console at most." if count > 1 else "")


def _sound(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        if value in ("ich9", "ac97"):
            b.pref_section("devices")["preferredSoundModel"] = value
            b.devices["sound"] = {"name": "sound"}
            b.note(key, value, Fidelity.EXACT, rule, f"preferredSoundModel {value} + a sound device in the VM.")
        else:
            _enum(key, value, ("sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio"))
            b.note(key, value, Fidelity.NONE, rule, "KubeVirt emulates ich9 and ac97 only.")


def _usb_redirect(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        count = _int(key, value)
        if count > 15:
            raise InvalidFlavor(key, f"{value!r} is greater than the max value of '15'")
        if count:
            b.devices["clientPassthrough"] = {}
            b.note(key, value, Fidelity.PARTIAL, rule, "USB redirection on, with KubeVirt's fixed port count.")
        else:
            b.note(key, value, Fidelity.EXACT, rule, "no USB redirection: KubeVirt's default.")


def _multiqueue(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        b.pref_section("devices")["preferredNetworkInterfaceMultiQueue"] = _bool(key, value)
        b.note(key, value, Fidelity.EXACT, rule)


def _watchdog(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        action = _enum(key, value, ("none", "pause", "poweroff", "reset", "disabled"))
        if action in ("poweroff", "reset"):
            b.devices["watchdog"] = {"name": "watchdog", "i6300esb": {"action": action}}
            b.note(key, value, Fidelity.EXACT, rule, f"i6300esb watchdog, action {action}.")
        elif action == "disabled":
            b.note(key, value, Fidelity.EXACT, rule, "no watchdog: KubeVirt's default.")
        else:
            b.note(key, value, Fidelity.NONE, rule,
                   f"KubeVirt's watchdog actions are poweroff, reset and shutdown; no watchdog for '{action}'.")


def _hide_hypervisor(b: _Build, items: list[Item]) -> None:
    hidden = False
    for key, value, rule in items:
        hidden = _bool(key, value) or hidden
        b.note(key, value, Fidelity.EXACT, rule)
    b.pref_section("features")["preferredKvm"] = {"hidden": hidden}


def _rng(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        if _bool(key, value):
            b.pref_section("devices")["preferredRng"] = {}
            b.note(key, value, Fidelity.PARTIAL, rule)
        else:
            b.note(key, value, Fidelity.EXACT, rule, "no RNG device.")


# -- QoS -------------------------------------------------------------------------------------------------


def _cpu_quota(b: _Build, items: list[Item]) -> None:
    period = b.flavor.extra_specs.get("quota:cpu_period", "100000")
    for key, value, rule in items:
        quota = _int(key, value, minimum=-(2**63))
        detail = ""
        if quota > 0 and period.isdigit() and int(period) > 0:
            detail = f" (it would be limits.cpu {b.flavor.vcpus * quota * 1000 // int(period)}m)"
        b.note(key, value, Fidelity.NONE, rule,
               f"KubeVirt refuses resources.limits.cpu beside an instancetype{detail}; not applied.")


_BANDWIDTH = {"quota:vif_inbound_average": "kubernetes.io/ingress-bandwidth",
              "quota:vif_outbound_average": "kubernetes.io/egress-bandwidth"}


def _bandwidth(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        rate = _int(key, value)
        annotation = _BANDWIDTH.get(key)
        if annotation is None:
            b.note(key, value, Fidelity.NONE, rule, "the CNI bandwidth annotations carry an average rate only.")
        elif rate:
            b.pod_annotations[annotation] = f"{8 * rate}k"
            b.note(key, value, Fidelity.APPROXIMATE, rule, f"{annotation}: {8 * rate}k (pod network only).")
        else:
            b.note(key, value, Fidelity.EXACT, rule, "0 = no limit.")


# -- scheduling -------------------------------------------------------------------------------------------


def _label(prefix: str, name: str) -> str | None:
    """A node label key prefix+name, or None when Kubernetes would refuse it."""
    key = prefix + name
    return key if qualified_name_ok(key) else None


def _trait(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        match = _GROUPED_KEY.fullmatch(key)
        assert match is not None
        trait = match.group(3)
        state = _enum(key, value, ("required", "forbidden"))
        label = _label(b.options.trait_label_prefix, trait)
        if label is None:
            b.note(key, value, Fidelity.NONE, rule, f"'{b.options.trait_label_prefix}{trait}' is not a label key.")
        elif state == "required":
            b.node_selector()[label] = "true"
            b.note(key, value, Fidelity.PARTIAL, rule, f"nodeSelector {label}=true (nodes must carry the label).")
        else:
            b.not_in[label] = None
            b.note(key, value, Fidelity.PARTIAL, rule, f"VM nodeAffinity {label} NotIn [true].")


def _selector_entry(b: _Build, key: str, value: str, rule: Rule, prefix: str, name: str) -> None:
    label = _label(prefix, name.replace(":", "."))
    if value.split(" ", 1)[0] in _FILTER_OPERATORS:
        b.note(key, value, Fidelity.NONE, rule, "filter operators need node affinity expressions; not translated.")
    elif label is None or _LABEL_VALUE.fullmatch(value) is None or len(value) > 63:
        b.note(key, value, Fidelity.NONE, rule, "not expressible as a node label key and value.")
    else:
        b.node_selector()[label] = value
        b.note(key, value, Fidelity.PARTIAL, rule, f"nodeSelector {label}={value} (nodes must carry the label).")


def _aggregate(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        _selector_entry(b, key, value, rule, b.options.aggregate_label_prefix, key.split(":", 1)[1])


def _capability(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        _selector_entry(b, key, value, rule, b.options.capability_label_prefix, key.split(":", 1)[1])


# -- devices from Placement and PCI -----------------------------------------------------------------------


def _add_devices(b: _Build, field: str, prefix: str, resource: str, count: int) -> None:
    devices: list[dict[str, str]] = b.spec.setdefault(field, [])
    for _ in range(count):
        devices.append({"name": f"{prefix}{len(devices) + 1}", "deviceName": resource})


def _pci_alias(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        requests = []
        for part in value.split(","):
            match = _PCI_ALIAS.fullmatch(part.strip())
            if match is None:
                raise InvalidFlavor(key, f"{value!r} is not of the format '<alias>[:<count>][,...]'")
            requests.append((match.group(1), int(match.group(2) or 1)))
        missing = [alias for alias, _ in requests if alias not in b.options.pci_alias_resources]
        if missing:
            b.note(key, value, Fidelity.NONE, rule,
                   f"no permittedHostDevices resource configured for PCI alias {', '.join(missing)}.")
            continue
        for alias, count in requests:
            _add_devices(b, "hostDevices", "hostdevice", b.options.pci_alias_resources[alias], count)
        b.note(key, value, Fidelity.PARTIAL, rule, "hostDevices from the site's [pci] alias resources.")


def _vgpu(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        count = _int(key, value)
        resource = b.options.vgpu_resource()
        if not count:
            b.note(key, value, Fidelity.EXACT, rule, "no vGPU.")
        elif resource is None:
            b.note(key, value, Fidelity.NONE, rule, "no mediated-device resource configured for vGPUs.")
        else:
            _add_devices(b, "gpus", "gpu", resource, count)
            b.note(key, value, Fidelity.PARTIAL, rule, f"gpus: {count} x {resource}.")


def _resource_class(b: _Build, items: list[Item]) -> None:
    for key, value, rule in items:
        count = _int(key, value)
        resource_class = key.split(":", 1)[1]
        resource = b.options.resource_class_resources.get(resource_class)
        if not count:
            b.note(key, value, Fidelity.EXACT, rule, "nothing requested.")
        elif resource is None:
            b.note(key, value, Fidelity.NONE, rule, f"no device plugin resource configured for {resource_class}.")
        else:
            _add_devices(b, "hostDevices", "hostdevice", resource, count)
            b.note(key, value, Fidelity.PARTIAL, rule, f"hostDevices: {count} x {resource}.")


# Handlers run in this order: later ones read what earlier ones decided (dedicated CPUs, page size,
# NUMA passthrough before realtime, memory encryption, sockets).
_HANDLERS: dict[str, Callable[[_Build, list[Item]], None]] = {
    "cpu_policy": _cpu_policy,
    "pcpu": _pcpu,
    "page_size": _page_size,
    "emulator_threads": _emulator_threads,
    "numa": _numa,
    "realtime": _realtime,
    "topology": _topology,
    "max_sockets": _max_sockets,
    "mem_encryption": _mem_encryption,
    "secure_boot": _secure_boot,
    "tpm": _tpm,
    "serial_ports": _serial_ports,
    "sound": _sound,
    "usb_redirect": _usb_redirect,
    "multiqueue": _multiqueue,
    "watchdog": _watchdog,
    "hide_hypervisor": _hide_hypervisor,
    "rng": _rng,
    "cpu_quota": _cpu_quota,
    "bandwidth": _bandwidth,
    "trait": _trait,
    "aggregate": _aggregate,
    "capability": _capability,
    "pci_alias": _pci_alias,
    "vgpu": _vgpu,
    "resource_class": _resource_class,
}


def _translate_extra_specs(b: _Build) -> None:
    grouped: dict[str, list[Item]] = {}
    for key, value in b.flavor.extra_specs.items():
        rule = rule_for_extra_spec(key)
        if rule is None:
            b.note(key, value, Fidelity.NONE, UNKNOWN_RULE)
        elif rule.handler:
            items = grouped.get(rule.handler)
            if items is None:
                grouped[rule.handler] = [(key, value, rule)]
            else:
                items.append((key, value, rule))
        else:
            b.note(key, value, rule.fidelity, rule)
    if grouped:
        for name, handler in _HANDLERS.items():
            items = grouped.get(name)
            if items:
                handler(b, items)


# -- objects ---------------------------------------------------------------------------------------------


def _annotations(flavor: Flavor) -> dict[str, str]:
    annotations = {
        ANN_ID: flavor.id,
        ANN_NAME: flavor.name,
        ANN_EXTRA_SPECS: _encode_specs(flavor.extra_specs) if flavor.extra_specs else "{}",
        ANN_DISABLED: "true" if flavor.disabled else "false",
        ANN_DISK: str(flavor.disk),
        ANN_EPHEMERAL: str(flavor.ephemeral),
        ANN_SWAP: str(flavor.swap),
        ANN_RXTX: repr(flavor.rxtx_factor),
    }
    if flavor.description is not None:
        annotations[ANN_DESCRIPTION] = flavor.description
    return annotations


_DROPPABLE = ((ANN_DESCRIPTION, "description"), (ANN_EXTRA_SPECS, "extra_specs"))
_DROP_RULE = Rule("annotations", "", "", "metadata.annotations", Fidelity.NONE, "")


def _fit_annotations(b: _Build, annotations: dict[str, str]) -> None:
    """Leave the largest droppable annotations out until every object's annotations fit Kubernetes' limit."""
    longest_project = max(map(len, b.flavor.access), default=0) * 4 if b.flavor.access else 0
    if (sum(map(len, annotations)) + sum(map(len, annotations.values()))) * 4 + len(ANN_PROJECT) \
            + longest_project <= ANNOTATIONS_LIMIT:
        return  # cannot reach the limit even at four bytes per character
    access = b.flavor.access if not b.flavor.is_public else ()
    extra = len(ANN_PROJECT) + max(len(project.encode()) for project in access) if access else 0
    while annotations_size(annotations) + extra > ANNOTATIONS_LIMIT:
        key, field = max(((k, f) for k, f in _DROPPABLE if k in annotations),
                         key=lambda pair: len(annotations[pair[0]].encode()))
        size = len(annotations.pop(key).encode())
        left = annotations.get(ANN_LEFT_OUT)
        annotations[ANN_LEFT_OUT] = f"{left},{field}" if left else field
        b.note(field, f"{size} bytes", Fidelity.NONE, _DROP_RULE,
               f"left out of the object's {key} annotation: Kubernetes refuses more than {ANNOTATIONS_LIMIT} bytes "
               "of annotations per object; the flavor catalogue keeps it.")


def _metadata(name: str, annotations: dict[str, str], project: str | None, namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {MANAGED_BY: MANAGER}, "annotations": dict(annotations)}
    if namespace is not None and project is not None:
        meta["namespace"] = namespace
        meta["annotations"][ANN_PROJECT] = project
    return meta


def _base_report(b: _Build) -> None:
    flavor = b.flavor
    rules = _BASE_RULES
    if flavor.disk:
        b.note("disk", str(flavor.disk), Fidelity.PARTIAL, rules["disk"],
               f"root dataVolumeTemplate of {flavor.disk}Gi; the VM, not the instancetype, carries it.")
    else:
        b.note("disk", "0", Fidelity.PARTIAL, rules["disk"],
               "0: the root disk takes the image size (the server layer sets it) or the server boots from volume.")
    if flavor.ephemeral:
        b.note("OS-FLV-EXT-DATA:ephemeral", str(flavor.ephemeral), Fidelity.PARTIAL, rules["OS-FLV-EXT-DATA:ephemeral"])
    if flavor.swap_mib:
        b.note("swap", str(flavor.swap), Fidelity.APPROXIMATE, rules["swap"],
               "an emptyDisk formatted and enabled by cloud-init" if b.options.swap_cloud_init
               else "an emptyDisk; the guest must enable it itself")
    if flavor.disabled:
        b.note("OS-FLV-DISABLED:disabled", "true", Fidelity.NONE, rules["OS-FLV-DISABLED:disabled"])
    if flavor.rxtx_factor != 1.0:
        b.note("rxtx_factor", repr(flavor.rxtx_factor), Fidelity.NA, rules["rxtx_factor"])
    if not flavor.is_public and not flavor.access:
        b.note("access", "[]", Fidelity.EXACT, rules["access"],
               "a private flavor no project can use: no namespaced copy.")


def _vm_fragment(b: _Build, name: str, namespaced: bool) -> dict[str, Any]:
    flavor = b.flavor
    disks: list[dict[str, Any]] = [{"name": ROOT_DISK, "disk": {}, "bootOrder": 1}]
    volumes: list[dict[str, Any]] = [{"name": ROOT_DISK, "dataVolume": {"name": ROOT_DISK}}]
    storage: dict[str, Any] = {}
    if flavor.disk:
        storage["resources"] = {"requests": {"storage": f"{flavor.disk}Gi"}}
    if flavor.ephemeral:
        disks.append({"name": "ephemeral0", "disk": {}})
        volumes.append({"name": "ephemeral0", "emptyDisk": {"capacity": f"{flavor.ephemeral}Gi"}})
    if flavor.swap_mib:
        disks.append({"name": SWAP_DISK, "serial": SWAP_DISK, "disk": {}})
        volumes.append({"name": SWAP_DISK, "emptyDisk": {"capacity": f"{flavor.swap_mib}Mi"}})
        if b.options.swap_cloud_init:
            disks.append({"name": CLOUD_INIT_DISK, "disk": {}})
            volumes.append({"name": CLOUD_INIT_DISK, "cloudInitNoCloud": {"userData": SWAP_USER_DATA}})
    devices: dict[str, Any] = {"disks": disks, **b.devices}
    template_spec: dict[str, Any] = {"domain": {"devices": devices}, "volumes": volumes}
    if b.not_in:
        template_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": label, "operator": "NotIn", "values": ["true"]} for label in b.not_in
            ]}]}}}
    template: dict[str, Any] = {"spec": template_spec}
    if b.pod_annotations:
        template["metadata"] = {"annotations": dict(b.pod_annotations)}
    return {
        "apiVersion": VM_API,
        "kind": "VirtualMachine",
        "metadata": {"labels": {MANAGED_BY: MANAGER}, "annotations": {ANN_ID: flavor.id, ANN_NAME: flavor.name}},
        "spec": {
            "instancetype": {"kind": INSTANCETYPE if namespaced else CLUSTER_INSTANCETYPE, "name": name},
            "preference": {"kind": PREFERENCE if namespaced else CLUSTER_PREFERENCE, "name": name},
            "dataVolumeTemplates": [{"metadata": {"name": ROOT_DISK}, "spec": {"storage": storage}}],
            "template": template,
        },
    }


def _copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars): each namespaced copy owns its spec."""
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item) for item in value]
    return value


def _copies(flavor: Flavor, options: MappingOptions) -> Iterator[tuple[str | None, str | None]]:
    if flavor.is_public:
        yield None, None
    else:
        for project in flavor.access:
            yield project, options.namespace_for(project)


def flavor_to_kubevirt(flavor: Mapping[str, Any] | Flavor, options: MappingOptions = DEFAULT_OPTIONS, *,
                       check: FlavorCheck | None = None) -> FlavorObjects:
    """Convert one flavor (GET /flavors/{id} body, optionally with "access") into KubeVirt objects.

    ``check``: Nova's validation of a flavor body, run first on a body (kubevirt.flavor.parse_flavor)."""
    parsed = flavor if isinstance(flavor, Flavor) else parse_flavor(flavor, check)
    if parsed.vcpus > UINT32_MAX:
        raise InvalidFlavor("vcpus", f"{parsed.vcpus} is more than KubeVirt's maximum of {UINT32_MAX} vCPUs")
    b = _Build(parsed, options)
    _base_report(b)
    _translate_extra_specs(b)
    name = kubernetes_name(parsed.id)
    spec: dict[str, Any] = {"cpu": b.cpu, "memory": b.memory, **b.spec}
    pref_spec: dict[str, Any] = dict(b.pref)
    instancetypes: list[dict[str, Any]] = []
    preferences: list[dict[str, Any]] = []
    annotations = _annotations(parsed)
    _fit_annotations(b, annotations)
    for project, namespace in _copies(parsed, options):
        instancetypes.append({
            "apiVersion": INSTANCETYPE_API,
            "kind": INSTANCETYPE if namespace else CLUSTER_INSTANCETYPE,
            "metadata": _metadata(name, annotations, project, namespace),
            "spec": spec if namespace is None else _copy(spec),
        })
        preferences.append({
            "apiVersion": INSTANCETYPE_API,
            "kind": PREFERENCE if namespace else CLUSTER_PREFERENCE,
            "metadata": _metadata(name, annotations, project, namespace),
            "spec": pref_spec if namespace is None else _copy(pref_spec),
        })
    vm = _vm_fragment(b, name, not parsed.is_public)
    # A preference carries its instancetype's metadata; namespaced copies differ only in namespace and
    # project annotation, so the first copy and the one with the longest project id stand for all.
    metadata = [doc["metadata"] for doc in instancetypes[:1]]
    if len(instancetypes) > 1:
        metadata.append(max((doc["metadata"] for doc in instancetypes),
                            key=lambda meta: len(meta["annotations"].get(ANN_PROJECT, "").encode())))
    metadata.append(vm["metadata"])
    # A refusal here is a mapping bug, never the flavor's fault.
    check_vm(vm, spec, pref_spec, metadata)
    return FlavorObjects(parsed, name, tuple(instancetypes), tuple(preferences), vm, tuple(b.report))
