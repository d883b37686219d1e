"""KubeVirt's subresources.kubevirt.io/v1 lifecycle verbs, with virt-api's preconditions and messages.

VirtualMachine start, stop and restart record state change requests in the VM's status, which the
emulated VM controller acts on (lifecycle.py); VirtualMachineInstance pause and unpause change the
running VMI's Paused condition at once, as virt-handler does; softreboot is accepted on a running,
unpaused VMI.
"""

from __future__ import annotations

import copy
from typing import Any

from openkeel_compute.emulator.resources import BY_KIND
from openkeel_compute.emulator.store import ApiError, Store, condition

VM_VERBS = ("start", "stop", "restart", "migrate", "addvolume", "removevolume")
VMI_VERBS = ("pause", "unpause", "softreboot", "addvolume", "removevolume")
VOLUME_VERBS = ("addvolume", "removevolume")


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
    elif verb == "migrate":
        migrate(store, ns, name, vmi, body)
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
        new["status"]["conditions"] = [*conditions, condition("Paused", "True", "PausedByUser",
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


# -- volume hotplug (pkg/virt-api/rest/volumes.go, DeclarativeHotplugVolumes on, HotplugVolumes off) -----

def _volume_options(verb: str, body: Any) -> dict[str, Any]:
    if body is None:
        raise ApiError(400, "Request with no body, a new name is expected as the request body")
    if not isinstance(body, dict):
        raise ApiError(400, "the body of the request was in an unknown format")
    opts = copy.deepcopy(body)
    kind = "AddVolumeOptions" if verb == "addvolume" else "RemoveVolumeOptions"
    if not opts.get("name"):
        raise ApiError(400, f"{kind} requires name to be set")
    if verb == "addvolume":
        if opts.get("disk") is None:
            raise ApiError(400, "AddVolumeOptions requires disk to not be nil")
        if opts.get("volumeSource") is None:
            raise ApiError(400, "AddVolumeOptions requires VolumeSource to not be nil")
        opts["disk"]["name"] = opts["name"]
        for source in ("dataVolume", "persistentVolumeClaim"):
            if isinstance(opts["volumeSource"].get(source), dict):
                opts["volumeSource"][source]["hotpluggable"] = True
                break
    return opts


def _source_name(volume: dict[str, Any]) -> str | None:
    return (volume.get("dataVolume") or {}).get("name") or (volume.get("persistentVolumeClaim") or {}).get("claimName")


def _verify(volumes: list[dict[str, Any]], verb: str, opts: dict[str, Any]) -> str | None:
    """verifyVolumeOption's refusal (None: the request applies)."""
    name = opts["name"]
    if verb == "addvolume":
        wanted = _source_name(opts.get("volumeSource") or {}) or ""
        for volume in volumes:
            if volume.get("name") == name:
                return f"Unable to add volume [{name}] because volume with that name already exists"
            if _source_name(volume) == wanted:
                return f"Unable to add volume source [{wanted}] because it already exists"
        return None
    for volume in volumes:
        if volume.get("name") == name or _source_name(volume) == name:
            source = volume.get("dataVolume") or volume.get("persistentVolumeClaim") or {}
            if not source.get("hotpluggable"):
                return f"Unable to remove volume [{volume.get('name')}] because it is not hotpluggable"
            return None
    return f"Unable to remove volume [{name}] because it does not exist"


def _applied(spec: dict[str, Any], verb: str, opts: dict[str, Any]) -> tuple[list, list]:
    """controller.ApplyVolumeRequestOnVMISpec: (volumes, disks) with the request applied."""
    volumes = copy.deepcopy(spec.get("volumes") or [])
    disks = copy.deepcopy(((spec.get("domain") or {}).get("devices") or {}).get("disks") or [])
    name = opts["name"]
    if verb == "addvolume":
        if not any(v.get("name") == name for v in volumes):
            volume = {"name": name}
            source = opts["volumeSource"]
            for field in ("persistentVolumeClaim", "dataVolume"):
                if isinstance(source.get(field), dict):
                    volume[field] = {**source[field], "hotpluggable": True}
                    break
            volumes.append(volume)
            disks.append({**opts["disk"], "name": name})
    else:
        volumes = [v for v in volumes if v.get("name") != name]
        disks = [d for d in disks if d.get("name") != name]
    return volumes, disks


def volume_verb(store: Store, kind: str, ns: str, name: str, verb: str, body: Any) -> None:
    """PUT …/{virtualmachines,virtualmachineinstances}/NAME/{addvolume,removevolume}: a JSON patch of the VM's
    template (declarative hotplug does the rest) or, for a VMI no VM owns, of the running VMI."""
    opts = _volume_options(verb, body)
    resource = "virtualmachine" if kind == "VirtualMachine" else "virtualmachineinstance"
    obj = store.lookup(kind, name, ns)
    if obj is None:
        raise _not_found(resource, name)
    if kind == "VirtualMachine":
        spec, prefix = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}, "/spec/template/spec"
    else:
        if any(r.get("kind") == "VirtualMachine" for r in obj["metadata"].get("ownerReferences") or ()):
            raise ApiError(400, f"VMI {ns}/{name} is owned by a VM")
        if (obj.get("status") or {}).get("phase") != "Running":
            raise _conflict(resource, name, "VMI is not running")
        spec, prefix = obj.get("spec") or {}, "/spec"
    refusal = _verify(spec.get("volumes") or [], verb, opts)
    if refusal:
        raise _conflict(resource, name, refusal)
    volumes, disks = _applied(spec, verb, opts)
    old_volumes = spec.get("volumes")
    old_disks = ((spec.get("domain") or {}).get("devices") or {}).get("disks")
    patch = [{"op": "test", "path": f"{prefix}/volumes", "value": old_volumes},
             {"op": "test", "path": f"{prefix}/domain/devices/disks", "value": old_disks},
             {"op": "replace" if old_volumes else "add", "path": f"{prefix}/volumes", "value": volumes},
             {"op": "replace" if old_disks else "add", "path": f"{prefix}/domain/devices/disks", "value": disks}]
    dry = opts.get("dryRun") or []
    params = {"dryRun": "All"} if dry[:1] == ["All"] else {}
    store.service = True  # virt-api's service account: the VMI update webhook lets it change a VMI's spec
    try:
        store.patch(BY_KIND[kind], ns, name, patch, "application/json-patch+json", params)
    except ApiError as exc:
        if exc.code == 422:
            raise
        raise ApiError(500, f"Internal error occurred: unable to patch {'vm' if kind == 'VirtualMachine' else 'vmi'}: "
                            f"{exc.message}") from None
    finally:
        store.service = False


def migrate(store: Store, ns: str, name: str, vmi: dict[str, Any] | None, body: dict[str, Any]) -> None:
    """PUT …/virtualmachines/NAME/migrate (MigrateOptions): a VirtualMachineInstanceMigration named
    ``kubevirt-migrate-vm-…`` for the running VMI, with the options' ``addedNodeSelector``."""
    if vmi is None:
        raise _not_found("virtualmachineinstance", name)
    if (vmi.get("status") or {}).get("phase") != "Running":
        raise _conflict("virtualmachine", name, "VM is not running")
    spec: dict[str, Any] = {"vmiName": name}
    if body.get("addedNodeSelector"):
        spec["addedNodeSelector"] = body["addedNodeSelector"]
    params = {"dryRun": "All"} if (body.get("dryRun") or [])[:1] == ["All"] else {}
    try:
        store.create(BY_KIND["VirtualMachineInstanceMigration"], ns, {
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"generateName": "kubevirt-migrate-vm-"}, "spec": spec}, params)
    except ApiError as exc:
        raise ApiError(500, f"Internal error occurred: {exc.message}") from None
