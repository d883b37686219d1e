"""The cluster's nodes as Placement resource providers (one per node), kept in step by the controller.

A node's provider:

- **uuid** ``uuid5(PROVIDER_NAMESPACE, node name)``: stable for as long as the node keeps its name, also
  when the node is deleted and registered again (its new Kubernetes UID would otherwise leave two providers
  of one name); **name** the node's name;
- **inventories** from ``status.allocatable``: ``cpu`` → VCPU (whole CPUs), ``memory`` → MEMORY_MB (MiB),
  ``ephemeral-storage`` → DISK_GB (GiB); each with Nova's reserved amount (``reserved_host_cpus``,
  ``reserved_host_memory_mb``, ``reserved_host_disk_mb`` rounded up to GiB; never more than the total) and
  allocation ratio (``cpu/ram/disk_allocation_ratio``; unset: the ``initial_*`` one for a new provider,
  then whatever Placement holds, as Nova keeps a ratio an operator set through Placement);
- a node labelled ``cpumanager=true`` (KubeVirt's label for nodes whose kubelet runs the static CPU
  manager) offers dedicated CPUs: its CPUs are PCPU (ratio 1.0, ``reserved_host_cpus`` kept), not VCPU,
  as a Nova compute whose CPUs are all in ``cpu_dedicated_set``;
- **traits**: every label ``<trait_label_prefix><TRAIT>=true`` gives TRAIT; COMPUTE_STATUS_DISABLED when
  the node cannot take servers (not Ready, cordoned, or not ``kubevirt.io/schedulable=true``), as Nova
  marks a disabled compute service; and CUSTOM_OPENKEEL_NODE, which tells the controller's providers from
  anyone else's;
- **aggregates**: one per availability zone (its ``topology.kubernetes.io/zone`` label, the default zone
  without one): ``zone_aggregate(zone)``; and one per ``<aggregate_label_prefix><key>=<value>`` label:
  ``uuid5(PROVIDER_NAMESPACE, "aggregate:<key>=<value>")``.

Providers of nodes that left are deleted once nothing is allocated against them; until then they stay,
disabled, so that the servers' allocations stay where they are.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import uuid
from collections.abc import Collection, Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from openkeel_compute.placement import errors
from openkeel_compute.placement.client import PlacementClient

LOG = logging.getLogger(__name__)
PROVIDER_NAMESPACE = uuid.UUID("5b8e3d5c-8f0e-4a57-9a53-6f1c2b4a7e21")
MARKER_TRAIT = "CUSTOM_OPENKEEL_NODE"
DISABLED_TRAIT = "COMPUTE_STATUS_DISABLED"
CPU_MANAGER_LABEL = "cpumanager"
ZONE_LABEL = "topology.kubernetes.io/zone"
_TRAIT_NAME = re.compile(r"^[A-Z0-9_]+$")
_SUFFIXES: dict[str, int | Decimal] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
             "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1, "k": 10**3, "K": 10**3,
             "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|K|M|G|T|P|E)?$")


def provider_uuid(node_name: str) -> str:
    return str(uuid.uuid5(PROVIDER_NAMESPACE, node_name))


def zone_aggregate(zone: str) -> str:
    """The Placement aggregate of an availability zone's nodes."""
    return str(uuid.uuid5(PROVIDER_NAMESPACE, f"availability-zone:{zone}"))


def label_aggregate(key: str, value: str) -> str:
    return str(uuid.uuid5(PROVIDER_NAMESPACE, f"aggregate:{key}={value}"))


