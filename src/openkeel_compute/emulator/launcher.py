"""The virt-launcher pod of each VMI, and the serial console log its ``guest-console-log`` container prints.

KubeVirt runs every VMI in a pod of its own (``virt-launcher-<vmi>-<5 chars>``), labelled with the VMI's
labels plus ``kubevirt.io=virt-launcher``, ``kubevirt.io/created-by=<vmi uid>`` and
``vm.kubevirt.io/name=<hostname>``, owned by the VMI; the VMI lists it in ``status.activePods``. When
the serial console is logged (``spec.domain.devices.logSerialConsole``, unless ``autoattachSerialConsole``
is false) the pod has a ``guest-console-log`` sidecar (an init container that keeps running) that prints
what the guest writes on its first serial port: that container's log is the guest's console log. It lives
with the pod: a VMI that stops takes its pod and the log with it, and the next start has a new pod.

``Launchers`` creates and moves the pods with their VMI's phases, keeps each pod's console text, and serves
``GET /api/v1/namespaces/NS/pods/NAME/log`` with the API server's parameters and answers.
"""

from __future__ import annotations

import datetime
import hashlib
import random
import string
from typing import Any

from openkeel_compute.emulator import disks, networks, scheduling
from openkeel_compute.emulator.console import Hardware, boot_log, reboot_log
from openkeel_compute.emulator.store import ApiError, Store, clone, not_found, now

CONSOLE_CONTAINER = "guest-console-log"
COMPUTE_CONTAINER = "compute"
LAUNCHER_IMAGE = "quay.io/kubevirt/virt-launcher:v1.9.0"
LAUNCHER_IMAGE_ID = "quay.io/kubevirt/virt-launcher@sha256:" + hashlib.sha256(LAUNCHER_IMAGE.encode()).hexdigest()


def console_logged(vmi: dict[str, Any]) -> bool:
    """Whether KubeVirt gives the VMI's pod a guest-console-log container (the cluster default is on)."""
    devices = ((vmi.get("spec") or {}).get("domain") or {}).get("devices") or {}
    if devices.get("autoattachSerialConsole") is False:
        return False
    return devices.get("logSerialConsole") is not False


def hostname_of(vmi: dict[str, Any]) -> str:
    """The guest's hostname as KubeVirt sets it: spec.hostname, else the VMI's name."""
    return (vmi.get("spec") or {}).get("hostname") or vmi["metadata"]["name"]


def _suffix() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


