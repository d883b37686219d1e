"""What a resize and its revert change in a stopped VirtualMachine, and the waits around it.

Each edit reads the VM, computes a JSON patch that ``test``s what it read before it ``replace``s it (an
object changed in between is refused, and the next pass reads again), and sends it only when something
differs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from openkeel_compute.controller.steps.base import FINAL_PHASES, Context, Wait, vmi_phase
from openkeel_compute.kubevirt.mapping import CLOUD_INIT_DISK, SWAP_DISK
from openkeel_compute.kubevirt.names import server_root_volume, server_user_data_secret, server_vm_name
from openkeel_compute.kubevirt.server import HOSTNAME_LABEL, ServerObjects, require_node
from openkeel_compute.model import sysmeta

LOG = logging.getLogger(__name__)
#: the VM's disks (and volumes) a flavor's ephemeral and swap sizes make
FLAVOR_DISKS = ("ephemeral0", SWAP_DISK)
MATCHERS = ("instancetype", "preference")


def status_ref(vm: dict[str, Any], field: str) -> dict[str, Any]:
    """``status.<field>Ref`` of a VM (where KubeVirt records the revision it froze)."""
    return (vm.get("status") or {}).get(f"{field}Ref") or {}


def resize_nodes(server: dict[str, Any]) -> dict[str, str]:
    """The resize's source and destination nodes (empty: the claim chose none, no Placement)."""
    nodes: dict[str, str] = json.loads((server.get("working_state") or {}).get(sysmeta.RESIZE_NODES) or "{}")
    return nodes


