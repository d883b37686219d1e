"""What KubeVirt's and CDI's controllers do, run by the emulator between requests.

One pass (``Lifecycle.step``) looks at every object and moves it on when its time has come:

- VirtualMachine: finalizer; ControllerRevisions of its instancetype and preference recorded in
  ``status.instancetypeRef`` / ``preferenceRef``; its DataVolumes from ``dataVolumeTemplates``;
  start and stop requests (``status.stateChangeRequests``) creating or stopping its VMI; status
  (printableStatus, ready, created, conditions) derived from VMI and DataVolumes as KubeVirt does;
  on deletion the VMI goes first, then the finalizer.
- VirtualMachineInstance: Pending → Scheduling → Scheduled → Running, with node, launcher pod and a
  pod-network IP in ``status.interfaces``; stopping ends in Succeeded and the object goes away, with its
  pod. The pods and the guest's console log are launcher.py's.
- DataVolume: Pending → ImportScheduled → ImportInProgress (progress) → Succeeded (CDI v1.64 phases). The
  importer pod reads the HTTP source (importer.py); a source it cannot read leaves the DataVolume
  ImportInProgress with Running=False (reason Error, the importer's message) while the pod waits out
  kubelet's back-off, then restarts it (``status.restartCount`` grows), as CDI does for a failing import.
- Garbage collection: objects whose owners are all gone are deleted.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from typing import Any

from openkeel_compute.emulator import disks, migrations, networks, nodes, scheduling
from openkeel_compute.emulator.faults import IMPORT_MESSAGE, UNSCHEDULABLE_MESSAGE, Fault
from openkeel_compute.emulator.importer import Importer, source_of
from openkeel_compute.emulator.launcher import Launchers
from openkeel_compute.emulator.migrator import Migrator
from openkeel_compute.emulator.nodes import NodeLifecycle
from openkeel_compute.emulator.resources import BY_KIND
from openkeel_compute.emulator.running import RESTART_MESSAGE, Running
from openkeel_compute.emulator.snapshots import Snapshots
from openkeel_compute.emulator.store import Store, condition, new_uid, now, own_copy
from openkeel_compute.emulator.volumes import Binder

VM_FINALIZER = "kubevirt.io/virtualMachineControllerFinalize"
VMI_FINALIZERS = ["kubevirt.io/virtualMachineControllerFinalize", "kubevirt.io/foregroundDeleteVirtualMachine"]
NODE = "emulated-node-1"
#: the access modes CDI's StorageProfile of the built-in storage class gives a DataVolume that names none:
#: shared storage (as a Ceph RBD or NFS class), so a server's root disk does not keep it from live migrating
STORAGE_PROFILE_ACCESS_MODES = ("ReadWriteMany",)
CLUSTER_IT, IT = "VirtualMachineClusterInstancetype", "VirtualMachineInstancetype"
CLUSTER_PREF, PREF = "VirtualMachineClusterPreference", "VirtualMachinePreference"


@dataclasses.dataclass(frozen=True)
class Delays:
    """Seconds each step takes. The defaults are what a small real cluster shows."""

    import_scheduled: float = 2.0  # DataVolume Pending → ImportScheduled → ImportInProgress
    import_duration: float = 10.0  # ImportInProgress → Succeeded
    pending: float = 0.5  # VMI Pending → Scheduling (launcher pod created)
    scheduling: float = 3.0  # Scheduling → Scheduled (pod scheduled and running)
    scheduled: float = 1.5  # Scheduled → Running (domain started)
    stopping: float = 2.0  # VMI asked to stop → Succeeded and gone
    progress_every: float = 1.0  # an import's status.progress is brought up to date this often
    hotplug: float = 1.0  # each step of an interface's or a volume's hot(un)plug
    migration_step: float = 1.0  # each step of a live migration before its memory transfer
    migration_transfer: float = 5.0  # a live migration's memory transfer (Running → Succeeded)
    # a node NotReady: its pods are evicted after the default NoExecute toleration, virt-handler's heartbeat
    # is stale after KubeVirt's timeout; a migration target that cannot be scheduled fails after this
    pod_eviction: float = 300.0
    heartbeat_timeout: float = 300.0
    migration_unschedulable: float = 300.0
    snapshot: float = 1.0  # a VirtualMachineSnapshot InProgress → Succeeded (readyToUse)
    # one second of KubeVirt's own migration timeouts (completionTimeoutPerGiB): a migration that does not
    # converge runs completionTimeoutPerGiB × its data in GiB of these before post-copy or the abort
    kubevirt_second: float = 1.0
    # kubelet's first back-off before it restarts a failed importer container (doubling each time, at most
    # import_backoff_max), as for any container of a pod that restarts on failure
    import_backoff: float = 10.0
    import_backoff_max: float = 300.0

    @classmethod
    def fast(cls) -> Delays:
        """Quick enough for tests, still with every phase visible for a moment."""
        return cls(0.02, 0.05, 0.01, 0.02, 0.02, 0.02, 0.01, hotplug=0.02, migration_step=0.02,
                   migration_transfer=0.05, pod_eviction=0.1, heartbeat_timeout=0.1, migration_unschedulable=0.2,
                   snapshot=0.02, kubevirt_second=0.002, import_backoff=0.02, import_backoff_max=0.1)

    @classmethod
    def from_scale(cls, scale: float) -> Delays:
        base = cls()
        return cls(**{f.name: getattr(base, f.name) * scale for f in dataclasses.fields(cls)})




def _importer_stopped(dv: dict[str, Any]) -> bool:
    """KubeVirt's test of a DataVolume in error besides phase Failed: its importer stopped running on an
    error (Running=False, reason Error or ImagePullFailed), while CDI restarts it."""
    running = next((c for c in (dv.get("status") or {}).get("conditions") or () if c.get("type") == "Running"), {})
    return running.get("status") == "False" and running.get("reason") in ("Error", "ImagePullFailed")


def _bound(name: str) -> dict[str, Any]:
    """A DataVolume's Bound condition once its claim is bound."""
    return condition("Bound", "True", "Bound", f"PVC {name} Bound")


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


