"""Live migration: VirtualMachineInstanceMigration, its admission and KubeVirt v1.9's migration controller,
virt-handler's part of it (the VMI's ``status.migrationState``), the LiveMigratable rule, MigrationPolicies.

Phases (``Delays.migration_step`` each unless said): Pending → Scheduling (the target pod is created; it is
scheduled as any launcher pod, with the migration's ``addedNodeSelector`` and away from the VMI's own pods, in
``Delays.scheduling``; one that cannot be scheduled fails the migration after ``Delays.migration_unschedulable``,
KubeVirt's 5 minutes) → Scheduled → PreparingTarget (the VMI's ``migrationState`` handed to the target:
migrationUid, sourceNode, targetNode, sourcePod, targetPod, migrationConfiguration, migrationPolicyName) →
TargetReady (targetNodeAddress) → Running (startTimestamp, mode PreCopy; the VM reads Migrating) → Succeeded
after ``Delays.migration_transfer`` (completed, endTimestamp, the VMI on the target node with the target pod;
the source pod Completed). Deleting the migration aborts it (KubeVirt keeps it, finalizer
``kubevirt.io/migrationJobFinalize``, until then): before the handoff it just fails; after, virt-handler aborts
(abortRequested, abortStatus Aborting then Succeeded, failed, failureReason ``Live migration has been aborted``).
Faults: ``migration-stall`` (the guest dirties memory faster than it moves: the pre-copy runs, phase Running,
until its completion timeout, ``completionTimeoutPerGiB`` × the guest memory in GiB (virt-handler's migration
monitor; ``Delays.kubevirt_second`` a second), then with ``allowPostCopy`` the migration switches to PostCopy
and completes, without it is aborted) and ``migration-failure``.
A node lost once the target is handed off (migrator.Migrator._node_lost): the target node not Ready stalls the
transfer and the source aborts it (``Live migration has been aborted``); the target pod gone fails it; the source
node not Ready freezes it until the source pod is gone and the VMI with it fails.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.emulator import admission
from openkeel_compute.emulator.store import clone, now
from openkeel_compute.kubevirt.quantity import to_bytes

FINALIZER = "kubevirt.io/migrationJobFinalize"
VMI_LABEL = "kubevirt.io/vmi-name"
TARGET_LABEL = "kubevirt.io/migrationTargetNodeName"
JOB_LABEL = "kubevirt.io/migrationJobUID"
FINAL = ("Succeeded", "Failed")
HANDED_OFF = ("PreparingTarget", "TargetReady", "Running")
ABORTED = "Live migration has been aborted"
BRIDGE_ANNOTATION = "kubevirt.io/allow-pod-bridge-network-live-migration"
# the cluster's migration configuration (KubeVirt v1.9's defaults)
DEFAULTS = {"allowAutoConverge": False, "allowPostCopy": False, "allowWorkloadDisruption": False,
            "bandwidthPerMigration": "0", "completionTimeoutPerGiB": 150, "nodeDrainTaintKey": "kubevirt.io/drain",
            "parallelMigrationsPerCluster": 5, "parallelOutboundMigrationsPerNode": 2, "progressTimeout": 150,
            "unsafeMigrationOverride": False, "maxDowntimeMs": 900, "utilityVolumesTimeout": 150}
POLICY_FIELDS = ("allowAutoConverge", "allowPostCopy", "allowWorkloadDisruption", "bandwidthPerMigration",
                 "completionTimeoutPerGiB", "maxDowntimeMs")


def completion_timeout(vmi: dict[str, Any], state: dict[str, Any]) -> float:
    """KubeVirt's seconds before a migration that does not converge is switched to post-copy or aborted:
    completionTimeoutPerGiB × the data it moves in GiB (the guest memory; at least 1 GiB's worth is not KubeVirt's:
    it counts fractions, as here)."""
    domain = (vmi.get("spec") or {}).get("domain") or {}
    memory = (domain.get("memory") or {}).get("guest") or ((domain.get("resources") or {}).get("requests") or {}).get(
        "memory") or "0"
    per_gib = (state.get("migrationConfiguration") or {}).get("completionTimeoutPerGiB",
                                                                DEFAULTS["completionTimeoutPerGiB"])
    return float(per_gib) * float(to_bytes(memory)) / 1024**3


def migrating(vmi: dict[str, Any] | None) -> bool:
    """KubeVirt's IsMigrating: started and not ended."""
    state = ((vmi or {}).get("status") or {}).get("migrationState") or {}
    return bool(state.get("startTimestamp")) and not state.get("endTimestamp")