def new_matchers(ctx: Context, server: dict[str, Any], flavor: dict[str, Any],
                 vm: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """The matchers of the VM on ``flavor`` (a flavor copy entry): the server's own instancetype and
    preference of that flavor (and its image), applied in its namespace first, owned by its VM."""
    composed = ctx.objects(server, flavor=flavor)
    apply_sizing(ctx, composed, vm)
    return {field: dict(composed.vm["spec"][field]) for field in MATCHERS}


def drop_unused_sizing(ctx: Context, namespace: str, uuid: str, vm: dict[str, Any]) -> None:
    """Delete the server's own instancetypes and preferences its VM no longer names (a resize's old size
    once confirmed, its new one once reverted), with the ControllerRevisions KubeVirt made of them: only
    the current ones stay beside the VM."""
    spec = vm.get("spec") or {}
    named = {(str((spec.get(f) or {}).get("kind")), str((spec.get(f) or {}).get("name"))) for f in MATCHERS}
    used = {(status_ref(vm, f).get("controllerRevisionRef") or {}).get("name") for f in MATCHERS}
    used |= {(spec.get(f) or {}).get("revisionName") for f in MATCHERS}
    for key in ctx.cluster.sizing_of(namespace, uuid):
        if (key.kind, key.name) not in named:
            # KubeVirt's revisions of it first: deleted after it, a controller killed in between would
            # leave them for good (nothing names the copy any more)
            for revision in ctx.cluster.revisions_of(namespace, key.name):
                if revision.name not in used:
                    ctx.cluster.delete(revision)
            ctx.cluster.delete(key)


def wanted_matchers(ctx: Context, server: dict[str, Any], flavor: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The matchers a VM on ``flavor`` has (nothing applied)."""
    composed = ctx.objects(server, flavor=flavor)
    return {field: dict(composed.vm["spec"][field]) for field in MATCHERS}


def apply_sizing(ctx: Context, objects: ServerObjects, vm: dict[str, Any] | None) -> None:
    """The server's own instancetype and preference, owned by ``vm`` when there is one."""
    for body in objects.owned_by(vm).sizing:
        ctx.cluster.apply(body)


def apply_server(ctx: Context, objects: ServerObjects, vm: dict[str, Any] | None) -> dict[str, Any]:
    """Every object of the server (``vm``: its VirtualMachine as the cluster has it, None when there is
    none yet): the Secrets, its own instancetype and preference, and the VM. A new VM is applied first and
    its instancetype and preference then, already owned by it (one request each: KubeVirt v1.9 admits a
    VM whose instancetype is not there yet and starts it once it is, its ``Failure`` condition
    ``FailedFindInstancetype`` in between). An existing VM gets them before it, owned by it; a VM whose
    matchers name something else (another size, a revert's pinned revision) gets them in one JSON patch
    first: KubeVirt refuses a matcher's new name beside its old revision name, which an apply would keep.
    Returns the VM as the cluster has it."""
    for body in objects.secrets:
        ctx.cluster.apply(body)
    if vm is None:
        made = ctx.cluster.applied(objects.vm)
        apply_sizing(ctx, objects, made)
        return made
    apply_sizing(ctx, objects, vm)
    spec = vm.get("spec") or {}
    patch(ctx, objects.namespace, objects.vm["metadata"]["name"], matcher_patch(
        vm, {f: objects.vm["spec"][f] for f in MATCHERS if spec.get(f) != objects.vm["spec"][f]}))
    made = ctx.cluster.applied(objects.vm)
    if (vm.get("metadata") or {}).get("uid") != (made.get("metadata") or {}).get("uid"):
        apply_sizing(ctx, objects, made)  # made again meanwhile (deleted behind our back): owned by the new one
    return made


def matcher_patch(vm: dict[str, Any], wanted: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """One JSON patch: ``test`` each matcher as read, then set it to ``wanted`` (None: removed)."""
    spec = vm.get("spec") or {}
    ops: list[dict[str, Any]] = []
    for field, value in wanted.items():
        path = f"/spec/{field}"
        if field in spec:
            ops.append({"op": "test", "path": path, "value": spec[field]})
            ops.append({"op": "replace", "path": path, "value": value} if value else {"op": "remove", "path": path})
        elif value:
            ops.append({"op": "add", "path": path, "value": value})
    return ops


def flavor_disks(current: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``current`` disks (or volumes) with the flavor's ephemeral and swap entries of ``wanted`` in place of
    their own, before the cloud-init disk as a boot places them; every other entry kept as it is."""
    keep = [e for e in current if e.get("name") not in FLAVOR_DISKS]
    add = [e for e in wanted if e.get("name") in FLAVOR_DISKS]
    at = next((i for i, e in enumerate(keep) if e.get("name") == CLOUD_INIT_DISK), len(keep))
    return keep[:at] + add + keep[at:]


def patch(ctx: Context, namespace: str, uuid: str, ops: list[dict[str, Any]]) -> None:
    if ops:
        ctx.cluster.patch("VirtualMachine", namespace, server_vm_name(uuid), ops)


def stop(ctx: Context, namespace: str, uuid: str, vmi: dict[str, Any] | None) -> None:
    """Ask a running VMI to stop, and wait (``Wait``) until the VM has none."""
    phase = vmi_phase(vmi)
    if phase is not None and phase not in FINAL_PHASES:
        ctx.cluster.subresource(namespace, server_vm_name(uuid), "stop")
        raise Wait("waiting for the server's virtual machine to stop")
    if phase is not None:
        raise Wait("waiting for the stopped VMI to go")


def start_if_stopped(ctx: Context, namespace: str, uuid: str, vm: dict[str, Any], vmi: dict[str, Any] | None) -> None:
    status = vm.get("status") or {}
    if vmi is None and not status.get("stateChangeRequests"):
        ctx.cluster.subresource(namespace, server_vm_name(uuid), "start")


def grow_root_disk(ctx: Context, namespace: str, uuid: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Ask for the larger root disk (PVC expansion); a disk never shrinks."""
    if int(new.get("root_gb") or 0) <= int(old.get("root_gb") or 0):
        return
    root = server_root_volume(server_vm_name(uuid))
    body = {"spec": {"resources": {"requests": {"storage": f"{int(new['root_gb'])}Gi"}}}}
    if not ctx.cluster.patch("PersistentVolumeClaim", namespace, root, body, patch="merge"):
        LOG.warning("server %s: no claim %s to grow", uuid, root)


def pinned_node(vm: dict[str, Any]) -> str | None:
    """The node the VM's required node affinity names on kubernetes.io/hostname (None: not pinned)."""
    tspec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
    terms = ((((tspec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
              or {}).get("nodeSelectorTerms")) or []
    for term in terms:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == HOSTNAME_LABEL and expr.get("operator") == "In" and len(expr.get("values") or []) == 1:
                return str(expr["values"][0])
    return None


def pin(ctx: Context, namespace: str, uuid: str, vm: dict[str, Any], node: str) -> None:
    """Point the VM's required node affinity on kubernetes.io/hostname at ``node`` (a stopped VM: its
    next VMI is scheduled there)."""
    tspec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
    affinity = tspec.get("affinity")
    wanted = json.loads(json.dumps(affinity or {}))
    terms = (((wanted.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
             .get("nodeSelectorTerms"))
    if terms:
        for term in terms:
            exprs = [e for e in term.get("matchExpressions") or [] if e.get("key") != HOSTNAME_LABEL]
            term["matchExpressions"] = [*exprs, {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]
    else:
        holder = {"affinity": wanted}
        require_node(holder, node)
        wanted = holder["affinity"]
    if wanted == affinity:
        return
    path = "/spec/template/spec/affinity"
    ops = ([{"op": "test", "path": path, "value": affinity}, {"op": "replace", "path": path, "value": wanted}]
           if affinity is not None else [{"op": "add", "path": path, "value": wanted}])
    patch(ctx, namespace, uuid, ops)


def set_flavor_disks(ctx: Context, namespace: str, uuid: str, server: dict[str, Any], vm: dict[str, Any],
                     flavor: dict[str, Any]) -> None:
    """Give the stopped VM the ephemeral and swap disks of ``flavor`` (a flavor copy entry) as a boot
    composes them: emptyDisks grown, shrunk, added or removed (each start gets them blank, so their
    size is the VM's to change), and the user data with or without the swap lines."""
    composed = ctx.objects(server, flavor=flavor)
    want_spec = composed.vm["spec"]["template"]["spec"]
    tspec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
    ops: list[dict[str, Any]] = []
    for path, current, wanted in (
            ("/spec/template/spec/domain/devices/disks", ((tspec.get("domain") or {}).get("devices") or {})
             .get("disks") or [], want_spec["domain"]["devices"]["disks"]),
            ("/spec/template/spec/volumes", tspec.get("volumes") or [], want_spec["volumes"])):
        merged = flavor_disks(current, wanted)
        if merged != current:
            ops += [{"op": "test", "path": path, "value": current}, {"op": "replace", "path": path, "value": merged}]
    secret = server_user_data_secret(uuid)
    for body in composed.secrets:
        if (body.get("metadata") or {}).get("name") == secret:
            ctx.cluster.apply(body)
    patch(ctx, namespace, uuid, ops)
