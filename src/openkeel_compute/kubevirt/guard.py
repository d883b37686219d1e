"""What KubeVirt v1.9 admission refuses, checked before an object leaves OpenKeel.

``instancetype_conflicts`` is the conflict list of instancetype-rules.md §B: the VM fields that must
not be set beside ``spec.instancetype`` (seed 003's bug: sizing beside a matcher). ``cluster_refusals``
adds the VMI validations the applied instancetype and preference must pass. ``check_vm`` runs both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openkeel_compute.kubevirt.quantity import to_bytes

_PAGE_BYTES = {"2Mi": 2 * 1024**2, "1Gi": 1024**3}
_SPREAD_ACROSS = ("SocketsCores", "CoresThreads", "SocketsCoresThreads")
_TOPOLOGIES = ("sockets", "cores", "threads", "spread", "any",
               "preferSockets", "preferCores", "preferThreads", "preferSpread", "preferAny")


class RefusedByKubeVirt(ValueError):
    """An object KubeVirt admission would refuse; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _get(obj: Mapping[str, Any] | None, *path: str) -> Any:
    for part in path:
        # type() first: the objects checked are plain dicts, and the ABC check costs ~4x more.
        if type(obj) is not dict and not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def instancetype_conflicts(vm: Mapping[str, Any], instancetype_spec: Mapping[str, Any]) -> list[str]:
    """Paths of VM fields that KubeVirt refuses beside this instancetype (empty when none)."""
    tmpl = _get(vm, "spec", "template", "spec") or {}
    domain = tmpl.get("domain") or {}
    if (domain.keys() <= {"devices"} and tmpl.keys().isdisjoint(("nodeSelector", "schedulerName"))
            and not instancetype_spec.keys() & {"gpus", "hostDevices", "annotations"}):
        return []  # nothing that could conflict: the usual OpenKeel fragment
    cpu = domain.get("cpu") or {}
    memory = domain.get("memory") or {}
    resources = domain.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    it_cpu = instancetype_spec.get("cpu") or {}
    it_memory = instancetype_spec.get("memory") or {}
    base = "spec.template.spec.domain"
    found: list[str] = []
    # CPU: guest is mandatory in an instancetype, so sizing always conflicts.
    if "cpu" in requests:
        found.append(f"{base}.resources.requests.cpu")
    if "cpu" in limits:
        found.append(f"{base}.resources.limits.cpu")
    found.extend(f"{base}.cpu.{axis}" for axis in ("sockets", "cores", "threads") if cpu.get(axis))
    if cpu.get("model") and it_cpu.get("model") is not None:
        found.append(f"{base}.cpu.model")
    for field in ("dedicatedCpuPlacement", "isolateEmulatorThread"):
        it_field = "dedicatedCPUPlacement" if field == "dedicatedCpuPlacement" else field
        if cpu.get(field) is True and it_cpu.get(it_field) is not None:
            found.append(f"{base}.cpu.{field}")
    for field in ("numa", "realtime"):
        if cpu.get(field) is not None and it_cpu.get(field) is not None:
            found.append(f"{base}.cpu.{field}")
    # Memory: KubeVirt reports the first memory conflict only; OpenKeel lists them all.
    if memory.get("guest") is not None:
        found.append(f"{base}.memory.guest")
    for field in ("hugepages", "maxGuest"):
        if memory.get(field) is not None and it_memory.get(field) is not None:
            found.append(f"{base}.memory.{field}")
    if "memory" in requests:
        found.append(f"{base}.resources.requests.memory")
    if "memory" in limits:
        found.append(f"{base}.resources.limits.memory")
    # Fields the instancetype may set; the VM must then leave them alone ({} counts as set).
    if instancetype_spec.get("nodeSelector") is not None and tmpl.get("nodeSelector") is not None:
        found.append("spec.template.spec.nodeSelector")
    if instancetype_spec.get("schedulerName") and tmpl.get("schedulerName"):
        found.append("spec.template.spec.schedulerName")
    if instancetype_spec.get("ioThreadsPolicy") is not None and domain.get("ioThreadsPolicy") is not None:
        found.append(f"{base}.ioThreadsPolicy")
    if (_get(instancetype_spec, "ioThreads", "supplementalPoolThreadCount") is not None
            and _get(domain, "ioThreads", "supplementalPoolThreadCount") is not None):
        found.append(f"{base}.ioThreads.supplementalPoolThreadCount")
    if instancetype_spec.get("launchSecurity") is not None and domain.get("launchSecurity") is not None:
        found.append(f"{base}.launchSecurity")
    devices = domain.get("devices") or {}
    for field in ("gpus", "hostDevices"):
        if instancetype_spec.get(field) and devices.get(field):
            found.append(f"{base}.devices.{field}")
    vmi_annotations = _get(vm, "spec", "template", "metadata", "annotations") or {}
    for key, value in (instancetype_spec.get("annotations") or {}).items():
        if key in vmi_annotations and vmi_annotations[key] != value:
            found.append(f"annotations.{key}")
    return found


