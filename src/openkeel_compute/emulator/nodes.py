"""A node that stops being Ready, as Kubernetes' node lifecycle controller and KubeVirt's node controller see it.

- The node's ``Ready`` condition is what its kubelet posts: set it with ``PATCH /api/v1/nodes/NAME/status``
  (``False``, or ``Unknown`` for a node that stopped answering), ``Emulator.set_node_ready`` or the
  ``node-not-ready`` / ``node-ready`` faults.
- Kubernetes then taints the node ``node.kubernetes.io/not-ready`` (``unreachable`` for Unknown), NoSchedule and
  NoExecute, and marks its pods not Ready (the VMI's Ready condition follows its pod's); after the pods'
  default NoExecute toleration (``Delays.pod_eviction``, 300 s) it evicts them: they get a deletionTimestamp
  and stay Terminating, as nobody on the node can confirm they stopped. A graceful delete of such a pod does the
  same; a forced one (``gracePeriodSeconds: 0``) removes it, and so does the pod garbage collector once the node
  carries ``node.kubernetes.io/out-of-service`` (NoExecute).
- KubeVirt's node controller, once virt-handler's heartbeat is older than its timeout
  (``Delays.heartbeat_timeout``), labels the node ``kubevirt.io/schedulable: "false"``.
- A VMI keeps running in KubeVirt's eyes while its pod exists (even Terminating, the VMI Ready False
  ``PodTerminating``); once the pod is gone the VMI controller fails it (phase Failed, Ready False
  ``PodNotExists``). A VMI deleted meanwhile waits for its pod to go.
- Ready again: the taints go, pods not evicted are Ready again, the node schedulable again.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.emulator.store import clone, now

NOT_READY, UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
SCHEDULABLE = "kubevirt.io/schedulable"


def ready_status(node: dict[str, Any] | None) -> str:
    for cond in ((node or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") or "Unknown"
    return "Unknown"


def is_down(store: Any, node_name: str | None) -> bool:
    """Whether a pod on this node cannot be confirmed stopped (the node exists and is not Ready)."""
    node = store.objects.get(("nodes", None, node_name)) if node_name else None
    return node is not None and ready_status(node) != "True"


class NodeLifecycle:
    def __init__(self, lifecycle: Any) -> None:
        self.lifecycle = lifecycle
        self.store = lifecycle.store

    def _pods_on(self, name: str) -> list[tuple[tuple, dict[str, Any]]]:
        return [(key, pod) for key, pod in list(self.store.objects.of_kind("pods").items())
                if (pod.get("spec") or {}).get("nodeName") == name]

    def node(self, node: dict[str, Any], clock: float) -> None:
        meta, spec = node["metadata"], node.get("spec") or {}
        name = meta["name"]
        key = f"{meta['uid']}/notready"
        status = ready_status(node)
        taints = [t for t in spec.get("taints") or () if t.get("key") not in (NOT_READY, UNREACHABLE)]
        labels = dict(meta.get("labels") or {})
        if status == "True":
            self.lifecycle.mark(key, None)
            if labels.get(SCHEDULABLE) == "false":
                labels[SCHEDULABLE] = "true"  # virt-handler's heartbeat is back
            self._write(node, taints, labels)
            for pod_key, pod in self._pods_on(name):
                self._pod_ready(pod_key, pod, True)
            self.lifecycle._settle(node)
            return
        self.lifecycle.due_key(key, 0, clock)  # when it stopped being Ready
        elapsed = clock - self.lifecycle.since[key]
        taint_key = UNREACHABLE if status == "Unknown" else NOT_READY
        taints += [{"key": taint_key, "effect": "NoSchedule", "timeAdded": self._added(spec, taint_key, "NoSchedule")},
                   {"key": taint_key, "effect": "NoExecute", "timeAdded": self._added(spec, taint_key, "NoExecute")}]
        if elapsed >= self.lifecycle.delays.heartbeat_timeout and labels.get(SCHEDULABLE) == "true":
            labels[SCHEDULABLE] = "false"  # KubeVirt's node controller: virt-handler is not responsive
        self._write(node, taints, labels)
        force = any(t.get("key") == OUT_OF_SERVICE and t.get("effect") == "NoExecute" for t in taints)
        for pod_key, pod in self._pods_on(name):
            if force:  # the pod garbage collector force-deletes the pods of an out-of-service node
                self.lifecycle.launchers.forget(pod)
                self.store._remove(pod_key)
                continue
            self._pod_ready(pod_key, pod, False)
            if elapsed >= self.lifecycle.delays.pod_eviction and not pod["metadata"].get("deletionTimestamp"):
                current = self.store.objects.get(pod_key)
                new = {**current, "metadata": {**clone(current["metadata"]), "deletionTimestamp": now(),
                                               "deletionGracePeriodSeconds": 30}}
                self.store.put(new)["metadata"]["deletionTimestamp"] = new["metadata"]["deletionTimestamp"]

    @staticmethod
    def _added(spec: dict[str, Any], key: str, effect: str) -> str:
        for taint in spec.get("taints") or ():
            if taint.get("key") == key and taint.get("effect") == effect and taint.get("timeAdded"):
                return taint["timeAdded"]
        return now()

    def _write(self, node: dict[str, Any], taints: list[dict[str, Any]], labels: dict[str, str]) -> None:
        spec = dict(node.get("spec") or {})
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
        if spec != (node.get("spec") or {}) or labels != (node["metadata"].get("labels") or {}):
            self.store.put({**node, "spec": spec, "metadata": {**clone(node["metadata"]), "labels": labels}})

    def _pod_ready(self, key: tuple, pod: dict[str, Any], ready: bool) -> None:
        status = pod.get("status") or {}
        if status.get("phase") != "Running":
            return
        wanted = "True" if ready else "False"
        conditions = status.get("conditions") or []
        if all(c.get("status") == wanted for c in conditions if c.get("type") in ("Ready", "ContainersReady")):
            return
        new_conditions = [{**c, "status": wanted, "lastTransitionTime": now()} if c.get("type") in (
            "Ready", "ContainersReady") else c for c in conditions]
        self.store.put({**pod, "status": {**status, "conditions": new_conditions}})


def vmi_ready(vmi: dict[str, Any], pod: dict[str, Any] | None) -> dict[str, Any] | None:
    """KubeVirt's syncReadyConditionFromPod for a running VMI: its Ready condition as its pod makes it (None:
    unchanged)."""
    conditions = (vmi.get("status") or {}).get("conditions") or []
    current = next((c for c in conditions if c.get("type") == "Ready"), {})
    if pod is None:
        return None
    if pod["metadata"].get("deletionTimestamp"):
        wanted = {"status": "False", "reason": "PodTerminating", "message": "virt-launcher pod is terminating"}
    else:
        cond = next((c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), None)
        if cond is None:
            return None
        wanted = {"status": cond.get("status")}
    have = {k: current.get(k) for k in ("status", "reason", "message") if current.get(k) is not None}
    if have == wanted:
        return None
    return {"type": "Ready", **wanted, "lastProbeTime": None, "lastTransitionTime": now()}