class Launchers:
    """The launcher pods of the VMIs and the text each pod's guest-console-log container printed."""

    def __init__(self, store: Store, node: str) -> None:
        self.store = store
        self.node = node
        self.consoles: dict[str, list[str]] = {}  # pod uid -> console text, line by line
        self.boots: dict[str, int] = {}  # pod uid -> boots seen (a soft reboot boots the guest again)
        self.pods: dict[str, tuple[str | None, str]] = {}  # VMI uid -> its pod's (namespace, name)
        # keys of the launcher pods with pod (anti-)affinity: while there are none, the scheduler does not look
        # at the pods at all
        self.anti_affinity: set[tuple] = set()

    def bound_pods(self) -> list[scheduling.Pod]:
        """The launcher pods bound to nodes and not finished, as the scheduler sees them."""
        out = []
        for (_plural, ns, _name), pod in self.store.objects.of_kind("pods").items():
            node = (pod.get("spec") or {}).get("nodeName")
            if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and \
                    not pod["metadata"].get("deletionTimestamp"):
                out.append(scheduling.Pod(ns, pod["metadata"].get("labels") or {}, node,
                                          (pod.get("spec") or {}).get("affinity")))
        return out

    def pod_of(self, vmi: dict[str, Any]) -> dict[str, Any] | None:
        key = self.pods.get(vmi["metadata"]["uid"])
        return None if key is None else self.store.objects.get(("pods", *key))

    def create(self, vmi: dict[str, Any], migration: dict[str, Any] | None = None) -> dict[str, Any]:
        """The VMI's pod, Pending and not yet on a node (the VMI goes Scheduling); for a ``migration``, its
        target pod instead (labelled with the migration's uid, the migration's added node selector, and kept
        off the nodes where a pod of the same VMI runs)."""
        meta = vmi["metadata"]
        hostname = hostname_of(vmi)
        labels = {**(meta.get("labels") or {}), "kubevirt.io": "virt-launcher", "kubevirt.io/created-by": meta["uid"],
                  "vm.kubevirt.io/name": hostname}
        init = []
        if console_logged(vmi):
            init.append({"name": CONSOLE_CONTAINER, "image": LAUNCHER_IMAGE, "command": ["/usr/bin/virt-tail"],
                         "args": ["--logfile", f"/var/run/kubevirt-private/{meta['uid']}/virt-serial0-log"],
                         "restartPolicy": "Always"})
        spec: dict[str, Any] = {"containers": [{"name": COMPUTE_CONTAINER, "image": LAUNCHER_IMAGE,
                                                 "command": ["/usr/bin/virt-launcher-monitor"]}],
                                "hostname": hostname, "restartPolicy": "Never", "automountServiceAccountToken": False}
        claims = [{"name": v["name"], "persistentVolumeClaim": {"claimName": claim}}
                  for v in (vmi.get("spec") or {}).get("volumes") or ()
                  if (claim := disks.claim_name(v)) and not disks.hotpluggable(v)]
        if claims:  # the claims the pod mounts (hotplugged ones go to an attachment pod)
            spec["volumes"] = claims
        if init:
            spec["initContainers"] = init
        vmi_spec = vmi.get("spec") or {}
        spec["nodeSelector"] = {**(vmi_spec.get("nodeSelector") or {}), "kubevirt.io/schedulable": "true"}
        if vmi_spec.get("affinity"):  # the pod carries the VMI's affinity, as KubeVirt renders it
            spec["affinity"] = vmi_spec["affinity"]
        if migration is not None:
            labels["kubevirt.io/migrationJobUID"] = migration["metadata"]["uid"]
            spec["nodeSelector"].update((migration.get("spec") or {}).get("addedNodeSelector") or {})
            affinity = dict(spec.get("affinity") or {})
            anti = dict(affinity.get("podAntiAffinity") or {})
            anti["requiredDuringSchedulingIgnoredDuringExecution"] = [
                *(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ()),
                {"labelSelector": {"matchExpressions": [{"key": "kubevirt.io/created-by", "operator": "In",
                                                         "values": [meta["uid"]]}]},
                 "topologyKey": "kubernetes.io/hostname"}]
            affinity["podAntiAffinity"] = anti
            spec["affinity"] = affinity
        annotations = {"kubevirt.io/domain": meta["name"]}
        selection = networks.selection(meta.get("namespace"), networks.attachable(vmi.get("spec") or {}))
        if selection:  # what the pod asks Multus for
            annotations[networks.NETWORKS_ANNOTATION] = selection
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"virt-launcher-{meta['name']}-{_suffix()}", "namespace": meta.get("namespace"),
                            "labels": labels, "annotations": annotations,
                            "ownerReferences": [{"apiVersion": vmi["apiVersion"], "kind": vmi["kind"],
                                                 "name": meta["name"], "uid": meta["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]},
               "spec": spec,
               "status": {"phase": "Pending", "qosClass": "Burstable",
                          "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                          "lastTransitionTime": now()}]}}
        if migration is None:
            self.pods[meta["uid"]] = (meta.get("namespace"), pod["metadata"]["name"])
        if scheduling.uses_pod_affinity(spec):
            self.anti_affinity.add(("pods", meta.get("namespace"), pod["metadata"]["name"]))
        return self.store.put(pod)

    def scheduled(self, vmi: dict[str, Any], node: str | None = None, pod_ip: str = "10.244.0.1",
                  pod: dict[str, Any] | None = None) -> str | None:
        """The VMI's pod (or ``pod``, a migration's target) runs on the node with the address ``pod_ip``,
        Multus having attached its networks (network-status): returns its uid (the VMI's status.activePods key)."""
        pod = pod or self.pod_of(vmi)
        if pod is None:
            return None
        node = node or self.node
        new = dict(pod, spec={**pod["spec"], "nodeName": node})
        new["metadata"] = dict(pod["metadata"])
        pod_mac = networks.mac_of(pod["metadata"]["uid"], "eth0", None).replace("02:", "0a:", 1)
        new["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}),
                                          networks.STATUS_ANNOTATION: networks.network_status(
                                              pod["metadata"].get("namespace"), pod_ip, pod_mac,
                                              networks.attachable(vmi.get("spec") or {}), vmi["metadata"]["uid"])}
        containers = [c["name"] for c in pod["spec"].get("initContainers") or ()] + [
            c["name"] for c in pod["spec"]["containers"]]
        started = now()
        new["status"] = {
            "phase": "Running", "qosClass": "Burstable", "hostIP": self.host_ip(node),
            "hostIPs": [{"ip": self.host_ip(node)}], "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": started,
            "conditions": [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": name, "ready": True, "restartCount": 0, "started": True,
                                   "image": LAUNCHER_IMAGE, "imageID": LAUNCHER_IMAGE_ID,
                                   "containerID": "containerd://" + hashlib.sha256(
                                       f"{pod['metadata']['uid']}/{name}".encode()).hexdigest(),
                                   "state": {"running": {"startedAt": started}}}
                                  for name in containers]}
        self.consoles[pod["metadata"]["uid"]] = []
        self.store.note(("console", pod["metadata"]["uid"], 0, []))
        self.store.put(new)
        return pod["metadata"]["uid"]

    def host_ip(self, node: str) -> str:
        """The node's InternalIP (192.168.122.10 when it has none)."""
        found = self.store.objects.get(("nodes", None, node)) or {}
        for address in (found.get("status") or {}).get("addresses") or ():
            if address.get("type") == "InternalIP":
                return address.get("address")
        return "192.168.122.10"

    def booted(self, vmi: dict[str, Any]) -> None:
        """The guest booted (the VMI runs): its console printed a boot."""
        pod = self.pod_of(vmi)
        if pod is None or not console_logged(vmi):
            return
        uid = pod["metadata"]["uid"]
        boot = self.boots[uid] = self.boots.get(uid, 0) + 1
        interfaces = (vmi.get("status") or {}).get("interfaces") or [{}]
        namespace = vmi["metadata"].get("namespace")
        hardware = Hardware.of(vmi, lambda claim: self.store.lookup("PersistentVolumeClaim", claim, namespace))
        nics = [(entry.get("interfaceName") or f"enp{index + 1}s0",
                 next((ip for ip in entry.get("ipAddresses") or () if ":" not in ip), None), entry.get("mac"))
                for index, entry in enumerate(interfaces)]
        self._print(uid, boot_log(hostname_of(vmi), vmi["metadata"]["uid"], interfaces[0].get("ipAddress"),
                                  interfaces[0].get("mac"), boot, hardware, nics=nics))

    def kernel(self, vmi: dict[str, Any], lines: list[str]) -> None:
        """Kernel messages of the running guest on its console (stamped with its uptime)."""
        pod = self.pod_of(vmi)
        if pod is None or not console_logged(vmi) or pod["metadata"]["uid"] not in self.consoles:
            return
        started = (pod.get("status") or {}).get("startTime")
        try:
            since = datetime.datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
            uptime = max(0.0, (datetime.datetime.now(datetime.UTC) - since).total_seconds()) + 13.0
        except (TypeError, ValueError):
            uptime = 13.0
        micros = int(uptime * 1_000_000)
        self._print(pod["metadata"]["uid"], [f"[{micros // 1_000_000:5d}.{micros % 1_000_000:06d}] {line}\r\n"
                                             for line in lines])

    def _print(self, pod_uid: str, lines: list[str]) -> None:
        text = self.consoles.setdefault(pod_uid, [])
        text.extend(lines)
        if self.store.pending is not None:  # the whole text: a record read twice gives the same console
            self.store.note(("console", pod_uid, self.boots.get(pod_uid, 0), list(text)))

    def promote(self, vmi: dict[str, Any], target: dict[str, Any]) -> None:
        """A migration completed: ``target`` is the VMI's pod now; the source pod has finished (Completed)."""
        source = self.pod_of(vmi)
        self.pods[vmi["metadata"]["uid"]] = (target["metadata"].get("namespace"), target["metadata"]["name"])
        if source is not None:
            ended = now()
            status = clone(source.get("status") or {})
            status["phase"] = "Succeeded"
            status["conditions"] = [{**c, "status": "False", "lastTransitionTime": ended} if c.get("type") in (
                "Ready", "ContainersReady") else c for c in status.get("conditions") or ()]
            status["containerStatuses"] = [{**c, "ready": False, "started": False, "state": {"terminated": {
                "exitCode": 0, "reason": "Completed", "finishedAt": ended}}} for c in status.get("containerStatuses")
                or ()]
            self.store.put({**source, "status": status})
            key = ("pods", source["metadata"].get("namespace"), source["metadata"]["name"])
            self.anti_affinity.discard(key)

    def restore(self, consoles: dict[str, tuple[int, list[str]]] | None = None) -> None:
        """The pods of a cluster read back from disk: each VMI's pod found again by its owner, and the
        console text each printed (``consoles``: pod uid -> (boots, lines))."""
        self.pods = {}
        self.anti_affinity = {key for key, pod in self.store.objects.of_kind("pods").items()
                              if scheduling.uses_pod_affinity(pod.get("spec") or {})}
        for (_plural, ns, name), pod in self.store.objects.of_kind("pods").items():
            if (pod.get("status") or {}).get("phase") == "Succeeded":
                continue  # a migration's source that finished
            for owner in pod["metadata"].get("ownerReferences") or ():
                if owner.get("kind") != "VirtualMachineInstance":
                    continue
                if "kubevirt.io/migrationJobUID" in (pod["metadata"].get("labels") or {}):
                    vmi = self.store.objects.get(self.store.objects.uids.get(owner["uid"])) or {}
                    state = (vmi.get("status") or {}).get("migrationState") or {}
                    if not (state.get("completed") and not state.get("failed") and state.get("targetPod") == name):
                        continue  # a migration's target that has not taken over
                self.pods[owner["uid"]] = (ns, name)
        if consoles is not None:
            self.boots = {uid: boots for uid, (boots, _lines) in consoles.items()}
            self.consoles = {uid: list(lines) for uid, (_boots, lines) in consoles.items()}

    def rebooted(self, vmi: dict[str, Any]) -> None:
        """A soft reboot: the guest shuts down and boots again in the same pod."""
        pod = self.pod_of(vmi)
        if pod is not None and pod["metadata"]["uid"] in self.consoles:
            self._print(pod["metadata"]["uid"], reboot_log())
            self.booted(vmi)

    def remove(self, vmi: dict[str, Any]) -> None:
        """The VMI is gone: so are its pod and the console log."""
        pod = self.pod_of(vmi)
        self.pods.pop(vmi["metadata"]["uid"], None)
        if pod is not None:
            self.consoles.pop(pod["metadata"]["uid"], None)
            self.boots.pop(pod["metadata"]["uid"], None)
            key = ("pods", pod["metadata"].get("namespace"), pod["metadata"]["name"])
            self.anti_affinity.discard(key)
            self.store._remove(key)

    def forget(self, pod: dict[str, Any]) -> None:
        """A pod the garbage collector removed (its VMI went another way): its log goes too."""
        uid = pod["metadata"].get("uid")
        self.anti_affinity.discard(("pods", pod["metadata"].get("namespace"), pod["metadata"]["name"]))
        self.consoles.pop(uid, None)
        self.boots.pop(uid, None)
        where = (pod["metadata"].get("namespace"), pod["metadata"]["name"])
        for owner in pod["metadata"].get("ownerReferences") or ():
            if self.pods.get(owner.get("uid")) == where:  # a migration target is not its VMI's pod (yet)
                self.pods.pop(owner.get("uid"), None)

    # -- the log subresource -----------------------------------------------------------------------------

    def log(self, res: Any, ns: str | None, name: str, params: dict[str, str]) -> bytes:
        """``GET pods/NAME/log``: one container's output, with tailLines and limitBytes as the API server
        reads them (the last N lines, then at most that many bytes)."""
        tail = _integer(params, "tailLines")
        limit = _integer(params, "limitBytes")
        problems = []
        if tail is not None and tail < 0:
            problems.append(f"tailLines: Invalid value: {tail}: must be greater than or equal to 0")
        if limit is not None and limit < 1:
            problems.append(f"limitBytes: Invalid value: {limit}: must be greater than 0")
        if problems:
            raise ApiError(422, f'PodLogOptions "{name}" is invalid: ' + ", ".join(problems),
                           details={"name": name, "kind": "PodLogOptions"})
        pod = self.store.objects.get(("pods", ns, name))
        if pod is None:
            raise not_found(res, name)
        spec = pod["spec"]
        names = [c["name"] for c in spec["containers"]]
        init_names = [c["name"] for c in spec.get("initContainers") or ()]
        container = params.get("container") or ""
        if not container:
            if len(names) != 1:
                message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                if init_names:
                    message += f" or one of the init containers: [{' '.join(init_names)}]"
                raise ApiError(400, message)
            container = names[0]
        elif container not in names + init_names:
            raise ApiError(400, f"container {container} is not valid for pod {name}")
        if not spec.get("nodeName"):
            return b""  # not on a node yet: the API server has no kubelet to ask and answers nothing
        if (pod.get("status") or {}).get("phase") != "Running":
            raise ApiError(400, f'container "{container}" in pod "{name}" is waiting to start: PodInitializing')
        lines = self.consoles.get(pod["metadata"]["uid"], []) if container == CONSOLE_CONTAINER else [
            "{\"component\":\"virt-launcher\",\"level\":\"info\",\"msg\":\"Domain started.\"}\n"]
        if tail is not None:
            lines = lines[-tail:] if tail else []
        data = "".join(lines).encode()
        return data[:limit] if limit is not None else data


def _integer(params: dict[str, str], name: str) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f'{name}: Invalid value: "{raw}": strconv.ParseInt: parsing "{raw}": invalid syntax'
                       ) from None