def _sockets(guest: int, pref_cpu: Mapping[str, Any]) -> int:
    topology = pref_cpu.get("preferredCPUTopology", "sockets")
    if topology in ("sockets", "preferSockets"):
        return guest
    if topology in ("spread", "preferSpread"):
        spread = pref_cpu.get("spreadOptions") or {}
        across = spread.get("across", "SocketsCores")
        ratio = int(spread.get("ratio", 2))
        if across == "SocketsCores":
            return max(guest // ratio, 1)
        if across == "SocketsCoresThreads":
            return max(guest // (2 * ratio), 1)
    return 1


def cluster_refusals(instancetype_spec: Mapping[str, Any], preference_spec: Mapping[str, Any]) -> list[str]:
    """Reasons KubeVirt would refuse a VM using this instancetype and preference (empty when none)."""
    found: list[str] = []
    cpu = instancetype_spec.get("cpu") or {}
    memory = instancetype_spec.get("memory") or {}
    guest = cpu.get("guest")
    if (len(cpu) == 1 and len(memory) == 1 and type(guest) is int and guest >= 1
            and "launchSecurity" not in instancetype_spec
            and preference_spec.keys().isdisjoint(("cpu", "requirements", "preferredLaunchSecurity", "firmware"))):
        return found  # a plain size: nothing KubeVirt validates beyond the schema
    if not isinstance(guest, int) or isinstance(guest, bool) or guest < 1:
        found.append("spec.cpu.guest must be a whole number >= 1")
        guest = 1
    dedicated = cpu.get("dedicatedCPUPlacement") is True
    if cpu.get("isolateEmulatorThread") and not dedicated:
        found.append("spec.cpu.isolateEmulatorThread needs dedicatedCPUPlacement")
    if cpu.get("realtime") is not None and not dedicated:
        found.append("spec.cpu.realtime needs dedicatedCPUPlacement")
    page = _get(memory, "hugepages", "pageSize")
    if cpu.get("numa") is not None and not (dedicated and page):
        found.append("spec.cpu.numa.guestMappingPassthrough needs dedicatedCPUPlacement and hugepages")
    if page is not None:
        if page not in _PAGE_BYTES:
            found.append(f"spec.memory.hugepages.pageSize {page!r} is neither 2Mi nor 1Gi")
        elif to_bytes(memory["guest"]) % _PAGE_BYTES[page]:
            found.append(f"spec.memory.guest {memory['guest']} is not a multiple of the {page} page size")
    overcommit = memory.get("overcommitPercent")
    if overcommit is not None:
        if not 0 <= overcommit <= 100:
            found.append("spec.memory.overcommitPercent must be within 0..100")
        if page is not None and overcommit:
            found.append("spec.memory.overcommitPercent cannot be combined with hugepages")
    pref_cpu = preference_spec.get("cpu") or {}
    topology = pref_cpu.get("preferredCPUTopology")
    if topology is not None and topology not in _TOPOLOGIES:
        found.append(f"preferredCPUTopology {topology!r} is not a KubeVirt topology")
    if topology in ("spread", "preferSpread"):
        spread = pref_cpu.get("spreadOptions") or {}
        across = spread.get("across", "SocketsCores")
        ratio = spread.get("ratio", 2)
        if across not in _SPREAD_ACROSS:
            found.append(f"spreadOptions.across {across!r} is not a KubeVirt value")
        elif across == "CoresThreads" and ratio != 2:
            found.append("spreadOptions.ratio must be 2 across CoresThreads")
        elif across == "SocketsCoresThreads" and (guest % 2 or (guest // 2) % ratio):
            found.append(f"instancetype.spec.cpu.guest {guest} does not spread across SocketsCoresThreads 1:{ratio}:2")
        elif across != "SocketsCoresThreads" and guest % ratio:
            found.append(f"instancetype.spec.cpu.guest {guest} is not divisible by the spread ratio {ratio}")
    max_sockets = cpu.get("maxSockets")
    if max_sockets is not None and max_sockets < _sockets(guest, pref_cpu):
        found.append(f"spec.cpu.maxSockets {max_sockets} is below the sockets of the topology")
    launch = instancetype_spec.get("launchSecurity") or preference_spec.get("preferredLaunchSecurity") or {}
    if "sev" in launch or "snp" in launch:
        efi = _get(preference_spec, "firmware", "preferredEfi")
        if efi is None or efi.get("secureBoot", True):
            found.append("SEV and SNP need UEFI without secure boot: preferredEfi.secureBoot must be false")
    efi = _get(preference_spec, "firmware", "preferredEfi")
    if efi is not None and efi.get("secureBoot", True) and _get(preference_spec, "features", "preferredSmm") is None:
        found.append("EFI secure boot (KubeVirt's default for EFI) needs SMM: features.preferredSmm")
    requirements = preference_spec.get("requirements") or {}
    need_cpu = _get(requirements, "cpu", "guest")
    if need_cpu is not None and guest < need_cpu:
        found.append(f"insufficient CPU resources of {guest} vCPU provided by instance type, "
                     f"preference requires {need_cpu}")
    need_memory = _get(requirements, "memory", "guest")
    if need_memory is not None and to_bytes(memory["guest"]) < to_bytes(need_memory):
        found.append(f"insufficient Memory resources of {memory['guest']} provided by instance type, "
                     f"preference requires {need_memory}")
    return found


def check_vm(vm: Mapping[str, Any], instancetype_spec: Mapping[str, Any],
             preference_spec: Mapping[str, Any] | None = None) -> None:
    """Raise RefusedByKubeVirt if KubeVirt admission would refuse the VM with these objects."""
    problems = [f"VM field(s) {path} conflicts with selected instance type"
                for path in instancetype_conflicts(vm, instancetype_spec)]
    problems += cluster_refusals(instancetype_spec, preference_spec or {})
    if problems:
        raise RefusedByKubeVirt(problems)