def live_migratable(spec: dict[str, Any], annotations: dict[str, str],
                    volume_status: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """(the LiveMigratable condition, the migration method) as virt-handler computes them."""
    statuses = {s.get("name"): s for s in volume_status}
    block, disks_error = False, None
    for volume in spec.get("volumes") or ():
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName") or (volume.get("dataVolume") or {}).get(
            "name")
        if claim:
            info = (statuses.get(volume.get("name")) or {}).get("persistentVolumeClaimInfo")
            if info is None:
                block, disks_error = True, disks_error or (
                    f"cannot migrate VMI: Unable to determine if PVC {claim} is shared, live migration requires that "
                    "all PVCs must be shared (using ReadWriteMany access mode)")
            elif "ReadWriteMany" not in (info.get("accessModes") or ()):
                block, disks_error = True, disks_error or (
                    f"cannot migrate VMI: PVC {claim} is not shared, live migration requires that all PVCs must be "
                    "shared (using ReadWriteMany access mode)")
        else:
            block = True  # cloud-init, container disks, empty disks: copied along (block migration)
    nets = {n.get("name"): n for n in spec.get("networks") or ()}
    ifaces = ((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or []
    pod_net = next((n for n in nets.values() if n.get("pod") is not None), None)
    iface_error = None
    if ifaces and pod_net is not None:
        primary = next((i for i in ifaces if i.get("name") == pod_net.get("name")), None)
        ok = primary is not None and (primary.get("masquerade") is not None or primary.get("passtBinding") is not None
                                      or (primary.get("bridge") is not None and BRIDGE_ANNOTATION in annotations))
        if primary is None:
            iface_error = f"no primary interface found for network {pod_net.get('name')}"
        elif not ok:
            iface_error = ("cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the "
                           "pod network")
    method = "BlockMigration" if block else "LiveMigration"
    for error, reason in ((iface_error, "InterfaceNotLiveMigratable"), (disks_error, "DisksNotLiveMigratable")):
        if error:
            return ({"type": "LiveMigratable", "status": "False", "lastProbeTime": None, "lastTransitionTime": None,
                     "reason": reason, "message": error}, method)
    return {"type": "LiveMigratable", "status": "True", "lastProbeTime": None, "lastTransitionTime": None}, method


# -- admission -----------------------------------------------------------------------------------------

admission.WEBHOOKS["VirtualMachineInstanceMigration"] = "migration-create-validator.kubevirt.io"
admission.WEBHOOKS["VirtualMachineInstanceMigration/UPDATE"] = "migration-update-validator.kubevirt.io"
admission.WEBHOOKS["MigrationPolicy"] = "migration-policy-validator.kubevirt.io"


def _mutate(review: admission.Review) -> None:
    """KubeVirt's migration mutator: the VMI's name as a label, the finalizer."""
    if review.operation != "CREATE":
        return
    meta = review.obj.setdefault("metadata", {})
    meta.setdefault("labels", {})[VMI_LABEL] = (review.obj.get("spec") or {}).get("vmiName", "")
    meta["finalizers"] = [*(meta.get("finalizers") or ()), FINALIZER]


def _validate(review: admission.Review) -> list[str]:
    spec = review.obj.get("spec") or {}
    if review.operation == "UPDATE":
        if review.old is not None and spec != (review.old.get("spec") or {}):
            return ["update of Migration object's spec is restricted"]
        return []
    name = spec.get("vmiName")
    if not name:
        return ["vmiName is missing"]
    ns = review.obj["metadata"].get("namespace")
    vmi = review.lookup("VirtualMachineInstance", name, ns)
    if vmi is None:
        return [admission.Rejection(f'the VMI "{ns}/{name}" does not exist')]
    status = vmi.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return [admission.Rejection("Cannot migrate VMI in finalized state.")]
    for cond in status.get("conditions") or ():
        if cond.get("type") == "LiveMigratable" and cond.get("status") == "False":
            return [admission.Rejection(f"Cannot migrate VMI, Reason: {cond.get('reason')}, "
                                        f"Message: {cond.get('message')}")]
    for other in review.list("VirtualMachineInstanceMigration", ns):
        if ((other.get("metadata") or {}).get("labels") or {}).get(VMI_LABEL) == name and \
                (other.get("status") or {}).get("phase") not in FINAL:
            return [admission.Rejection(f"in-flight migration detected. Active migration job "
                                        f"({other['metadata']['uid']}) is currently already in progress for VMI "
                                        f"{name}.")]
    return []


admission.MUTATORS.setdefault("VirtualMachineInstanceMigration", []).append(_mutate)
admission.register("VirtualMachineInstanceMigration", _validate)


def configuration(store: Any, vmi: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(the migration configuration, the MigrationPolicy that set it): the policy whose selectors match the
    VMI's and its namespace's labels, the most specific (most labels) first, over the cluster's defaults."""
    labels = vmi["metadata"].get("labels") or {}
    namespace = store.lookup("Namespace", vmi["metadata"].get("namespace") or "") or {}
    ns_labels = {**(namespace.get("metadata", {}).get("labels") or {}),
                 "kubernetes.io/metadata.name": vmi["metadata"].get("namespace")}
    best: tuple[int, str] | None = None
    chosen = None
    for (_p, _ns, name), policy in sorted(store.objects.of_kind("migrationpolicies").items()):
        selectors = (policy.get("spec") or {}).get("selectors") or {}
        wanted_ns = (selectors.get("namespaceSelector") or {})
        wanted_vmi = (selectors.get("virtualMachineInstanceSelector") or {})
        if any(ns_labels.get(k) != v for k, v in wanted_ns.items()) or any(
                labels.get(k) != v for k, v in wanted_vmi.items()):
            continue
        rank = (len(wanted_ns) + len(wanted_vmi), name)
        if best is None or rank[0] > best[0]:
            best, chosen = rank, policy
    config = dict(DEFAULTS)
    if chosen is None:
        return config, None
    for field in POLICY_FIELDS:
        if field in (chosen.get("spec") or {}):
            config[field] = chosen["spec"][field]
    return config, chosen["metadata"]["name"]


def stamp(status: dict[str, Any], phase: str) -> None:
    status["phase"] = phase
    status.setdefault("phaseTransitionTimestamps", []).append({"phase": phase, "phaseTransitionTimestamp": now()})


def abort_condition() -> dict[str, Any]:
    return {"type": "migrationAbortRequested", "status": "True", "lastProbeTime": now(), "lastTransitionTime": None}


def own(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": clone(obj["metadata"]), "status": clone(obj.get("status") or {})}
