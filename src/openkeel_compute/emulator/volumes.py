"""PersistentVolumes and the claims bound to them, as Kubernetes' API server and its volume controllers keep them.

- **Admission**: new claims and volumes get their protection finalizer (``kubernetes.io/pvc-protection``,
  ``kubernetes.io/pv-protection``) and defaults (``volumeMode: Filesystem``; a volume's reclaim policy
  ``Retain``); a volume needs a capacity, access modes and exactly one source (csi, iscsi, nfs, hostPath,
  local, fc) with its required fields; a claim's request cannot go below its capacity.
- **Binding** (the PV controller): a claim naming a volume (``spec.volumeName``) binds to it when the volume is
  Available (or pre-bound to that claim by ``claimRef``), large enough, with the claim's access modes, class
  and volume mode; a claim without one binds to a volume pre-bound to it, else to the smallest matching
  Available volume of its class. Both sides say so: the volume's ``claimRef`` (with the claim's uid) and
  phase Bound, the claim's ``volumeName``, phase Bound, capacity and access modes, and the annotations
  ``pv.kubernetes.io/bind-completed`` / ``bound-by-controller``. Otherwise the claim stays Pending. Dynamic
  provisioning is not modelled (a claim no volume matches stays Pending); DataVolume claims are CDI's
  (bound at once, without a volume object).
- **Release**: a volume whose claim is gone is Released (Retain keeps it so, claimRef and all), or deleted
  (Delete: a CSI driver deletes it; other sources have no deleter: Failed). A bound claim whose volume is gone
  is Lost.
- **Protection**: a claim being deleted waits while a pod that is not finished uses it (launcher and
  hotplug attachment pods name their claims); a volume being deleted waits while it is Bound.
- **Expansion**: a bound claim asking for more grows (its volume's capacity, then the claim's), as with a
  storage class that allows expansion and a resizer that does it on line.
"""

from __future__ import annotations

import copy
from typing import Any

from openkeel_compute.emulator import admission
from openkeel_compute.emulator.store import clone, now
from openkeel_compute.kubevirt.quantity import to_bytes

PVC_FINALIZER = "kubernetes.io/pvc-protection"
PV_FINALIZER = "kubernetes.io/pv-protection"
SOURCES = ("csi", "iscsi", "nfs", "hostPath", "local", "fc")
REQUIRED = {"csi": ("driver", "volumeHandle"), "iscsi": ("targetPortal", "iqn"), "nfs": ("server", "path"),
            "hostPath": ("path",), "local": ("path",)}
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def _storage(obj_part: dict[str, Any] | None) -> int | None:
    value = (obj_part or {}).get("storage")
    try:
        return int(to_bytes(value)) if value is not None else None
    except ValueError:
        return None


def request_of(pvc: dict[str, Any]) -> int | None:
    return _storage(((pvc.get("spec") or {}).get("resources") or {}).get("requests"))


def capacity_of(obj: dict[str, Any]) -> int | None:
    """A volume's spec.capacity, or a claim's status.capacity."""
    if obj.get("kind") == "PersistentVolume":
        return _storage((obj.get("spec") or {}).get("capacity"))
    return _storage((obj.get("status") or {}).get("capacity"))


# -- admission -----------------------------------------------------------------------------------------

def _defaults(review: admission.Review) -> None:
    if review.operation != "CREATE":
        return
    obj = review.obj
    spec = obj.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    finalizer = PV_FINALIZER if review.kind == "PersistentVolume" else PVC_FINALIZER
    if review.kind == "PersistentVolume":
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    finalizers = obj["metadata"].setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)


def _volume_rules(review: admission.Review) -> list[str]:
    spec = review.obj.get("spec") or {}
    errors = []
    if not spec.get("capacity"):
        errors.append("spec.capacity: Required value")
    modes = spec.get("accessModes") or []
    if not modes:
        errors.append("spec.accessModes: Required value")
    for mode in modes:
        if mode not in ACCESS_MODES:
            errors.append(f'spec.accessModes: Unsupported value: "{mode}": supported values: '
                          + ", ".join(f'"{m}"' for m in ACCESS_MODES))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in (None, "Delete", "Recycle", "Retain"):
        errors.append(f'spec.persistentVolumeReclaimPolicy: Unsupported value: "{policy}": supported values: '
                      '"Delete", "Recycle", "Retain"')
    sources = [s for s in SOURCES if spec.get(s) is not None]
    if not sources:
        errors.append("spec: Required value: must specify a volume type")
    for extra in sources[1:]:
        errors.append(f"spec.{extra}: Forbidden: may not specify more than 1 volume type")
    for source in sources[:1]:
        for field in REQUIRED.get(source, ()):
            if not (spec.get(source) or {}).get(field):
                errors.append(f"spec.{source}.{field}: Required value")
    return [admission.FieldError(e) for e in errors]