class Lifecycle:
    def __init__(self, store: Store, delays: Delays, faults: list[Fault], importer: Importer | None = None) -> None:
        self.store = store
        self.delays = delays
        self.faults = faults
        self.importer = importer or Importer()
        self.launchers = Launchers(store, NODE)
        self.since: dict[str, float] = {}  # uid -> monotonic time the object entered its current phase
        self.ips = 0
        self._collected: tuple[int, int] | None = None  # the store's (rv, size) at the last namespace pass
        self._emptied: dict[str, float] = {}  # terminating namespaces found empty -> when
        # Objects whose last pass changed nothing and would change nothing again until something they
        # read is written: skipped by the passes (a thousand settled servers cost nothing). ``_settled``:
        # their keys; ``_read_by``: the keys of the settled objects that read each object (a VM: itself, its VMI, its
        # DataVolumes), so that writing any of them has the VM looked at again.
        self._settled: set[tuple] = set()
        self._read_by: dict[tuple, set[tuple]] = {}
        self._places: dict[str, tuple[str | None, str]] = {}  # VMI uid -> _place's answer, until a node changes
        self.running = Running(self)
        self.binder = Binder(self)
        self.migrator = Migrator(self)
        self.nodes = NodeLifecycle(self)
        self.snapshots = Snapshots(self)

    # -- helpers -------------------------------------------------------------------------------------

    def _fault(self, kind: str, namespace: str | None, *names: str | None) -> Fault | None:
        for fault in self.faults:
            if fault.kind == kind and fault.targets(namespace, *names):
                return fault
        return None

    def _due(self, obj: dict[str, Any], delay: float, clock: float) -> bool:
        uid = obj["metadata"]["uid"]
        start = self.since.get(uid)
        if start is None:
            start = self.since[uid] = clock
            self.store.note(("since", uid, clock))
        return clock - start >= delay

    def due_key(self, key: str, delay: float, clock: float) -> bool:
        """Like _due for a step that is not an object's phase (``key``: "<uid>/<what>"); the first call starts
        the wait."""
        start = self.since.get(key)
        if start is None:
            self.mark(key, clock)
            return delay <= 0
        return clock - start >= delay

    def mark(self, key: str, clock: float | None) -> None:
        """A step keyed ``key`` happened at ``clock`` (None: nothing under way any more)."""
        if clock is None:
            if self.since.pop(key, None) is not None:
                self.store.note(("since", key, None))
            return
        self.since[key] = clock
        self.store.note(("since", key, clock))

    def _moved(self, obj: dict[str, Any], clock: float) -> None:
        uid = obj["metadata"]["uid"]
        self.since[uid] = clock
        self.store.note(("since", uid, clock))  # a restarted cluster goes on from the same moment
        self._places.pop(uid, None)

    def _write(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.store.put(obj)

    def _place(self, spec: dict[str, Any], namespace: str | None = None, labels: dict[str, str] | None = None
               ) -> tuple[str | None, str]:
        """(the node a pod of this spec goes to, or None with kube-scheduler's Unschedulable message):
        scheduling.choose over the nodes (the cluster's first node wins a tie) and the pods bound to them,
        with the ``kubevirt.io/schedulable: "true"`` node selector KubeVirt gives every launcher pod."""
        spec = {**spec, "nodeSelector": {**(spec.get("nodeSelector") or {}), "kubevirt.io/schedulable": "true"}}
        nodes = list(self.store.objects.of_kind("nodes").values())
        pods = self.launchers.bound_pods() if scheduling.uses_pod_affinity(spec) or self.launchers.anti_affinity \
            else []
        return scheduling.choose(spec, nodes, pods, namespace, labels, first=NODE)

    def _children(self, kind: str, owner: dict[str, Any]) -> list[dict[str, Any]]:
        plural = BY_KIND[kind].plural
        uid = owner["metadata"]["uid"]
        return [o for o in list(self.store.objects.of_kind(plural).values())
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or ())]

    def _address_for(self, vmi: dict[str, Any]) -> str:
        """The launcher pod's address: the one the pod asks its network plugin for (Calico's
        ``cni.projectcalico.org/ipAddrs``, Kube-OVN's ``ovn.kubernetes.io/ip_address``; KubeVirt hands the
        VMI's annotations to its pod) when no other live pod holds it, else the next free one."""
        annotations = vmi["metadata"].get("annotations") or {}
        asked = annotations.get("ovn.kubernetes.io/ip_address", "").split(",")[0]
        try:
            asked = (json.loads(annotations["cni.projectcalico.org/ipAddrs"]) or [""])[0]
        except (KeyError, ValueError, TypeError, IndexError):
            pass
        held = {(p.get("status") or {}).get("podIP") for p in self.store.objects.of_kind("pods").values()
                if not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
        return asked if asked and asked not in held else self.next_ip()

    def next_ip(self) -> str:
        self.ips += 1
        self.store.note(("ips", self.ips))
        return f"10.244.{self.ips // 250}.{self.ips % 250 + 2}"

    def restore(self, since: dict[str, float], ips: int, consoles: dict[str, tuple[int, list[str]]]) -> None:
        """Go on from a cluster read back from disk: ``since`` maps an object's uid to the wall-clock time
        (time.time()) it entered its phase, so a phase under way ends when it would have; addresses go on
        after the highest ever handed out (``ips``, or the highest a VMI shows); the launcher pods keep
        the console text they printed (``consoles``)."""
        offset = time.time() - time.monotonic()
        self.since = {uid: at - offset for uid, at in since.items()}
        seen = [iface.get("ipAddress") for vmi in self.store.objects.of_kind("virtualmachineinstances").values()
                for iface in (vmi.get("status") or {}).get("interfaces") or ()]
        seen += [(pod.get("status") or {}).get("podIP") for pod in self.store.objects.of_kind("pods").values()]
        for address in seen:
            parts = str(address or "").split(".")
            if len(parts) == 4 and parts[:2] == ["10", "244"] and all(p.isdigit() for p in parts[2:]):
                ips = max(ips, int(parts[2]) * 250 + int(parts[3]) - 2)
        self.ips = ips
        self.launchers.restore(consoles)

    # -- one pass ------------------------------------------------------------------------------------

    def step(self, clock: float | None = None) -> None:
        """One pass of the controllers. The store is locked object by object, not for the whole pass: the
        API server answers between two objects, as a real one does while its controllers work (an object
        written since the pass began is left for the next pass)."""
        clock = time.monotonic() if clock is None else clock
        store = self.store
        objects = store.objects
        for plural, one in (("nodes", self.nodes.node), ("datavolumes", self._datavolume),
                            ("persistentvolumes", self.binder.volume),
                            ("persistentvolumeclaims", self.binder.claim),
                            ("virtualmachineinstancemigrations", self.migrator.step),
                            ("virtualmachineinstances", self._vmi), ("virtualmachines", self._vm),
                            ("virtualmachinesnapshots", self.snapshots.snapshot),
                            ("virtualmachineexports", self.snapshots.export)):
            with store.lock:
                self._forget_settled(objects.take_touched())
                if plural == "virtualmachineinstances" and self.faults:  # a fault may act on any VMI
                    todo = list(objects.of_kind(plural).items())
                else:
                    todo = [(key, obj) for key, obj in objects.of_kind(plural).items() if key not in self._settled]
            for key, obj in todo:
                with store.lock:
                    if objects.get(key) is obj:
                        one(obj, clock)
        if objects.nodes_removed:
            with store.lock:
                # a node removed and registered again since is a node that exists
                gone = {name for name in objects.nodes_removed if ("nodes", None, name) not in objects}
                objects.nodes_removed.clear()
                if gone:
                    self._nodes_removed(gone, clock)
        with store.lock:
            # Garbage can only be an object written with owners or one whose owner was removed (the
            # store keeps those aside); terminating namespaces only appear through a change of the store,
            # and an emptied one goes a moment later.
            self._collect_garbage()
            self.snapshots.forget_data()
            version = (store.rv, len(objects))
            if version != self._collected or self._emptied:
                self._collected = version
                self._namespaces(clock)

    def _forget_settled(self, touched: set[tuple]) -> None:
        """What was written or removed is looked at again, and so is every VM that read it; a node that
        came, changed or went has everything looked at again (what runs on it may have to move on)."""
        if any(key[0] == "nodes" for key in touched):
            self._places.clear()
            self._settled.clear()
            self._read_by.clear()
            return
        self._settled -= touched
        for key in touched:
            self._settled.difference_update(self._read_by.pop(key, ()))

    def _settle(self, obj: dict[str, Any], *reads: tuple) -> None:
        """The object's pass changed nothing, and none will until the object (or one of the objects whose
        keys ``reads`` gives) is written again."""
        meta = obj["metadata"]
        key = (BY_KIND[obj["kind"]].plural, meta.get("namespace"), meta["name"])
        self._settled.add(key)
        for read in reads:
            self._read_by.setdefault(read, set()).add(key)

    def _namespaces(self, clock: float) -> None:
        terminating = {name for (_plural, _ns, name), obj in self.store.objects.of_kind("namespaces").items()
                       if obj["metadata"].get("deletionTimestamp")}
        if not terminating:
            self._emptied.clear()
            return
        left: set[str] = set()
        for (plural, ns, name), obj in list(self.store.objects.items()):
            if ns in terminating:
                left.add(ns)
                if not obj["metadata"].get("deletionTimestamp"):
                    self.store.delete(BY_KIND[obj["kind"]], ns, name, None, {})
        for name in terminating - left:
            # as Kubernetes' namespace controller, which finalizes an emptied namespace on its next sync
            if clock - self._emptied.setdefault(name, clock) >= self.delays.stopping:
                self._emptied.pop(name)
                self.store._remove(("namespaces", None, name))

    # -- PersistentVolumeClaims ------------------------------------------------------------------------

    def _claim(self, dv: dict[str, Any]) -> None:
        """The DataVolume's claim (same name, owned by it), bound at the size the DataVolume asks for."""
        ns, name = dv["metadata"].get("namespace"), dv["metadata"]["name"]
        if self.store.lookup("PersistentVolumeClaim", name, ns) is not None:
            return
        storage = (dv.get("spec") or {}).get("storage") or (dv.get("spec") or {}).get("pvc") or {}
        size = ((storage.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        modes = list(storage.get("accessModes") or STORAGE_PROFILE_ACCESS_MODES)
        self._write({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": name, "namespace": ns, "ownerReferences": [_owner(dv)],
                                  "labels": dict(dv["metadata"].get("labels") or {})},
                     "spec": {"accessModes": modes, "resources": {"requests": {"storage": size}},
                              "volumeMode": storage.get("volumeMode") or "Filesystem"},
                     "status": {"phase": "Bound", "accessModes": modes, "capacity": {"storage": size}}})

    def _expand(self, pvc: dict[str, Any], _clock: float | None = None) -> None:
        """A claim asked for more than it has grows to it (a storage class that allows expansion)."""
        wanted = ((pvc.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")
        status = pvc.get("status") or {}
        if wanted and (status.get("capacity") or {}).get("storage") != wanted:
            new = own_copy(pvc)
            new["status"]["capacity"] = {"storage": wanted}
            self._write(new)
        else:
            self._settle(pvc)

    # -- DataVolumes (CDI) ---------------------------------------------------------------------------

    def _datavolume(self, dv: dict[str, Any], clock: float) -> None:
        status = dv.get("status") or {}
        phase = status.get("phase")
        ns = dv["metadata"].get("namespace")
        owners = [r.get("name") for r in dv["metadata"].get("ownerReferences") or ()]
        if phase in ("Succeeded", "Failed"):
            self._settle(dv)
            return
        # A pass that finds nothing due changes nothing: it leaves before the DataVolume is copied.
        if phase == "Pending" and not self._due(dv, self.delays.import_scheduled / 2, clock):
            return
        if phase == "ImportScheduled" and not self._due(dv, self.delays.import_scheduled / 2, clock):
            return
        if phase not in (None, "Pending", "ImportScheduled", "ImportInProgress"):
            return
        fault = self._fault("import-failure", ns, dv["metadata"]["name"], *owners) if self.faults else None
        if phase == "ImportInProgress" and fault is None:
            self._import_attempt(dv, status, clock)
            return
        new = own_copy(dv)
        if phase is None:
            new["status"] = {"phase": "Pending", "progress": "N/A", "claimName": dv["metadata"]["name"],
                             "conditions": [condition("Bound", "False", "Pending", "PVC Pending"),
                                            condition("Ready", "False"), condition("Running", "False")]}
        elif phase == "Pending" and self._due(dv, self.delays.import_scheduled / 2, clock):
            self._claim(dv)
            new["status"].update(phase="ImportScheduled", conditions=[
                _bound(dv["metadata"]["name"]),
                condition("Ready", "False"), condition("Running", "False", "Pending")])
        elif phase == "ImportScheduled" and self._due(dv, self.delays.import_scheduled / 2, clock):
            missing = self._missing_secrets(dv)
            if missing:  # the importer pod cannot mount them: it waits, as on a real cluster
                message = f'MountVolume.SetUp failed for volume "{missing[0]}": secret "{missing[0]}" not found'
                running = (new["status"].get("conditions") or [{}])[-1]
                if running.get("message") == message:
                    return
                new["status"]["conditions"] = [
                    _bound(dv["metadata"]["name"]),
                    condition("Ready", "False"), condition("Running", "False", "Pending", message)]
                self._write(new)
                return
            new["status"].update(phase="ImportInProgress", progress="0.00%", conditions=[
                _bound(dv["metadata"]["name"]),
                condition("Ready", "False", "TransferRunning"), condition("Running", "True", "Pod is running")])
        elif phase == "ImportInProgress" and fault is not None:
            # an import CDI gives up on (a fatal error, as a checksum that does not match): phase Failed
            new["status"].update(phase="Failed", restartCount=1, conditions=[
                _bound(dv["metadata"]["name"]),
                condition("Ready", "False", fault.reason or "Error", fault.message or IMPORT_MESSAGE),
                condition("Running", "False", fault.reason or "Error", fault.message or IMPORT_MESSAGE)])
        else:
            return
        self._moved(dv, clock)
        self._write(new)

    def _import_attempt(self, dv: dict[str, Any], status: dict[str, Any], clock: float) -> None:
        """An import under way: the importer pod reads the source (importer.py) while the progress grows;
        Succeeded once both the import's time is up and the source was read to its end. A source the pod
        cannot read ends the attempt as CDI v1.64 shows it: phase still ImportInProgress (only a fatal error
        fails a DataVolume), Running=False with the container's reason (Error) and the importer's message,
        Ready=False; kubelet restarts the container after its back-off (10 s, doubling, at most 5 min) and
        ``status.restartCount`` counts the restarts. A real cluster tries again for ever; OpenKeel's
        controller gives the build up after a few restarts (kubevirt/vmstatus.py)."""
        uid, name = dv["metadata"]["uid"], dv["metadata"]["name"]
        restarts = int(status.get("restartCount") or 0)
        running = next((c for c in status.get("conditions") or () if c.get("type") == "Running"), {})
        if running.get("status") == "False":  # the pod failed: its container waits out the back-off
            backoff = min(self.delays.import_backoff * 2 ** restarts, self.delays.import_backoff_max)
            if not self._due(dv, backoff, clock):
                return
            self.importer.forget(uid)
            new = own_copy(dv)
            new["status"].update(restartCount=restarts + 1, conditions=[
                _bound(name),
                condition("Ready", "False", "TransferRunning"), condition("Running", "True", "Pod is running")])
            self._moved(dv, clock)
            self._write(new)
            return
        if ((dv.get("spec") or {}).get("source") or {}).get("http"):
            done, failure = self.importer.outcome(uid, lambda: source_of(dv, self._lookup))
        else:  # a blank disk, a clone, …: nothing to read from outside the cluster
            done, failure = True, None
        if done and failure is not None:
            new = own_copy(dv)
            new["status"]["conditions"] = [_bound(name),
                                           condition("Ready", "False"), condition("Running", "False", "Error", failure)]
            self._moved(dv, clock)
            self._write(new)
            return
        if done and self._due(dv, self.delays.import_duration, clock):
            self.importer.forget(uid)
            new = own_copy(dv)
            new["status"].update(phase="Succeeded", progress="100.0%", conditions=[
                _bound(name),
                condition("Ready", "True"), condition("Running", "False", "Completed")])
            self._moved(dv, clock)
            self._write(new)
            return
        progress = self._progress(dv, clock)
        if progress != status.get("progress"):
            new = own_copy(dv)
            new["status"]["progress"] = progress
            self._write(new)

    def _lookup(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        """An object the importer reads (a kind the built-in cluster does not serve is never there)."""
        return self.store.lookup(kind, name, namespace) if kind in BY_KIND else None

    def _progress(self, dv: dict[str, Any], clock: float) -> str:
        """An import's status.progress now."""
        elapsed = clock - self.since.get(dv["metadata"]["uid"], clock)
        if self.delays.progress_every > 0:  # CDI reads the importer's progress now and then, not
            elapsed -= elapsed % self.delays.progress_every  # on every pass of its controller
        share = min(99.99, 100.0 * elapsed / self.delays.import_duration) if self.delays.import_duration else 0
        return f"{share:.2f}%"

    def _missing_secrets(self, dv: dict[str, Any]) -> list[str]:
        """The Secrets an HTTP import names (extra headers, credentials) that its namespace lacks."""
        http = ((dv.get("spec") or {}).get("source") or {}).get("http") or {}
        names = list(http.get("secretExtraHeaders") or ()) + ([http["secretRef"]] if http.get("secretRef") else [])
        ns = dv["metadata"].get("namespace")
        return [n for n in names if self.store.lookup("Secret", n, ns) is None]

    # -- VirtualMachineInstances ---------------------------------------------------------------------

    def _vmi(self, vmi: dict[str, Any], clock: float) -> None:
        meta = vmi["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        status = vmi.setdefault("status", {})
        phase = status.get("phase")
        if meta.get("deletionTimestamp"):
            pod = self.launchers.pod_of(vmi)
            if pod is not None and nodes.is_down(self.store, (pod.get("spec") or {}).get("nodeName")):
                # nobody on the node can stop it: the pod stays Terminating, and the VMI waits for it to go
                if not pod["metadata"].get("deletionTimestamp"):
                    self.store.delete(BY_KIND["Pod"], pod["metadata"].get("namespace"), pod["metadata"]["name"],
                                      None, {})
                return
            if phase in ("Succeeded", "Failed") or not phase or self._due(vmi, self.delays.stopping, clock):
                self.store._remove(("virtualmachineinstances", ns, name))
                self.launchers.remove(vmi)
                self.since.pop(meta["uid"], None)
                self.running.forget(meta["uid"])
                self._places.pop(meta["uid"], None)
            return
        if phase == "Running":
            pod = self.launchers.pod_of(vmi)
            if self.faults and self._fault("node-loss", ns, name) is not None:
                self._lose_node(vmi, clock)
            elif pod is None:  # force-deleted, or its node deleted: KubeVirt's VMI controller fails the VMI
                self._pod_gone(vmi, clock)
            elif (ready := nodes.vmi_ready(vmi, pod)) is not None:
                new = own_copy(vmi)
                new["status"]["conditions"] = [ready if c.get("type") == "Ready" else c
                                               for c in new["status"].get("conditions") or ()]
                self._write(new)
            elif not self.running.step(vmi, clock) and not self.faults:
                # the passes look at every VMI again while faults are injected; its pod changing, or a claim
                # that grows or binds, has it looked at again
                pod_key = ("pods", pod["metadata"].get("namespace"), pod["metadata"]["name"])
                self._settle(vmi, pod_key, *(("persistentvolumeclaims", ns, c) for c in disks.claims_of(vmi)),
                             *networks.attachment_keys(vmi))
            return
        if phase in ("Succeeded", "Failed"):
            self._settle(vmi)
            return
        # A pass that finds a phase not yet due changes nothing: it is left before the VMI is copied.
        if phase == "Pending" and not self._due(vmi, self.delays.pending, clock):
            return
        if phase == "Scheduled" and not self._due(vmi, self.delays.scheduled, clock):
            return
        if phase == "Scheduling":
            fault = self._fault("unschedulable", ns, name)
            # the node choice reads only the VMI's spec and the nodes: asked again once a node changed
            place = self._places.get(meta["uid"])
            if place is None:
                place = self._places[meta["uid"]] = self._place(vmi.get("spec") or {}, ns, meta.get("labels"))
            target, why = place
            if fault is None and target is not None and not self._due(vmi, self.delays.scheduling, clock):
                return
            if target is not None and (self.launchers.anti_affinity or scheduling.uses_pod_affinity(
                    vmi.get("spec") or {})):  # the pods bound meanwhile count: decide now
                target, why = self._places[meta["uid"]] = self._place(vmi.get("spec") or {}, ns, meta.get("labels"))
        new = own_copy(vmi)
        st = new["status"]
        if phase is None:
            st.update(phase="Pending", phaseTransitionTimestamps=[{"phase": "Pending",
                                                                   "phaseTransitionTimestamp": now()}],
                      guestOSInfo={}, qosClass="Burstable", conditions=[])
        elif phase == "Pending":
            missing = networks.missing_attachment(self.store, vmi)
            if missing is not None:  # virt-controller cannot render the pod: it tries again, the VMI waits
                message = f"failed to render launch manifest: failed to locate network attachment definition {missing}"
                if any(c.get("type") == "Synchronized" and c.get("message") == message for c in st["conditions"]):
                    return
                st["conditions"] = [*(c for c in st["conditions"] if c.get("type") != "Synchronized"),
                                    condition("Synchronized", "False", "FailedCreate", message)]
                self._write(new)
                return
            st["phase"] = "Scheduling"
            self.launchers.create(vmi)
            st["conditions"] = [condition("Ready", "False", "GuestNotRunning", "Guest VM is not reported as running")]
        elif phase == "Scheduling":
            if fault is not None or target is None:
                message = (fault.message or UNSCHEDULABLE_MESSAGE) if fault is not None else why
                cond = condition("PodScheduled", "False", "Unschedulable", message)
                if any(c.get("reason") == "Unschedulable" for c in st.get("conditions") or ()):
                    return
                st["conditions"] = [*(c for c in st.get("conditions") or () if c["type"] != "PodScheduled"), cond]
                self._write(new)
                self._moved(vmi, clock)  # scheduling starts again once the fault is cleared
                return
            pod_uid = self.launchers.scheduled(vmi, target, self._address_for(vmi)) or new_uid()
            st.update(phase="Scheduled", nodeName=target, activePods={pod_uid: target},
                      launcherContainerImageVersion="quay.io/kubevirt/virt-launcher:v1.9.0")
            new["metadata"].setdefault("labels", {})["kubevirt.io/nodeName"] = target
            st["conditions"] = [condition("Ready", "False", "GuestNotRunning",
                                           "Guest VM is not reported as running")]
        elif phase == "Scheduled":
            st["phase"] = "Running"
            st["conditions"] = [condition("Ready", "True"), condition("StorageLiveMigratable", "True")]
            if (vmi.get("spec") or {}).get("startStrategy") == "Paused":
                st["conditions"].append(condition("Paused", "True", "PausedStartStrategy",
                                                   "VMI was paused by start strategy"))
            self.running.boot(vmi, new)
            st["machine"] = {"type": "pc-q35-rhel9.6.0"}
            self.launchers.booted(new)
        else:
            return
        if phase is not None:
            st.setdefault("phaseTransitionTimestamps", []).append(
                {"phase": st["phase"], "phaseTransitionTimestamp": now()})
        self._moved(vmi, clock)
        self._write(new)

    def _lose_node(self, vmi: dict[str, Any], clock: float) -> None:
        new = own_copy(vmi)
        st = new["status"]
        st.update(phase="Failed", reason="NodeUnresponsive")
        st["conditions"] = [condition("Ready", "False", "NodeUnresponsive",
                                       f"virt-handler on node {st.get('nodeName') or NODE} is not responsive")]
        st.setdefault("phaseTransitionTimestamps", []).append({"phase": "Failed", "phaseTransitionTimestamp": now()})
        self._moved(vmi, clock)
        self._write(new)

    def lose_node(self, namespace: str | None = None, name: str | None = None) -> int:
        """Fail every running VMI matching now (a node-loss fault); returns how many."""
        count = 0
        with self.store.lock:
            for (plural, ns, vmi_name), obj in list(self.store.objects.items()):
                if (plural == "virtualmachineinstances" and namespace in (None, ns) and name in (None, vmi_name)
                        and (obj.get("status") or {}).get("phase") in ("Running", "Scheduled", "Scheduling")
                        and not obj["metadata"].get("deletionTimestamp")):
                    self._lose_node(obj, time.monotonic())
                    count += 1
        return count

    def _nodes_removed(self, gone: set[str], clock: float) -> None:
        """Node objects deleted (``kubectl delete node``, a node pool scaled down). Kubernetes' pod garbage
        collector force-deletes the pods still bound to a node that no longer exists; KubeVirt's VMI
        controller then finds a Scheduled or Running VMI without its launcher pod and fails it: phase
        Failed with no ``status.reason``, Ready False ``PodNotExists``, ``nodeName`` kept. Nothing restarts
        it under runStrategy Manual: the VM reads Stopped."""
        objects = self.store.objects
        for key, pod in list(objects.of_kind("pods").items()):
            if (pod.get("spec") or {}).get("nodeName") in gone:
                self.launchers.forget(pod)
                self.store._remove(key)
        for vmi in list(objects.of_kind("virtualmachineinstances").values()):
            status = vmi.get("status") or {}
            if status.get("nodeName") not in gone or status.get("phase") not in ("Scheduled", "Running"):
                continue
            if vmi["metadata"].get("deletionTimestamp"):
                continue  # being deleted: it goes on its next pass, its pod is gone already
            self._pod_gone(vmi, clock)

    def _pod_gone(self, vmi: dict[str, Any], clock: float) -> None:
        """A Scheduled or Running VMI whose launcher pod is gone: Failed, no ``status.reason``, Ready False
        ``PodNotExists``, ``nodeName`` kept (KubeVirt's VMI controller)."""
        new = own_copy(vmi)
        st = new["status"]
        st["phase"] = "Failed"
        st["conditions"] = [condition("Ready", "False", "PodNotExists", "virt-launcher pod has not yet been scheduled"),
                            *(c for c in st.get("conditions") or () if c.get("type") != "Ready")]
        st.setdefault("phaseTransitionTimestamps", []).append({"phase": "Failed", "phaseTransitionTimestamp": now()})
        self._moved(vmi, clock)
        self._write(new)

    # -- VirtualMachines -----------------------------------------------------------------------------

    def _revision(self, vm: dict[str, Any], field: str, cluster_kind: str, kind_: str
                  ) -> tuple[dict[str, Any] | None, str | None]:
        """(status ref, failure message) for the instancetype or preference matcher ``field``."""
        matcher = (vm.get("spec") or {}).get(field)
        if not matcher:
            return None, None
        ref_field = f"{field}Ref"
        current = (vm.get("status") or {}).get(ref_field)
        kind = matcher.get("kind") or cluster_kind
        ns = vm["metadata"].get("namespace")
        wanted = matcher.get("revisionName")
        if wanted:  # a named revision wins over everything, the object itself may be gone
            if self.store.lookup("ControllerRevision", wanted, ns) is None:
                return None, (f'failed to find {field}: controllerrevisions.apps "{wanted}" not found')
            return {"kind": kind, "name": matcher.get("name"), "controllerRevisionRef": {"name": wanted}}, None
        if current and current.get("name") == matcher.get("name") and current.get("kind") == kind \
                and (current.get("controllerRevisionRef") or {}).get("name"):
            return current, None
        source = self.store.lookup(kind, matcher.get("name", ""), ns if kind == kind_ else None)
        if source is None:
            res = BY_KIND[kind]
            return None, f'failed to find {field}: {res.group_resource} "{matcher.get("name")}" not found'
        smeta = source["metadata"]
        version = source["apiVersion"].rsplit("/", 1)[-1]
        name = f"{vm['metadata']['name']}-{smeta['name']}-{version}-{smeta['uid']}-{smeta.get('generation', 1)}"
        data = {"apiVersion": source["apiVersion"], "kind": source["kind"],
                "metadata": {k: smeta[k] for k in ("name", "namespace", "uid", "generation", "resourceVersion",
                                                   "creationTimestamp", "labels", "annotations") if k in smeta},
                "spec": source.get("spec")}
        if self.store.lookup("ControllerRevision", name, ns) is None:
            self._write({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                         "metadata": {"name": name, "namespace": ns, "ownerReferences": [_owner(vm)],
                                      "labels": {"instancetype.kubevirt.io/object-name": smeta["name"],
                                                 "instancetype.kubevirt.io/object-kind": source["kind"],
                                                 "instancetype.kubevirt.io/object-uid": smeta["uid"],
                                                 "instancetype.kubevirt.io/object-generation":
                                                     str(smeta.get("generation", 1)),
                                                 "instancetype.kubevirt.io/object-version": "v1beta1"}},
                         "data": data, "revision": 0})
        return {"kind": kind, "name": smeta["name"], "controllerRevisionRef": {"name": name}}, None

    def _datavolumes(self, vm: dict[str, Any]) -> list[dict[str, Any]]:
        ns = vm["metadata"].get("namespace")
        found = []
        for template in (vm.get("spec") or {}).get("dataVolumeTemplates") or []:
            tmeta = template.get("metadata") or {}
            dv = self.store.lookup("DataVolume", tmeta.get("name", ""), ns)
            if dv is None:
                meta = {"name": tmeta.get("name"), "namespace": ns, "ownerReferences": [_owner(vm)],
                        "labels": {**(tmeta.get("labels") or {}), "kubevirt.io/created-by": vm["metadata"]["uid"]}}
                if tmeta.get("annotations"):
                    meta["annotations"] = tmeta["annotations"]
                dv = self._write({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": meta,
                                  "spec": copy.deepcopy(template.get("spec") or {})})
            found.append(dv)
        return found

    def _start_vmi(self, vm: dict[str, Any], revisions: dict[str, Any], paused: bool = False) -> None:
        template = copy.deepcopy((vm.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        spec = template.get("spec") or {}
        if paused:
            spec["startStrategy"] = "Paused"
        domain = spec.setdefault("domain", {})
        it_ref = revisions.get("instancetypeRef")
        if it_ref:
            rev = self.store.lookup("ControllerRevision", it_ref["controllerRevisionRef"]["name"],
                                    vm["metadata"].get("namespace"))
            it_spec = ((rev or {}).get("data") or {}).get("spec") or {}
            if it_spec.get("cpu", {}).get("guest"):
                domain.setdefault("cpu", {}).update(sockets=it_spec["cpu"]["guest"], cores=1, threads=1)
            if it_spec.get("memory", {}).get("guest"):
                domain.setdefault("memory", {})["guest"] = it_spec["memory"]["guest"]
        pref_ref = revisions.get("preferenceRef")
        if pref_ref:
            rev = self.store.lookup("ControllerRevision", pref_ref["controllerRevisionRef"]["name"],
                                    vm["metadata"].get("namespace"))
            pref_devices = (((rev or {}).get("data") or {}).get("spec") or {}).get("devices") or {}
            if "preferredAutoattachSerialConsole" in pref_devices:  # a preference fills what the VM leaves out
                domain.setdefault("devices", {}).setdefault("autoattachSerialConsole",
                                                            pref_devices["preferredAutoattachSerialConsole"])
        meta = {"name": vm["metadata"]["name"], "namespace": vm["metadata"].get("namespace"),
                "labels": {**(tmeta.get("labels") or {}), "kubevirt.io/nodeName": NODE},
                "annotations": {**(tmeta.get("annotations") or {}), "kubevirt.io/vm-generation":
                                str(vm["metadata"].get("generation", 1))},
                "ownerReferences": [_owner(vm)], "finalizers": list(VMI_FINALIZERS)}
        devices = domain.get("devices") or {}
        if any(i.get("state") == "absent" for i in devices.get("interfaces") or ()):  # never started absent
            kept = [i for i in devices["interfaces"] if i.get("state") != "absent"]
            devices["interfaces"] = kept
            spec["networks"] = [n for n in spec.get("networks") or () if n.get("name") in {i.get("name") for i in kept}]
        revision = self.running.start_revision(vm)
        self._write({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": meta,
                     "spec": spec, "status": {"virtualMachineRevisionName": revision}})

    def _vm(self, vm: dict[str, Any], clock: float) -> None:
        meta = vm["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        vmi = self.store.lookup("VirtualMachineInstance", name, ns)
        deleting = bool(meta.get("deletionTimestamp"))
        self._settled.discard(("virtualmachines", ns, name))
        new = own_copy(vm)
        status = new["status"]
        if deleting:
            if vmi is not None and not vmi["metadata"].get("deletionTimestamp"):
                self._stop(vmi)
            if vmi is None:
                finalizers = [f for f in meta.get("finalizers") or () if f != VM_FINALIZER]
                if "foregroundDeletion" in finalizers and not self.store.dependents(vm):
                    finalizers.remove("foregroundDeletion")
                if finalizers != list(meta.get("finalizers") or ()):
                    new["metadata"]["finalizers"] = finalizers
                    if not finalizers:
                        self.store._remove(("virtualmachines", ns, name))
                        return
                for key in self.store.dependents(vm):
                    if key[0] != "virtualmachineinstances":
                        self.store._remove(key)
            status["printableStatus"] = "Terminating"
            if new != vm:
                self._write(new)
            return
        if VM_FINALIZER not in (meta.get("finalizers") or ()):
            new["metadata"]["finalizers"] = [*(meta.get("finalizers") or ()), VM_FINALIZER]
        failures = []
        for field, cluster_kind, kind_ in (("instancetype", CLUSTER_IT, IT), ("preference", CLUSTER_PREF, PREF)):
            ref, failure = self._revision(vm, field, cluster_kind, kind_)
            if ref is not None:
                status[f"{field}Ref"] = ref
            if failure:
                failures.append(failure)
        dvs = self._datavolumes(vm)
        dvs_ready = all((dv.get("status") or {}).get("phase") == "Succeeded" for dv in dvs)
        cleared, hotplug_error = self.running.sync_vm(vm, vmi)
        if hotplug_error:
            failures.append(hotplug_error)
        if cleared is not None:  # absent interfaces that are gone leave the VM's template (looked at again)
            new["spec"] = {**vm["spec"], "template": {**vm["spec"]["template"], "spec": cleared}}
            self._write(new)
            return
        requests = list(status.get("stateChangeRequests") or [])
        if requests:
            first = requests[0]
            if first.get("action") == "Stop":
                if vmi is not None and not vmi["metadata"].get("deletionTimestamp") and (
                        first.get("uid") in (None, vmi["metadata"]["uid"])):
                    self._stop(vmi)
                if vmi is None or first.get("uid") not in (None, vmi["metadata"]["uid"]):
                    requests.pop(0)
            elif first.get("action") == "Start" and not failures:
                if vmi is None and dvs_ready:
                    self._start_vmi(vm, status, paused=(first.get("data") or {}).get("paused") == "true")
                    requests.pop(0)
                elif vmi is not None and not vmi["metadata"].get("deletionTimestamp"):
                    requests.pop(0)  # already running
            if requests:
                status["stateChangeRequests"] = requests
            else:
                status.pop("stateChangeRequests", None)
        vmi = self.store.lookup("VirtualMachineInstance", name, ns)
        restart = self.running.restart_required(new, vmi)
        self._vm_status(new, status, vmi, dvs, failures, requests, restart)
        # a start waiting for its disks is taken up once a DataVolume is written (it succeeded)
        waiting = bool(requests) and requests[0].get("action") == "Start" and vmi is None and not dvs_ready
        if new != vm:
            self._write(new)
        elif not failures and (not requests or waiting):
            # A VM whose pass changed nothing changes nothing again until it, its VMI or one of its
            # DataVolumes is written (1,000 steady VMs would cost a pass each otherwise).
            own = ("virtualmachines", ns, name)
            self._settled.add(own)
            for key in (own, ("virtualmachineinstances", ns, name),
                        *(("datavolumes", ns, (t.get("metadata") or {}).get("name", ""))
                          for t in (vm.get("spec") or {}).get("dataVolumeTemplates") or ())):
                self._read_by.setdefault(key, set()).add(own)

    def _stop(self, vmi: dict[str, Any]) -> None:
        new = copy.deepcopy(vmi)
        new["metadata"]["deletionTimestamp"] = now()
        self._write(new)["metadata"]["deletionTimestamp"] = new["metadata"]["deletionTimestamp"]
        self._moved(vmi, time.monotonic())

    def _vm_status(self, vm: dict[str, Any], status: dict[str, Any], vmi: dict[str, Any] | None,
                   dvs: list[dict[str, Any]], failures: list[str], requests: list[dict[str, Any]],
                   restart: bool = False) -> None:
        vmi_status = (vmi or {}).get("status") or {}
        phase = vmi_status.get("phase")
        conditions = {c["type"]: c for c in vmi_status.get("conditions") or ()}
        final = phase in ("Succeeded", "Failed")
        paused = conditions.get("Paused", {}).get("status") == "True"
        dv_phases = [(dv.get("status") or {}).get("phase") for dv in dvs]
        start_expected = any(r.get("action") == "Start" for r in requests)
        if vmi is not None and not final and vmi["metadata"].get("deletionTimestamp"):
            printable = "Stopping"
        elif migrations.migrating(vmi):
            printable = "Migrating"
        elif phase == "Running":
            printable = "Paused" if paused else "Running"
        elif "Failed" in dv_phases or any(_importer_stopped(dv) for dv in dvs):
            printable = "DataVolumeError"
        elif conditions.get("PodScheduled", {}).get("reason") == "Unschedulable":
            printable = "ErrorUnschedulable"
        elif any(p != "Succeeded" for p in dv_phases):
            printable = "Provisioning"
        elif (vmi is None and start_expected) or phase in (None, "Pending", "Scheduling", "Scheduled") and vmi:
            printable = "Starting"
        else:
            printable = "Stopped"
        status["printableStatus"] = printable
        status["created"] = vmi is not None
        status["ready"] = phase == "Running" and conditions.get("Ready", {}).get("status") == "True"
        if not status["created"]:
            status.pop("created")
        if not status["ready"]:
            status.pop("ready")
        status["runStrategy"] = (vm.get("spec") or {}).get("runStrategy") or "Halted"
        status["desiredGeneration"] = vm["metadata"].get("generation", 1)
        status["observedGeneration"] = vm["metadata"].get("generation", 1)
        old = {c["type"]: c for c in status.get("conditions") or ()}
        new_conditions = []
        for type_, cond in conditions.items():
            if type_ in ("Failure", "RestartRequired"):
                continue
            keep = old.get(type_)
            if keep and keep.get("status") == cond.get("status") and keep.get("reason") == cond.get("reason"):
                new_conditions.append(keep)
            else:
                new_conditions.append(copy.deepcopy(cond))
        if "Ready" not in conditions:
            keep = old.get("Ready")
            reason = "VMINotExists" if vmi is None else "GuestNotRunning"
            new_conditions.insert(0, keep if keep and keep.get("reason") == reason else condition(
                "Ready", "False", reason, "VMI does not exist" if vmi is None else "Guest VM is not reported as "
                                                                                   "running"))
        if restart:
            keep = old.get("RestartRequired")
            new_conditions.append(keep or {"type": "RestartRequired", "status": "True", "lastProbeTime": None,
                                           "lastTransitionTime": now(), "message": RESTART_MESSAGE})
        if failures:
            keep = old.get("Failure")
            message = "; ".join(failures)
            if message.startswith("Error encountered while handling declarative"):
                reason = "HotPlugVolumeError"
            elif message.startswith(("failed to find instancetype", "failed to find preference")):
                # KubeVirt v1.9's VM controller (checkResourcesExist): the VM is admitted, then waits
                reason = "FailedFindInstancetype" if "instancetype" in message.split(":")[0] else "FailedFindPreference"
            else:
                reason = "FailedCreate"
            new_conditions.append(keep if keep and keep.get("message") == message
                                  else condition("Failure", "True", reason, message))
        status["conditions"] = new_conditions

    # -- garbage collection --------------------------------------------------------------------------

    def _collect_garbage(self) -> None:
        objects = self.store.objects
        suspects, objects.suspects = objects.suspects, set()  # what this pass removes is looked at next pass
        for key in sorted(suspects, key=lambda k: (k[0], k[1] or "", k[2])):
            obj = objects.get(key)
            if obj is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or ()
            if refs and not any(r.get("uid") in objects.uids for r in refs):
                if key[0] == "virtualmachineinstances":
                    if not obj["metadata"].get("deletionTimestamp"):
                        self._stop(obj)
                else:
                    if key[0] == "pods":
                        self.launchers.forget(obj)
                    self.store._remove(key)