def quantity(text: Any) -> Decimal:
    """A Kubernetes resource quantity ("16", "7500m", "64Gi", "1e3") as a number; ValueError if malformed."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    try:
        return Decimal(match.group(1)) * Decimal(_SUFFIXES[match.group(2) or ""])
    except InvalidOperation:
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from None


@dataclasses.dataclass(frozen=True)
class Ratios:
    """Nova's allocation ratio and reserved options (None ratio: keep Placement's, initial for a new one)."""

    cpu: float | None = None
    ram: float | None = None
    disk: float | None = None
    initial_cpu: float = 4.0
    initial_ram: float = 1.0
    initial_disk: float = 1.0
    reserved_cpus: int = 0
    reserved_memory_mb: int = 512
    reserved_disk_mb: int = 0

    @classmethod
    def from_conf(cls, conf: Any) -> Ratios:
        return cls(conf.cpu_allocation_ratio, conf.ram_allocation_ratio, conf.disk_allocation_ratio,
                   conf.initial_cpu_allocation_ratio, conf.initial_ram_allocation_ratio,
                   conf.initial_disk_allocation_ratio, conf.reserved_host_cpus, conf.reserved_host_memory_mb,
                   conf.reserved_host_disk_mb)


@dataclasses.dataclass(frozen=True)
class Labels:
    trait_prefix: str = "openkeel.io/trait."
    aggregate_prefix: str = "openkeel.io/aggregate."
    default_zone: str = "nova"


@dataclasses.dataclass
class Desired:
    uuid: str
    name: str
    inventories: dict[str, dict[str, Any]]
    traits: set[str]
    aggregates: set[str]


def _available(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    if (node.get("spec") or {}).get("unschedulable") or labels.get("kubevirt.io/schedulable") != "true":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def _record(total: int, reserved: int, ratio: float) -> dict[str, Any]:
    return {"total": total, "reserved": min(reserved, total), "min_unit": 1, "max_unit": total, "step_size": 1,
            "allocation_ratio": ratio}


def desired(node: Mapping[str, Any], ratios: Ratios, labels: Labels,
            current: Mapping[str, Mapping[str, Any]] | None = None, forced_down: bool = False,
            host_aggregates: Collection[str] = ()) -> Desired:
    """What the node's provider should hold (``current``: its inventories now, for the kept ratios;
    ``forced_down``: its compute service is forced down, which the scheduler skips as a down service)."""
    meta = node.get("metadata") or {}
    name = meta["name"]
    node_labels = meta.get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    current = current or {}

    def ratio(rc: str, configured: float | None, initial: float) -> float:
        if configured is not None:
            return configured
        return float((current.get(rc) or {}).get("allocation_ratio") or initial)

    inventories: dict[str, dict[str, Any]] = {}
    cpus = int(quantity(allocatable.get("cpu", 0)))
    if cpus > 0:
        if node_labels.get(CPU_MANAGER_LABEL) == "true":
            inventories["PCPU"] = _record(cpus, ratios.reserved_cpus, 1.0)
        else:
            inventories["VCPU"] = _record(cpus, ratios.reserved_cpus, ratio("VCPU", ratios.cpu, ratios.initial_cpu))
    memory_mb = int(quantity(allocatable.get("memory", 0)) // 2**20)
    if memory_mb > 0:
        inventories["MEMORY_MB"] = _record(memory_mb, ratios.reserved_memory_mb,
                                           ratio("MEMORY_MB", ratios.ram, ratios.initial_ram))
    disk_gb = int(quantity(allocatable.get("ephemeral-storage", 0)) // 2**30)
    if disk_gb > 0:
        inventories["DISK_GB"] = _record(disk_gb, math.ceil(ratios.reserved_disk_mb / 1024),
                                         ratio("DISK_GB", ratios.disk, ratios.initial_disk))

    traits = {MARKER_TRAIT}
    aggregates = {zone_aggregate(node_labels.get(ZONE_LABEL) or labels.default_zone)}
    for key, value in node_labels.items():
        if key.startswith(labels.trait_prefix) and value == "true":
            trait = key[len(labels.trait_prefix):]
            if _TRAIT_NAME.match(trait):
                traits.add(trait)
            else:
                LOG.warning("node %s: label %s does not name a trait (A-Z, 0-9 and _ only): ignored", name, key)
        elif key.startswith(labels.aggregate_prefix):
            aggregates.add(label_aggregate(key[len(labels.aggregate_prefix):], value))
    aggregates |= set(host_aggregates)  # the host aggregates it is in (os-aggregates), as Nova mirrors them
    if forced_down or not _available(node):
        traits.add(DISABLED_TRAIT)
    return Desired(provider_uuid(name), name, inventories, traits, aggregates)


@dataclasses.dataclass
class Report:
    created: list[str] = dataclasses.field(default_factory=list)
    updated: list[str] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)
    kept: list[str] = dataclasses.field(default_factory=list)  # nodes gone, allocations still against them

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def _same_inventories(have: Mapping[str, Mapping[str, Any]], want: Mapping[str, Mapping[str, Any]]) -> bool:
    if set(have) != set(want):
        return False
    return all(all(have[rc].get(k) == v for k, v in record.items()) for rc, record in want.items())


def _converge(placement: PlacementClient, node: Mapping[str, Any], ratios: Ratios, labels: Labels,
              report: Report, down: Collection[str] = (),
              member_of: Mapping[str, Collection[str]] | None = None) -> None:
    name = (node.get("metadata") or {})["name"]
    rp = provider_uuid(name)
    created = None
    if placement.provider(rp) is None:
        try:
            created = placement.create_provider(rp, name)
        except errors.PlacementConflict:  # a provider of that name with another uuid (not one of ours)
            LOG.warning("node %s: Placement has another provider named %s; this node is not offered", name, name)
            return
        report.created.append(name)
    # A provider just created has no inventory, traits or aggregates: nothing to read back (a cluster's
    # first start creates one per node, and the servers wait for them).
    generation, inventories = (created["generation"], {}) if created else placement.inventories(rp)
    want = desired(node, ratios, labels, inventories, name in down, (member_of or {}).get(name, ()))
    changed = False
    if not _same_inventories(inventories, want.inventories):
        try:
            generation = placement.set_inventories(rp, generation, want.inventories)
        except errors.ProviderInUse as exc:  # a class still allocated would go: keep the rest as it was
            LOG.warning("node %s: inventory not changed while servers use it: %s", name, exc.message)
        changed = True
    if not created:
        generation, traits = placement.traits(rp)
    else:
        traits = set()
    if traits != want.traits:
        generation = placement.set_traits(rp, generation, want.traits)
        changed = True
    if not created:
        generation, aggregates = placement.aggregates(rp)
    else:
        aggregates = set()
    if aggregates != want.aggregates:
        placement.set_aggregates(rp, generation, want.aggregates)
        changed = True
    if changed and name not in report.created:
        report.updated.append(name)


def _retire(placement: PlacementClient, provider: Mapping[str, Any], report: Report) -> None:
    rp, name = provider["uuid"], provider["name"]
    try:
        placement.delete_provider(rp)
    except errors.ProviderInUse:
        generation, traits = placement.traits(rp)
        if DISABLED_TRAIT not in traits:
            placement.set_traits(rp, generation, traits | {DISABLED_TRAIT})
        report.kept.append(name)
    else:
        report.deleted.append(name)


def sync(placement: PlacementClient, nodes: Iterable[Mapping[str, Any]], ratios: Ratios = Ratios(),
         labels: Labels = Labels(), down: Collection[str] = (),
         member_of: Mapping[str, Collection[str]] | None = None) -> Report:
    """Make the providers what the nodes are: create, update, and delete those of nodes that left (kept,
    disabled, while allocations remain); ``down``: the nodes whose compute service is forced down;
    ``member_of``: the uuids of the host aggregates each node is in. A generation conflict (someone else wrote meanwhile) is tried once
    more; other errors propagate."""
    report = Report()
    nodes = list(nodes)
    for node in nodes:
        try:
            _converge(placement, node, ratios, labels, report, down, member_of)
        except errors.PlacementConflict as exc:
            if not exc.concurrent_update:
                raise
            _converge(placement, node, ratios, labels, report, down, member_of)
    present = {provider_uuid(n["metadata"]["name"]) for n in nodes}
    for provider in placement.providers(required=MARKER_TRAIT):
        if provider["uuid"] not in present:
            _retire(placement, provider, report)
    for what in ("created", "updated", "deleted"):
        if getattr(report, what):
            LOG.info("resource providers %s: %s", what, ", ".join(getattr(report, what)))
    return report


def sync_from_conf(placement: PlacementClient, cluster: Any, conf: Any, down: Collection[str] = (),
                   member_of: Mapping[str, Collection[str]] | None = None) -> Report | None:
    """One pass over the cluster's nodes (``cluster``: the gateway) with the site's options (``down``: the
    nodes whose compute service is forced down); errors are logged, None returned."""
    try:
        return sync(placement, cluster.nodes(), Ratios.from_conf(conf), labels_from_conf(conf), down, member_of)
    except Exception as exc:  # noqa: BLE001 - a failed pass must not stop the controller
        LOG.warning("resource providers not updated: %s", exc)
        return None


def labels_from_conf(conf: Any) -> Labels:
    return Labels(conf.kubevirt.trait_label_prefix, conf.kubevirt.aggregate_label_prefix,
                  conf.default_availability_zone)
