"""KubeVirt's subresources.kubevirt.io/v1 lifecycle verbs, with virt-api's preconditions and messages.

VirtualMachine start, stop and restart record state change requests in the VM's status, which the
emulated VM controller acts on (lifecycle.py); VirtualMachineInstance pause and unpause change the
running VMI's Paused condition at once, as virt-handler does; softreboot is accepted on a running,
unpaused VMI.
"""

from __future__ import annotations

import copy
from typing import Any

from openkeel_compute.emulator.lifecycle import _condition
from openkeel_compute.emulator.store import ApiError, Store

VM_VERBS = ("start", "stop", "restart")
VMI_VERBS = ("pause", "unpause", "softreboot")


def _conflict(resource: str, name: str, why: str) -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {resource}.kubevirt.io "{name}": {why}',
                    details={"name": name, "group": "kubevirt.io", "kind": resource})


def _not_found(resource: str, name: str) -> ApiError:
    return ApiError(404, f'{resource}.kubevirt.io "{name}" not found',
                    details={"name": name, "group": "kubevirt.io", "kind": resource})


def _final(vmi: dict[str, Any] | None) -> bool:
    return vmi is not None and (vmi.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _run_strategy(vm: dict[str, Any]) -> str:
    spec = vm.get("spec") or {}
    if spec.get("runStrategy"):
        return spec["runStrategy"]
    return "Always" if spec.get("running") else "Halted"


def _request(store: Store, vm: dict[str, Any], *changes: dict[str, Any]) -> None:
    new = copy.deepcopy(vm)
    status = new.setdefault("status", {})
    pending = status.get("stateChangeRequests") or []
    if pending and not (len(changes) == 1 and changes[0]["action"] == "Stop"):
        raise ApiError(500, "Internal error occurred: unable to complete request: stop/start already underway")
    status["stateChangeRequests"] = list(changes)
    status.pop("startFailure", None)
    store.put(new)


def vm_verb(store: Store, ns: str, name: str, verb: str, body: dict[str, Any]) -> None:
    vm = store.lookup("VirtualMachine", name, ns)
    if vm is None:
        raise _not_found("virtualmachine", name)
    vmi = store.lookup("VirtualMachineInstance", name, ns)
    strategy = _run_strategy(vm)
    if verb == "start":
        phase = ((vmi or {}).get("status") or {}).get("phase")
        if vmi is not None and not _final(vmi) and phase not in (None, "", "Unknown"):
            raise _conflict("virtualmachine", name, "VM is already running")
        if strategy in ("Always", "Once"):
            raise _conflict("virtualmachine", name, f"{strategy} does not support manual start requests")
        if strategy == "Halted":
            new = copy.deepcopy(vm)
            new["spec"]["runStrategy"] = "Always"
            store.put(new)
            return
        start = {"action": "Start"}
        if body.get("paused"):
            start["data"] = {"paused": "true"}
        if _final(vmi):
            _request(store, vm, {"action": "Stop", "uid": vmi["metadata"]["uid"]}, start)
        else:
            _request(store, vm, start)
    elif verb == "stop":
        grace = body.get("gracePeriod")
        if strategy in ("Always", "Once"):
            new = copy.deepcopy(vm)
            new["spec"]["runStrategy"] = "Halted"
            store.put(new)
            return
        if vmi is None or _final(vmi):
            raise _conflict("virtualmachine", name, "VM is not running")
        if strategy == "Halted" and grace is None:
            raise _conflict("virtualmachine", name, "Halted only supports manual stop requests with a shorter "
                                                    "graceperiod")
        if grace is not None:
            new_vmi = copy.deepcopy(vmi)
            new_vmi.setdefault("spec", {})["terminationGracePeriodSeconds"] = grace
            store.put(new_vmi)
        _request(store, vm, {"action": "Stop", "uid": vmi["metadata"]["uid"]})
    elif verb == "restart":
        grace = body.get("gracePeriodSeconds")
        if grace is not None and grace > 0:
            raise ApiError(400, "For force restart, only gracePeriod=0 is supported for now")
        if grace is not None and grace < 0:
            raise ApiError(400, "gracePeriod has to be greater or equal to 0")
        if strategy in ("Halted", "Once"):
            raise _conflict("virtualmachine", name, f"RunStategy {strategy} does not support manual restart "
                                                    "requests")
        if vmi is None:
            raise _conflict("virtualmachine", name, "VM is not running: Halted")
        _request(store, vm, {"action": "Stop", "uid": vmi["metadata"]["uid"]}, {"action": "Start"})


def vmi_verb(store: Store, ns: str, name: str, verb: str, body: dict[str, Any]) -> None:
    if verb == "unpause":
        vm = store.lookup("VirtualMachine", name, ns)
        if vm is not None and (vm.get("status") or {}).get("snapshotInProgress"):
            raise _conflict("virtualmachine", name, "VM snapshot is in progress")
    vmi = store.lookup("VirtualMachineInstance", name, ns)
    if vmi is None:
        raise _not_found("virtualmachineinstance", name)
    status = vmi.get("status") or {}
    conditions = status.get("conditions") or []
    paused = any(c.get("type") == "Paused" for c in conditions)
    running = status.get("phase") == "Running"
    if verb == "pause":
        if not running:
            raise _conflict("virtualmachineinstance", name, "VM is not running")
        if (vmi.get("spec") or {}).get("livenessProbe"):
            raise ApiError(403, f'virtualmachineinstance.kubevirt.io "{name}" is forbidden: Pausing VMIs with '
                                "LivenessProbe is currently not supported")
        if paused:
            raise _conflict("virtualmachineinstance", name, "VMI is already paused")
        new = copy.deepcopy(vmi)
        new["status"]["conditions"] = [*conditions, _condition("Paused", "True", "PausedByUser",
                                                               "VMI was paused by user")]
        store.put(new)
    elif verb == "unpause":
        if not running:
            raise _conflict("virtualmachineinstance", name, "VMI is not running")
        if not paused:
            raise _conflict("virtualmachineinstance", name, "VMI is not paused")
        new = copy.deepcopy(vmi)
        new["status"]["conditions"] = [c for c in conditions if c.get("type") != "Paused"]
        store.put(new)
    elif verb == "softreboot":
        if not running:
            raise _conflict("virtualmachineinstance", name, "VM is not running")
        if any(c.get("type") == "Paused" and c.get("status") == "True" for c in conditions):
            raise _conflict("virtualmachineinstance", name, "VMI is paused")
