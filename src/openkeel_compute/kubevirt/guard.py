"""What KubeVirt v1.9 admission refuses, checked before an object leaves OpenKeel.

``instancetype_conflicts`` is the conflict list of instancetype-rules.md §B: the VM fields that must
not be set beside ``spec.instancetype`` (seed 003's bug: sizing beside a matcher). ``cluster_refusals``
runs every row of the admission table (``admission.ADMISSION_TABLE``) over the instancetype,
preference, VM fragment and object metadata. ``check_vm`` runs both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openkeel_compute.kubevirt.admission import UINT32_MAX, admission_refusals, metadata_refusals


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


def cluster_refusals(instancetype_spec: Mapping[str, Any], preference_spec: Mapping[str, Any],
                     vm: Mapping[str, Any] | None = None,
                     metadata: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """KubeVirt's messages for every row of the admission table these objects break (empty when none)."""
    cpu = instancetype_spec.get("cpu") or {}
    memory = instancetype_spec.get("memory") or {}
    guest = cpu.get("guest")
    if (len(cpu) == 1 and len(memory) == 1 and type(guest) is int and 1 <= guest <= UINT32_MAX
            and instancetype_spec.keys() <= _PLAIN_SPEC and not preference_spec and _plain_vm(vm)):
        found = metadata_refusals(metadata, vm, instancetype_spec)  # a plain size: only these rows can apply
    else:
        found = admission_refusals(instancetype_spec, preference_spec, vm, metadata)
    return [message for _rule, message in found]


_PLAIN_SPEC = frozenset({"cpu", "memory"})


def _plain_vm(vm: Mapping[str, Any] | None) -> bool:
    if vm is None:
        return True
    tmpl = _get(vm, "spec", "template") or {}
    spec = tmpl.get("spec") or {}
    domain = spec.get("domain") or {}
    devices = domain.get("devices") or {}
    return ("metadata" not in tmpl and "affinity" not in spec and "architecture" not in spec
            and spec.keys().isdisjoint(("hostname", "accessCredentials", "networks"))
            and devices.keys() <= {"disks"} and domain.keys() <= {"devices"}
            and not any(disk.get("cdrom") is not None or (disk.get("disk") or {}).get("bus")
                        for disk in devices.get("disks") or ()))


def check_vm(vm: Mapping[str, Any], instancetype_spec: Mapping[str, Any],
             preference_spec: Mapping[str, Any] | None = None,
             metadata: Iterable[Mapping[str, Any]] = ()) -> None:
    """Raise RefusedByKubeVirt if KubeVirt admission would refuse the VM with these objects.

    ``metadata`` are the metadata of the emitted instancetype and preference objects (and the VM's).
    """
    problems = [f"VM field(s) {path} conflicts with selected instance type"
                for path in instancetype_conflicts(vm, instancetype_spec)]
    problems += cluster_refusals(instancetype_spec, preference_spec or {}, vm, metadata)
    if problems:
        raise RefusedByKubeVirt(problems)
