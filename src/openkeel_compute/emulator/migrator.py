"""KubeVirt's migration controller and virt-handler's side of a live migration, one object at a time (the
phases and what each writes are described in migrations.py)."""

from __future__ import annotations

from typing import Any

from openkeel_compute.emulator import migrations as mig
from openkeel_compute.emulator import nodes
from openkeel_compute.emulator.store import clone, now


class Migrator:
    def __init__(self, lifecycle: Any) -> None:
        self.lifecycle = lifecycle
        self.store = lifecycle.store
        self.delays = lambda: lifecycle.delays

    # -- helpers ---------------------------------------------------------------------------------------

    def _target(self, migration: dict[str, Any], vmi: dict[str, Any] | None) -> dict[str, Any] | None:
        uid = migration["metadata"]["uid"]
        for key in self.store.objects.dependents_of((vmi or {}).get("metadata", {}).get("uid", "")):
            pod = self.store.objects.get(key)
            if key[0] == "pods" and pod and (pod["metadata"].get("labels") or {}).get(mig.JOB_LABEL) == uid:
                return pod
        return None

    def _vmi_state(self, vmi: dict[str, Any], **fields: Any) -> dict[str, Any]:
        new = mig.own(vmi)
        state = new["status"].setdefault("migrationState", {})
        state.update(fields)
        return new

    def _fault(self, kind: str, migration: dict[str, Any]) -> Any:
        spec = migration.get("spec") or {}
        return self.lifecycle._fault(kind, migration["metadata"].get("namespace"), spec.get("vmiName"),
                                     migration["metadata"]["name"])

    def _put(self, migration: dict[str, Any], new: dict[str, Any], clock: float, moved: bool = True) -> None:
        if moved:
            self.lifecycle._moved(migration, clock)
        self.store.put(new)

    # -- one pass --------------------------------------------------------------------------------------

    def step(self, migration: dict[str, Any], clock: float) -> None:
        meta = migration["metadata"]
        status = migration.get("status") or {}
        phase = status.get("phase")
        ns = meta.get("namespace")
        vmi = self.store.lookup("VirtualMachineInstance", (migration.get("spec") or {}).get("vmiName", ""), ns)
        if phase in mig.FINAL:
            self._finish(migration, vmi)
            return
        new = mig.own(migration)
        st = new["status"]
        if vmi is None or (vmi.get("status") or {}).get("phase") in ("Succeeded", "Failed") or \
                vmi["metadata"].get("deletionTimestamp"):
            self._fail(migration, new, vmi, clock)
            return
        if meta.get("deletionTimestamp"):
            self._abort(migration, new, vmi, clock)
            return
        delays = self.delays()
        if phase in mig.HANDED_OFF and self._node_lost(migration, new, vmi, phase, clock):
            return
        if phase is None:
            mig.stamp(st, "Pending")
            self._put(migration, new, clock)
        elif phase == "Pending":
            if self.lifecycle._due(migration, delays.migration_step, clock):
                self.lifecycle.launchers.create(vmi, migration)
                mig.stamp(st, "Scheduling")
                self._put(migration, new, clock)
        elif phase == "Scheduling":
            self._schedule(migration, new, vmi, clock)
        elif phase == "Scheduled":
            if self.lifecycle._due(migration, delays.migration_step, clock):
                self._hand_off(migration, new, vmi, clock)
        elif phase == "PreparingTarget":
            if self.lifecycle._due(migration, delays.migration_step, clock):
                state = (vmi.get("status") or {}).get("migrationState") or {}
                address = self.lifecycle.launchers.host_ip(state.get("targetNode") or "")
                self.store.put(self._vmi_state(vmi, targetNodeAddress=address))
                mig.stamp(st, "TargetReady")
                self._put(migration, new, clock)
        elif phase == "TargetReady":
            if self.lifecycle._due(migration, delays.migration_step, clock):
                self.store.put(self._vmi_state(vmi, startTimestamp=now(), mode="PreCopy"))
                mig.stamp(st, "Running")
                self._put(migration, new, clock)
        elif phase == "Running":
            self._transfer(migration, new, vmi, clock)

    def _node_lost(self, migration: dict[str, Any], new: dict[str, Any], vmi: dict[str, Any], phase: str,
                   clock: float) -> bool:
        """A node of a handed-off migration lost (True: this pass is over).

        - The source node not Ready: its virt-handler, which drives the transfer and reports its end, is
          silent; the migration makes no move until the source pod is gone (the VMI then fails, and so does
          the migration: KubeVirt's "Migration failed because vmi is final").
        - The target pod gone (its node deleted, the pod force-deleted): KubeVirt's "Migration target pod was
          removed during active migration" fails it.
        - The target node not Ready: before the transfer its virt-handler never prepares the target; once
          running, the stream makes no progress and the source's migration monitor aborts it after its progress
          timeout (``Delays.migration_transfer`` here): abortStatus Succeeded, failureReason "Live migration has
          been aborted" (KubeVirt's setMigrationResult once an abort succeeded)."""
        state = (vmi.get("status") or {}).get("migrationState") or {}
        if nodes.is_down(self.store, state.get("sourceNode")):
            return True
        target = self._target(migration, vmi)
        if target is None:
            self._fail(migration, new, vmi, clock)
            return True
        if not nodes.is_down(self.store, (target.get("spec") or {}).get("nodeName")):
            return False
        if phase == "Running" and not state.get("completed") and self.lifecycle.due_key(
                f"{migration['metadata']['uid']}/stuck", self.delays().migration_transfer, clock):
            self.store.put(self._vmi_state(vmi, abortStatus="Succeeded", completed=True, failed=True,
                                           endTimestamp=now(), failureReason=mig.ABORTED))
            self.lifecycle._moved(migration, clock)
            return True
        return not state.get("completed")

    def _schedule(self, migration: dict[str, Any], new: dict[str, Any], vmi: dict[str, Any], clock: float) -> None:
        target = self._target(migration, vmi)
        if target is None:  # deleted under it: KubeVirt interrupts the migration
            self._fail(migration, new, vmi, clock)
            return
        spec = target.get("spec") or {}
        node, why = self.lifecycle._place(spec, target["metadata"].get("namespace"), target["metadata"].get("labels"))
        delays = self.delays()
        if node is None:
            if self.lifecycle._due(migration, delays.migration_unschedulable, clock):
                self.store._remove(("pods", target["metadata"].get("namespace"), target["metadata"]["name"]))
                self._fail(migration, new, vmi, clock)
                return
            conditions = (target.get("status") or {}).get("conditions") or []
            if not any(c.get("reason") == "Unschedulable" and c.get("message") == why for c in conditions):
                self.store.put({**target, "status": {**(target.get("status") or {}), "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why,
                     "lastProbeTime": None, "lastTransitionTime": now()}]}})
            return
        if not self.lifecycle._due(migration, delays.scheduling, clock):
            return
        uid = self.lifecycle.launchers.scheduled(vmi, node, self.lifecycle.next_ip(), pod=target)
        pods = dict((vmi.get("status") or {}).get("activePods") or {})
        pods[uid] = node
        self.store.put({**mig.own(vmi), "status": {**clone(vmi.get("status") or {}), "activePods": pods}})
        mig.stamp(new["status"], "Scheduled")
        self._put(migration, new, clock)

    def _hand_off(self, migration: dict[str, Any], new: dict[str, Any], vmi: dict[str, Any], clock: float) -> None:
        target = self._target(migration, vmi)
        if target is None:
            self._fail(migration, new, vmi, clock)
            return
        source = self.lifecycle.launchers.pod_of(vmi)
        config, policy = mig.configuration(self.store, vmi)
        state: dict[str, Any] = {"migrationUid": migration["metadata"]["uid"],
                                 "sourceNode": (vmi.get("status") or {}).get("nodeName"),
                                 "targetNode": target["spec"]["nodeName"], "targetPod": target["metadata"]["name"],
                                 "sourcePod": (source or {}).get("metadata", {}).get("name"),
                                 "migrationConfiguration": config}
        if policy:
            state["migrationPolicyName"] = policy
        new_vmi = mig.own(vmi)
        new_vmi["status"]["migrationState"] = state
        new_vmi["metadata"].setdefault("labels", {})[mig.TARGET_LABEL] = target["spec"]["nodeName"]
        self.store.put(new_vmi)
        new["status"]["migrationState"] = {"sourcePod": state["sourcePod"]}
        mig.stamp(new["status"], "PreparingTarget")
        self._put(migration, new, clock)

    def _transfer(self, migration: dict[str, Any], new: dict[str, Any], vmi: dict[str, Any], clock: float) -> None:
        state = (vmi.get("status") or {}).get("migrationState") or {}
        if state.get("completed"):  # the source reported the end
            if state.get("failed"):
                self._fail(migration, new, vmi, clock)
            else:
                mig.stamp(new["status"], "Succeeded")
                self._put(migration, new, clock)
            return
        if not self.lifecycle._due(migration, self.delays().migration_transfer, clock):
            return
        failure = self._fault("migration-failure", migration)
        if failure is not None:
            reason = failure.message or ("Live migration failed error encountered during MigrateToURI3 libvirt "
                                         "api call: virError(Code=1, Domain=10, Message='internal error: "
                                         "qemu unexpectedly closed the monitor')")
            self.store.put(self._vmi_state(vmi, completed=True, failed=True, endTimestamp=now(),
                                           failureReason=reason))
            self.lifecycle._moved(migration, clock)
            return
        stalled = self._fault("migration-stall", migration) is not None
        if stalled and state.get("mode") != "PostCopy":
            if not self.lifecycle.due_key(f"{migration['metadata']['uid']}/completion",
                                          mig.completion_timeout(vmi, state) * self.delays().kubevirt_second, clock):
                return  # the monitor lets the pre-copy run until its completion timeout
            if (state.get("migrationConfiguration") or {}).get("allowPostCopy"):
                self.store.put(self._vmi_state(vmi, mode="PostCopy"))  # the monitor switches to post-copy
            else:  # the monitor cancels it on its completion timeout
                self.store.put(self._vmi_state(vmi, abortStatus="Succeeded", completed=True, failed=True,
                                               endTimestamp=now(), failureReason=mig.ABORTED))
            self.lifecycle._moved(migration, clock)
            return
        self._complete(migration, vmi)
        self.lifecycle._moved(migration, clock)

    def _complete(self, migration: dict[str, Any], vmi: dict[str, Any]) -> None:
        """The domain runs on the target: the VMI moves there, with its target pod."""
        target = self._target(migration, vmi)
        if target is None:
            return
        launchers = self.lifecycle.launchers
        node = target["spec"]["nodeName"]
        launchers.promote(vmi, target)
        new = mig.own(vmi)
        st = new["status"]
        st["migrationState"].update(completed=True, endTimestamp=now(), targetNodeDomainDetected=True,
                                    targetNodeDomainReadyTimestamp=now())
        st["nodeName"] = node
        st["activePods"] = {target["metadata"]["uid"]: node}
        labels = new["metadata"].setdefault("labels", {})
        labels["kubevirt.io/nodeName"] = node
        labels.pop(mig.TARGET_LABEL, None)
        ip = (target.get("status") or {}).get("podIP")
        st["interfaces"] = [{**e, "ipAddress": ip, "ipAddresses": [ip, *(a for a in e.get("ipAddresses") or ()
                                                                          if ":" in a)]}
                            if e.get("podInterfaceName") == "eth0" and ip else e for e in st.get("interfaces") or ()]
        self.store.put(new)
        self.lifecycle.running.moved(new, target)

    def _abort(self, migration: dict[str, Any], new: dict[str, Any], vmi: dict[str, Any], clock: float) -> None:
        st = new["status"]
        if not any(c.get("type") == "migrationAbortRequested" for c in st.get("conditions") or ()):
            st["conditions"] = [*(st.get("conditions") or ()), mig.abort_condition()]
            self._put(migration, new, clock, moved=False)
            return
        if st.get("phase") not in mig.HANDED_OFF:
            self._fail(migration, new, vmi, clock)
            return
        state = (vmi.get("status") or {}).get("migrationState") or {}
        if nodes.is_down(self.store, state.get("sourceNode")) and not state.get("completed"):
            return  # the abort is the source virt-handler's, silent with its node
        if state.get("migrationUid") != migration["metadata"]["uid"] or state.get("completed"):
            self._fail(migration, new, vmi, clock)
            return
        if not state.get("abortRequested"):
            self.store.put(self._vmi_state(vmi, abortRequested=True, abortStatus="Aborting"))
            self.lifecycle._moved(migration, clock)
        elif self.lifecycle._due(migration, self.delays().migration_step, clock):
            fields = {"abortStatus": "Succeeded", "completed": True, "failed": True, "failureReason": mig.ABORTED}
            if state.get("startTimestamp"):
                fields["endTimestamp"] = now()
            self.store.put(self._vmi_state(vmi, **fields))
            self.lifecycle._moved(migration, clock)

    def _fail(self, migration: dict[str, Any], new: dict[str, Any], vmi: dict[str, Any] | None, clock: float) -> None:
        """The migration failed: its target pod goes, the VMI stays where it was."""
        target = self._target(migration, vmi) if vmi is not None else None
        if target is not None:
            self.lifecycle.launchers.forget(target)
            self.store._remove(("pods", target["metadata"].get("namespace"), target["metadata"]["name"]))
        if vmi is not None:
            st = (vmi.get("status") or {})
            pods = {u: n for u, n in (st.get("activePods") or {}).items() if u != (target or {}).get(
                "metadata", {}).get("uid")}
            new_vmi = mig.own(vmi)
            new_vmi["status"]["activePods"] = pods
            (new_vmi["metadata"].get("labels") or {}).pop(mig.TARGET_LABEL, None)
            state = new_vmi["status"].get("migrationState")
            if state and state.get("migrationUid") == migration["metadata"]["uid"] and not state.get("completed"):
                state.update(completed=True, failed=True, endTimestamp=now())
            if new_vmi != vmi:
                self.store.put(new_vmi)
        mig.stamp(new["status"], "Failed")
        self._put(migration, new, clock)

    def _finish(self, migration: dict[str, Any], vmi: dict[str, Any] | None) -> None:
        """A final migration keeps the VMI's migration state, and lets go of its finalizer."""
        new = mig.own(migration)
        state = ((vmi or {}).get("status") or {}).get("migrationState") or {}
        if state.get("migrationUid") == migration["metadata"]["uid"]:
            new["status"]["migrationState"] = clone(state)
        new["metadata"]["finalizers"] = [f for f in migration["metadata"].get("finalizers") or () if f != mig.FINALIZER]
        if not new["metadata"]["finalizers"]:
            new["metadata"].pop("finalizers")
        if new == migration:
            self.lifecycle._settle(migration)
            return
        if migration["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            meta = migration["metadata"]
            self.store._remove(("virtualmachineinstancemigrations", meta.get("namespace"), meta["name"]))
            return
        self.store.put(new)