def _claim_rules(review: admission.Review) -> list[str]:
    if review.operation != "UPDATE" or review.old is None:
        return []
    wanted, have = request_of(review.obj), capacity_of(review.old)
    if wanted is not None and have is not None and wanted < have:
        return [admission.FieldError("spec.resources.requests.storage: Forbidden: field can not be less than "
                                     "status.capacity")]
    return []


for _kind in ("PersistentVolume", "PersistentVolumeClaim"):
    admission.MUTATORS.setdefault(_kind, []).append(_defaults)
admission.register("PersistentVolume", _volume_rules)
admission.register("PersistentVolumeClaim", _claim_rules)


# -- the controllers -----------------------------------------------------------------------------------

def claims_in_use(store: Any) -> set[tuple[str | None, str]]:
    """(namespace, claim) of every claim a pod that is not finished names."""
    used = set()
    for (_plural, ns, _name), pod in store.objects.of_kind("pods").items():
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                used.add((ns, claim))
    return used


class Binder:
    """Kubernetes' PV controller, resizer and protection controllers, one object at a time."""

    def __init__(self, lifecycle: Any) -> None:
        self.lifecycle = lifecycle
        self.store = lifecycle.store

    def _put(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.store.put(obj)

    # -- claims ----------------------------------------------------------------------------------------

    def claim(self, pvc: dict[str, Any], clock: float | None = None) -> None:
        meta = pvc["metadata"]
        if meta.get("deletionTimestamp"):
            if PVC_FINALIZER in (meta.get("finalizers") or ()) and \
                    (meta.get("namespace"), meta["name"]) not in claims_in_use(self.store):
                self._release_finalizer(pvc, PVC_FINALIZER)
            return
        if PVC_FINALIZER not in (meta.get("finalizers") or ()) and (pvc.get("status") or {}).get("phase") == "Bound" \
                and not (pvc.get("spec") or {}).get("volumeName"):
            self.lifecycle._expand(pvc)  # a DataVolume's claim (CDI's): no volume object behind it
            return
        status = pvc.get("status") or {}
        if status.get("phase") == "Bound":
            self._bound_claim(pvc)
            return
        volume = self._volume_for(pvc)
        if volume is not None:
            self._bind(volume, pvc)
        elif status.get("phase") != "Pending":
            self._put({**pvc, "status": {"phase": "Pending"}})
        # an unbound claim is looked at on every pass: a volume may come

    def _bound_claim(self, pvc: dict[str, Any]) -> None:
        name = (pvc.get("spec") or {}).get("volumeName")
        volume = self.store.lookup("PersistentVolume", name) if name else None
        if volume is None:
            self._put({**pvc, "status": {**(pvc.get("status") or {}), "phase": "Lost"}})
            return
        wanted = request_of(pvc)
        key = ("persistentvolumes", None, name)
        if wanted is not None and wanted > (capacity_of(volume) or 0):  # the resizer grows the volume first
            quantity = pvc["spec"]["resources"]["requests"]["storage"]
            self._put({**volume, "spec": {**volume["spec"], "capacity": {**volume["spec"]["capacity"],
                                                                         "storage": quantity}}})
            return
        if wanted is not None and wanted > (capacity_of(pvc) or 0):  # then the claim shows it
            status = clone(pvc["status"])
            status["capacity"] = {**(status.get("capacity") or {}), "storage": volume["spec"]["capacity"]["storage"]}
            self._put({**pvc, "status": status})
            return
        self.lifecycle._settle(pvc, key)  # looked at again once its volume changes or goes

    def _matches(self, volume: dict[str, Any], pvc: dict[str, Any]) -> bool:
        vspec, cspec = volume.get("spec") or {}, pvc.get("spec") or {}
        ref = vspec.get("claimRef")
        if ref and (ref.get("name") != pvc["metadata"]["name"] or ref.get("namespace") != pvc["metadata"].get(
                "namespace") or ref.get("uid") not in (None, "", pvc["metadata"]["uid"])):
            return False
        if (volume.get("status") or {}).get("phase") not in (None, "Available", "Pending") and not ref:
            return False
        if (vspec.get("storageClassName") or "") != (cspec.get("storageClassName") or ""):
            return False
        if (vspec.get("volumeMode") or "Filesystem") != (cspec.get("volumeMode") or "Filesystem"):
            return False
        if not set(cspec.get("accessModes") or ()) <= set(vspec.get("accessModes") or ()):
            return False
        return (request_of(pvc) or 0) <= (capacity_of(volume) or 0)

    def _volume_for(self, pvc: dict[str, Any]) -> dict[str, Any] | None:
        name = (pvc.get("spec") or {}).get("volumeName")
        if name:
            volume = self.store.lookup("PersistentVolume", name)
            return volume if volume is not None and self._matches(volume, pvc) else None
        volumes = [v for v in self.store.objects.of_kind("persistentvolumes").values()
                   if not v["metadata"].get("deletionTimestamp") and self._matches(v, pvc)]
        prebound = [v for v in volumes if (v.get("spec") or {}).get("claimRef")]
        if prebound:
            return prebound[0]
        return min(volumes, key=lambda v: (capacity_of(v) or 0, v["metadata"]["name"]), default=None)

    def _bind(self, volume: dict[str, Any], pvc: dict[str, Any]) -> None:
        vmeta, cmeta = clone(volume["metadata"]), clone(pvc["metadata"])
        vspec, cspec = copy.deepcopy(volume["spec"]), copy.deepcopy(pvc["spec"])
        if not vspec.get("claimRef"):
            vmeta.setdefault("annotations", {})[BOUND_BY_CONTROLLER] = "yes"
        vspec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": cmeta.get("namespace"),
                             "name": cmeta["name"], "uid": cmeta["uid"], "apiVersion": "v1",
                             "resourceVersion": cmeta["resourceVersion"]}
        self._put({**volume, "metadata": vmeta, "spec": vspec,
                   "status": {"phase": "Bound", "lastPhaseTransitionTime": now()}})
        annotations = cmeta.setdefault("annotations", {})
        if not cspec.get("volumeName"):
            cspec["volumeName"] = volume["metadata"]["name"]
            annotations[BOUND_BY_CONTROLLER] = "yes"
        annotations[BIND_COMPLETED] = "yes"
        self._put({**pvc, "metadata": cmeta, "spec": cspec, "status": {
            "phase": "Bound", "accessModes": list(vspec.get("accessModes") or ()),
            "capacity": dict(vspec.get("capacity") or {})}})

    # -- volumes ---------------------------------------------------------------------------------------

    def volume(self, pv: dict[str, Any], clock: float | None = None) -> None:
        meta, spec = pv["metadata"], pv.get("spec") or {}
        phase = (pv.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            if PV_FINALIZER in (meta.get("finalizers") or ()) and phase != "Bound":
                self._release_finalizer(pv, PV_FINALIZER)
            if phase != "Bound":
                return
        ref = spec.get("claimRef")
        claim = self.store.lookup("PersistentVolumeClaim", ref.get("name", ""), ref.get("namespace")) if ref else None
        if ref and ref.get("uid") and (claim is None or claim["metadata"]["uid"] != ref["uid"]):
            self._released(pv, phase)
            return
        wanted = "Bound" if ref and ref.get("uid") else "Available"
        if phase != wanted:
            self._put({**pv, "status": {"phase": wanted, "lastPhaseTransitionTime": now()}})
        elif wanted == "Bound":  # looked at again once its claim changes or goes
            self.lifecycle._settle(pv, ("persistentvolumeclaims", ref.get("namespace"), ref.get("name")))
        elif not ref:
            self.lifecycle._settle(pv)

    def _released(self, pv: dict[str, Any], phase: str | None) -> None:
        policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if phase != "Released" and phase != "Failed":
            self._put({**pv, "status": {"phase": "Released", "lastPhaseTransitionTime": now()}})
            return
        if policy == "Delete" and phase == "Released":
            if (pv.get("spec") or {}).get("csi") is not None:  # the CSI driver's provisioner deletes it
                key = ("persistentvolumes", None, pv["metadata"]["name"])
                self.store._remove(key)
                return
            name = pv["metadata"]["name"]
            self._put({**pv, "status": {
                "phase": "Failed", "lastPhaseTransitionTime": now(),
                "message": f'error getting deleter volume plugin for volume "{name}": no deletable volume plugin '
                           "matched"}})
            return
        self.lifecycle._settle(pv)

    def _release_finalizer(self, obj: dict[str, Any], finalizer: str) -> None:
        meta = clone(obj["metadata"])
        meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != finalizer]
        key = ("persistentvolumes" if obj["kind"] == "PersistentVolume" else "persistentvolumeclaims",
               meta.get("namespace") if obj["kind"] != "PersistentVolume" else None, meta["name"])
        if meta["finalizers"]:
            self._put({**obj, "metadata": meta})
        else:
            self.store._remove(key)
