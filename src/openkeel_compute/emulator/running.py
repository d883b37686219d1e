"""What happens to a running VMI: the guest comes up (its interfaces, its guest agent), and what the VM
controller, Multus and virt-handler do when the VM's template changes under it (interface hotplug, the
``RestartRequired`` condition).

``Running.boot`` fills the status of a VMI going Running; ``Running.step`` moves a running VMI's hot(un)plug on
by one step when its time has come (``Delays.hotplug`` each) and says whether work is left, so that the
lifecycle does not set the VMI aside; ``Running.sync_vm`` is the VM controller's part (the VM's template
applied to its VMI, absent interfaces cleared, RestartRequired).
"""

from __future__ import annotations

import copy
from typing import Any

from openkeel_compute.emulator import disks, guest, migrations, networks
from openkeel_compute.emulator.diskplug import VolumePlug
from openkeel_compute.emulator.netstatus import Interfaces
from openkeel_compute.emulator.store import clone, now

START_REVISION = "revision-start-vm-{uid}-{generation}"
RESTART_MESSAGE = "a non-live-updatable field was changed in the template spec"


class Running:
    def __init__(self, lifecycle: Any) -> None:
        self.lifecycle = lifecycle
        self.store = lifecycle.store

    def _configured(self, vmi: dict[str, Any]) -> dict[str, list[str]]:
        return guest.configured_addresses(vmi.get("spec") or {}, vmi["metadata"].get("namespace"), self.store.lookup)

    def _interfaces(self, vmi: dict[str, Any], pod: dict[str, Any] | None) -> Interfaces:
        return Interfaces(vmi, pod, self._configured(vmi), guest.has_agent(vmi))

    # -- the VMI ---------------------------------------------------------------------------------------

    def boot(self, vmi: dict[str, Any], new: dict[str, Any]) -> None:
        """The guest came up: ``new``'s status gets its interfaces, and its guest agent's report."""
        st = new["status"]
        pod = self.lifecycle.launchers.pod_of(vmi)
        st["interfaces"] = self._interfaces(vmi, pod).at_boot()
        ns = vmi["metadata"].get("namespace")
        st["volumeStatus"] = disks.boot_status(vmi.get("spec") or {},
                                               lambda name: self.store.lookup("PersistentVolumeClaim", name, ns))
        condition, st["migrationMethod"] = migrations.live_migratable(
            vmi.get("spec") or {}, vmi["metadata"].get("annotations") or {}, st["volumeStatus"])
        st["conditions"].insert(1, condition)
        if guest.has_agent(vmi):
            st["conditions"].append(guest.agent_condition())
            st["guestOSInfo"] = dict(guest.GUEST_OS_INFO)

    def step(self, vmi: dict[str, Any], clock: float) -> bool:
        """One step of what is under way on a running VMI; True while something is left to do."""
        busy = self._network_step(vmi, clock)
        vmi = self.store.lookup("VirtualMachineInstance", vmi["metadata"]["name"], vmi["metadata"].get("namespace"))
        return self._volume_step(vmi, clock) or busy

    def _volume_step(self, vmi: dict[str, Any], clock: float) -> bool:
        plug = VolumePlug(self.store, self.lifecycle.launchers, vmi)
        key = f"{vmi['metadata']['uid']}/vol"
        if plug.advance() is None:
            self.lifecycle.mark(key, None)
            return False
        if not self.lifecycle.due_key(key, self.lifecycle.delays.hotplug, clock):
            return True
        moved = plug.advance()
        if moved is not None:
            entries, attach, lines = moved
            new = dict(vmi)
            new["metadata"] = clone(vmi["metadata"])
            new["status"] = clone(vmi.get("status") or {})
            new["status"]["volumeStatus"] = plug.apply(entries, attach)
            condition, new["status"]["migrationMethod"] = migrations.live_migratable(
                new.get("spec") or {}, new["metadata"].get("annotations") or {}, new["status"]["volumeStatus"])
            conditions = new["status"].get("conditions") or []
            old = next((c for c in conditions if c.get("type") == "LiveMigratable"), None)
            if old is None or (old.get("status"), old.get("reason")) != (condition["status"], condition.get("reason")):
                new["status"]["conditions"] = [c for c in conditions if c.get("type") != "LiveMigratable"] + [condition]
            self.store.put(new)
            for _target, text in lines:
                self.lifecycle.launchers.kernel(vmi, text)
        self.lifecycle.mark(key, clock)
        return True

    def _network_step(self, vmi: dict[str, Any], clock: float) -> bool:
        pod = self.lifecycle.launchers.pod_of(vmi)
        ns = vmi["metadata"].get("namespace")

        def attachable(network: dict[str, Any]) -> bool:
            nad_ns, nad = networks.nad_key(ns, (network.get("multus") or {}).get("networkName") or "")
            return self.store.lookup("NetworkAttachmentDefinition", nad, nad_ns) is not None

        interfaces = Interfaces(vmi, pod, {}, guest.has_agent(vmi), attachable)
        key = f"{vmi['metadata']['uid']}/net"
        pending = interfaces.advance() is not None
        stale = self._condition_stale(vmi, interfaces.migration_required())
        if not pending and not stale:
            self.lifecycle.mark(key, None)
            return False
        due = pending and self.lifecycle.due_key(key, self.lifecycle.delays.hotplug, clock)
        if not due and not stale:
            return True
        new = dict(vmi)
        new["metadata"] = clone(vmi["metadata"])
        new["status"] = clone(vmi.get("status") or {})
        if due:
            interfaces.configured = self._configured(vmi)  # read now: the network data as it is at the plug
            moved = interfaces.advance()
            if moved is not None:
                new["status"]["interfaces"], attached = moved
                self._attach(vmi, pod, attached)
            self.lifecycle.mark(key, clock)
        after = Interfaces(new, self.lifecycle.launchers.pod_of(vmi), {}, interfaces.agent, attachable)
        self._set_migration_required(new["status"], after.migration_required())
        self.store.put(new)
        return True

    def moved(self, vmi: dict[str, Any], target: dict[str, Any]) -> None:
        """The VMI migrated into ``target``: its hotplug attachment pod follows it (a new one on the target's node,
        owned by the target pod), and its volumes say so."""
        old = VolumePlug(self.store, self.lifecycle.launchers, vmi)
        source = old.pod
        if source is None:
            return
        claims = [(v["name"], v["persistentVolumeClaim"]["claimName"]) for v in source["spec"].get("volumes") or ()]
        pod = self.store.put(disks.attachment_pod(vmi, target, claims))
        self.store._remove(("pods", source["metadata"].get("namespace"), source["metadata"]["name"]))
        new = dict(vmi)
        new["status"] = clone(vmi.get("status") or {})
        for entry in new["status"].get("volumeStatus") or ():
            if (entry.get("hotplugVolume") or {}).get("attachPodName") == source["metadata"]["name"]:
                entry["hotplugVolume"] = {"attachPodName": pod["metadata"]["name"],
                                          "attachPodUID": pod["metadata"]["uid"]}
        self.store.put(new)

    def forget(self, uid: str) -> None:
        self.lifecycle.mark(f"{uid}/net", None)
        self.lifecycle.mark(f"{uid}/vol", None)

    @staticmethod
    def _condition_stale(vmi: dict[str, Any], required: bool) -> bool:
        has = any(c.get("type") == "MigrationRequired" for c in (vmi.get("status") or {}).get("conditions") or ())
        return has != required

    @staticmethod
    def _set_migration_required(status: dict[str, Any], required: bool) -> None:
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "MigrationRequired"]
        old = next((c for c in status.get("conditions") or () if c.get("type") == "MigrationRequired"), None)
        if required:
            conditions.append(old or {"type": "MigrationRequired", "status": "False", "lastProbeTime": None,
                                      "lastTransitionTime": now(), "reason": "AutoMigrationPending"})
        status["conditions"] = conditions

    def _attach(self, vmi: dict[str, Any], pod: dict[str, Any] | None, attached: list[str]) -> None:
        """The pod's Multus annotations as the dynamic networks controller leaves them."""
        if pod is None:
            return
        spec = vmi.get("spec") or {}
        pairs = [(n, i) for n, i in networks.attachable(spec) if n.get("name") in attached]
        ns = pod["metadata"].get("namespace")
        annotations = dict(pod["metadata"].get("annotations") or {})
        selection = networks.selection(ns, pairs)
        if selection:
            annotations[networks.NETWORKS_ANNOTATION] = selection
        else:
            annotations.pop(networks.NETWORKS_ANNOTATION, None)
        status = pod.get("status") or {}
        pod_mac = networks.mac_of(pod["metadata"]["uid"], "eth0", None).replace("02:", "0a:", 1)
        annotations[networks.STATUS_ANNOTATION] = networks.network_status(
            ns, status.get("podIP") or "", pod_mac, pairs, vmi["metadata"]["uid"])
        if annotations != pod["metadata"].get("annotations"):
            self.store.put({**pod, "metadata": {**clone(pod["metadata"]), "annotations": annotations}})

    # -- the VM controller -----------------------------------------------------------------------------

    def start_revision(self, vm: dict[str, Any]) -> str:
        """The ControllerRevision of the VM as it starts (what RestartRequired compares with); older ones go."""
        meta = vm["metadata"]
        name = START_REVISION.format(uid=meta["uid"], generation=meta.get("generation", 1))
        ns = meta.get("namespace")
        prefix = f"revision-start-vm-{meta['uid']}-"
        for key in list(self.store.objects.dependents_of(meta["uid"])):
            if key[0] == "controllerrevisions" and key[2].startswith(prefix) and key[2] != name:
                self.store._remove(key)
        if self.store.lookup("ControllerRevision", name, ns) is None:
            snapshot = {"apiVersion": vm["apiVersion"], "kind": vm["kind"],
                        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "generation") if k in meta},
                        "spec": clone(vm.get("spec") or {})}
            status = vm.get("status") or {}
            for field in ("instancetype", "preference"):
                ref = ((status.get(f"{field}Ref") or {}).get("controllerRevisionRef") or {}).get("name")
                if snapshot["spec"].get(field) and ref:
                    snapshot["spec"][field]["revisionName"] = ref
            self.store.put({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                            "metadata": {"name": name, "namespace": ns, "ownerReferences": [{
                                "apiVersion": vm["apiVersion"], "kind": vm["kind"], "name": meta["name"],
                                "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
                            "data": snapshot, "revision": meta.get("generation", 1)})
        return name

    def sync_vm(self, vm: dict[str, Any], vmi: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
        """The VM controller's sync of a live VMI with the VM's template: interfaces (hotplug) and hotpluggable
        volumes (declarative hotplug, once the VMI runs) written to the VMI; returns the VM's template spec
        without the absent interfaces that are gone (None: unchanged) and the hotplug error KubeVirt would
        meet (the VMI update webhook's refusal), if any."""
        template_spec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
        live = vmi is not None and not vmi["metadata"].get("deletionTimestamp")
        error = None
        if live:
            placed = _placement_sync(template_spec, vmi)  # KubeVirt's LiveUpdate of node selector and affinity
            if placed is not None:
                vmi = self.store.put({**vmi, "spec": placed})
            new_spec = networks.sync_vmi(template_spec, vmi)
            if new_spec is not None:
                vmi = self.store.put({**vmi, "spec": new_spec})
            if (vmi.get("status") or {}).get("phase") == "Running" and \
                    (vm.get("spec") or {}).get("updateVolumesStrategy") != "Migration":
                new_spec = disks.sync_vmi_volumes(template_spec, vmi)
                if new_spec is not None:
                    refusal = disks.hotplug_refusal(vmi.get("spec") or {}, new_spec)
                    if refusal is None:
                        vmi = self.store.put({**vmi, "spec": new_spec})
                    else:
                        error = ("Error encountered while handling declarative hotplug volumes: admission webhook "
                                 '"virtualmachineinstances-update-validator.kubevirt.io" denied the request: '
                                 + refusal)
        if vmi is not None and not live:
            return None, error
        return networks.clear_vm(template_spec, vmi), error

    def restart_required(self, vm: dict[str, Any], vmi: dict[str, Any] | None) -> bool:
        """KubeVirt's syncRestartRequired: the VM's template differs from the one its VMI started with in a
        field that cannot be updated live (CPU sockets, guest memory, node selector, affinity, tolerations,
        hotpluggable volumes and the interfaces hotplug carries can)."""
        if vmi is None or vmi["metadata"].get("deletionTimestamp"):
            return False
        name = (vmi.get("status") or {}).get("virtualMachineRevisionName")
        revision = self.store.lookup("ControllerRevision", name, vmi["metadata"].get("namespace")) if name else None
        if revision is None or revision.get("revision") == vm["metadata"].get("generation"):
            return False  # the VM has not changed since its VMI started
        last = copy.deepcopy((((revision.get("data") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
        current = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
        return not live_equal(last, current, vmi.get("spec") or {}, (vm.get("spec") or {}).get("updateVolumesStrategy"))


def _placement_sync(template_spec: dict[str, Any], vmi: dict[str, Any]) -> dict[str, Any] | None:
    """The VM controller's live update (rollout strategy LiveUpdate) of ``nodeSelector`` and ``affinity``:
    the VMI's spec takes the template's (a later migration's target pod follows them); None: unchanged."""
    spec = vmi.get("spec") or {}
    if all(template_spec.get(field) == spec.get(field) for field in ("nodeSelector", "affinity")):
        return None
    new = copy.deepcopy(spec)
    for field in ("nodeSelector", "affinity"):
        if template_spec.get(field) is not None:
            new[field] = copy.deepcopy(template_spec[field])
        else:
            new.pop(field, None)
    return new


def live_equal(last: dict[str, Any], current: dict[str, Any], vmi_spec: dict[str, Any],
               volumes_strategy: str | None = None) -> bool:
    """Whether ``current`` (the VM's template spec) differs from ``last`` only where a live update reaches."""
    domain = last.setdefault("domain", {})
    cur_domain = current.get("domain") or {}
    if disks.valid_live_volumes(last, current, volumes_strategy):
        if "volumes" in current:
            last["volumes"] = copy.deepcopy(current["volumes"])
        else:
            last.pop("volumes", None)
    if disks.valid_live_disks(last, current):
        cur_disks = (cur_domain.get("devices") or {}).get("disks")
        if cur_disks is not None:
            domain.setdefault("devices", {})["disks"] = copy.deepcopy(cur_disks)
        else:
            (domain.get("devices") or {}).pop("disks", None)
    if "cpu" in domain and "cpu" in cur_domain:
        if "sockets" in cur_domain["cpu"]:
            domain["cpu"]["sockets"] = cur_domain["cpu"]["sockets"]
        else:
            domain["cpu"].pop("sockets", None)
    if (cur_domain.get("memory") or {}).get("guest") is not None:
        domain.setdefault("memory", {})["guest"] = cur_domain["memory"]["guest"]
    for field in ("nodeSelector", "affinity", "tolerations"):
        if field in current:
            last[field] = copy.deepcopy(current[field])
        else:
            last.pop(field, None)
    if not networks.restart_required(current, vmi_spec):
        devices = domain.setdefault("devices", {})
        cur_devices = cur_domain.get("devices") or {}
        if "interfaces" in cur_devices:
            devices["interfaces"] = copy.deepcopy(cur_devices["interfaces"])
        else:
            devices.pop("interfaces", None)
        if "networks" in current:
            last["networks"] = copy.deepcopy(current["networks"])
        else:
            last.pop("networks", None)
    if not (domain.get("devices") or {}) and "devices" not in cur_domain:
        domain.pop("devices", None)
    return last == current
