"""The admission hook: KubeVirt's webhooks, as functions the emulator calls per object kind.

A hook receives a ``Review`` (the operation, the object, the object it replaces, and a way to look
other objects up) and returns the messages of its refusals (empty: admitted). The emulator answers a
refusal the way kube-apiserver relays a KubeVirt webhook's denial: 422 Invalid,
``admission webhook "<webhook>" denied the request: <message>``.

``register`` adds hooks (tests and operators can add their own); the VirtualMachine hook runs
KubeVirt's admission table over the VM and the instancetype and preference it references.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from openkeel_compute.emulator import networks

Lookup = Callable[[str, str, "str | None"], "dict[str, Any] | None"]


@dataclasses.dataclass(frozen=True)
class Review:
    operation: str  # CREATE or UPDATE
    kind: str
    obj: dict[str, Any]
    old: dict[str, Any] | None
    lookup: Lookup  # (kind, name, namespace) -> stored object or None
    service: bool = False  # the request comes from one of KubeVirt's service accounts (virt-api, virt-controller)
    # (kind, namespace) -> the stored objects of that kind there (a webhook listing, e.g. migrations)
    list: Callable[[str, str | None], list[dict[str, Any]]] = lambda kind, namespace: []


Hook = Callable[[Review], list[str]]
HOOKS: dict[str, list[Hook]] = {}
# Mutating admission (KubeVirt's mutating webhooks, Kubernetes' admission plugins and defaults): change
# ``review.obj`` in place before the validating hooks run.
Mutator = Callable[[Review], None]
MUTATORS: dict[str, list[Mutator]] = {}


class FieldError(str):
    """A refusal of the API server's own validation (``Kind "name" is invalid: field: detail``), not of a
    webhook; the text is ``field: detail``."""


class Rejection(str):
    """A webhook's error answer (KubeVirt's ToAdmissionResponseError): 400 instead of 422."""

# The webhook kube-apiserver names in a denial, per kind (KubeVirt's validating webhooks).
WEBHOOKS = {
    "VirtualMachine": "virtualmachine-validator.kubevirt.io",
    "VirtualMachineInstance": "virtualmachineinstances-create-validator.kubevirt.io",
    "VirtualMachineInstance/UPDATE": "virtualmachineinstances-update-validator.kubevirt.io",
    "VirtualMachineInstancetype": "virtualmachineinstancetype-validator.instancetype.kubevirt.io",
    "VirtualMachineClusterInstancetype": "virtualmachineclusterinstancetype-validator.instancetype.kubevirt.io",
    "VirtualMachinePreference": "virtualmachinepreference-validator.instancetype.kubevirt.io",
    "VirtualMachineClusterPreference": "virtualmachineclusterpreference-validator.instancetype.kubevirt.io",
    "DataVolume": "datavolume-validate.cdi.kubevirt.io",
}


def register(kind: str, hook: Hook) -> Callable[[], None]:
    """Add a hook for ``kind``; returns a function that removes it again."""
    HOOKS.setdefault(kind, []).append(hook)
    return lambda: HOOKS[kind].remove(hook)


def mutate(request: Review) -> None:
    for mutator in MUTATORS.get(request.kind, ()):
        mutator(request)


def review(request: Review) -> list[str]:
    """Every refusal of every hook registered for the object's kind."""
    found: list[str] = []
    for hook in HOOKS.get(request.kind, ()):
        found.extend(hook(request))
    return found


def denial(kind: str, messages: list[str], operation: str = "CREATE") -> str:
    """The API server's words for a webhook's refusal; KubeVirt joins at most ten causes."""
    webhook = WEBHOOKS.get(f"{kind}/{operation}") or WEBHOOKS.get(kind, f"{kind.lower()}-validator.kubevirt.io")
    text = ", ".join(messages[:10])
    if len(messages) > 10:
        text += f", and {len(messages) - 10} more validation errors"
    return f'admission webhook "{webhook}" denied the request: {text}'


def _matcher_spec(review_: Review, field: str, cluster_kind: str, namespaced_kind: str) -> dict[str, Any] | None:
    matcher = (review_.obj.get("spec") or {}).get(field) or {}
    name = matcher.get("name")
    if not name:
        return None
    kind = matcher.get("kind") or cluster_kind
    namespace = None if kind == cluster_kind else review_.obj["metadata"].get("namespace")
    found = review_.lookup(kind if kind in (cluster_kind, namespaced_kind) else cluster_kind, name, namespace)
    return (found or {}).get("spec") if found else None


def _admission_table(instancetype_spec: dict[str, Any], preference_spec: dict[str, Any] | None,
                     vm: dict[str, Any]) -> list[str]:
    """THE call site of KubeVirt's admission table (openkeel_compute.kubevirt.admission).

    Until that table is part of this tree this returns no refusal; once it is, every row of it runs
    over what the VM would become.
    """
    try:
        from openkeel_compute.kubevirt import admission as table  # type: ignore[attr-defined]
    except ImportError:
        return []
    refusals = table.admission_refusals(instancetype_spec, preference_spec, vm, [vm.get("metadata") or {}])
    return [message for _rule, message in refusals]


def virtual_machine_table(review_: Review) -> list[str]:
    instancetype = _matcher_spec(review_, "instancetype", "VirtualMachineClusterInstancetype",
                                 "VirtualMachineInstancetype")
    if instancetype is None:
        return []  # nothing to expand; a missing instancetype is the VM controller's Failure condition
    preference = _matcher_spec(review_, "preference", "VirtualMachineClusterPreference", "VirtualMachinePreference")
    return _admission_table(instancetype, preference, review_.obj)


register("VirtualMachine", virtual_machine_table)


def matcher_revision_rule(review_: Review) -> list[str]:
    """KubeVirt's VM mutator: a matcher whose name changes while it keeps the same non-empty revisionName
    is refused (an old empty revisionName is never checked)."""
    if review_.operation != "UPDATE" or review_.old is None:
        return []
    refused = []
    for field, word in (("instancetype", "Matcher"), ("preference", "Preference Matcher")):
        old = (review_.old.get("spec") or {}).get(field) or {}
        new = (review_.obj.get("spec") or {}).get(field) or {}
        if old.get("revisionName") and old.get("name") != new.get("name") \
                and old.get("revisionName") == new.get("revisionName"):
            refused.append(f"the {word} Name has been updated without updating the RevisionName")
    return refused


register("VirtualMachine", matcher_revision_rule)


def network_rules(review_: Review) -> list[str]:
    """KubeVirt's network validator (pkg/network/admitter) over a VM's template or a new VMI."""
    spec = review_.obj.get("spec") or {}
    if review_.kind == "VirtualMachine":
        return networks.validate((spec.get("template") or {}).get("spec") or {}, "spec.template.spec",
                                 creating=review_.operation == "CREATE")
    if review_.operation != "CREATE":
        return []
    return networks.validate(spec, "spec")


register("VirtualMachine", network_rules)
register("VirtualMachineInstance", network_rules)


def vmi_update_rules(review_: Review) -> list[str]:
    """KubeVirt's VMI update webhook: only its own service accounts change a VMI's spec (through the
    subresources), and then only hotplugged volumes may come and go, with a disk KubeVirt can hotplug."""
    if review_.operation != "UPDATE" or review_.old is None:
        return []
    old, new = review_.old.get("spec") or {}, review_.obj.get("spec") or {}
    if old == new:
        return []
    if not review_.service:
        return ["update of VMI object is restricted"]
    from openkeel_compute.emulator import disks

    refusal = disks.hotplug_refusal(old, new)
    return [refusal] if refusal else []


register("VirtualMachineInstance", vmi_update_rules)
