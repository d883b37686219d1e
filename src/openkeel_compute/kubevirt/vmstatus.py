"""KubeVirt status back into Nova's states: pure, data in and a decision out (no I/O).

``observe`` reads a server's VirtualMachine, its VirtualMachineInstance and its DataVolumes as the
cluster reports them and says what the server's vm_state, task_state and power_state become, with a
fault when the server goes to ERROR and the addresses the VMI shows. See docs/kubevirt-mapping.md,
"Servers".
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

from openkeel_compute.kubevirt.rescue import is_rescued
from openkeel_compute.model.states import (
    ACTIVE,
    BUILDING,
    ERROR,
    PAUSED,
    STOPPED,
    SUSPENDED,
    power_state,
    task_states,
)

BUILD_TIMEOUT_MESSAGE = "Instance build timed out. Set to error state."
VM_GONE_MESSAGE = "The server's virtual machine is gone from the cluster."
#: an import that restarted this many times has failed, even if CDI would try again
IMPORT_RETRIES = 3

_FINAL = ("Succeeded", "Failed")
_NOT_STARTED = ("", "Pending", "Scheduling", "Scheduled")
#: a build's stages (its task states) in order, as Nova's compute passes through them
BUILD_STAGES = (task_states.SCHEDULING, None, task_states.NETWORKING, task_states.BLOCK_DEVICE_MAPPING,
                task_states.SPAWNING)
#: those the build step writes before the VM exists (the observation keeps them)
BEFORE_THE_VM = BUILD_STAGES[1:4]
# Tasks a running VMI completes, and the vm_state each ends in.
_DONE_WHEN_RUNNING = {
    task_states.POWERING_ON: ACTIVE,
    task_states.REBOOTING: ACTIVE, task_states.REBOOT_PENDING: ACTIVE, task_states.REBOOT_STARTED: ACTIVE,
    task_states.REBOOTING_HARD: ACTIVE, task_states.REBOOT_PENDING_HARD: ACTIVE,
    task_states.REBOOT_STARTED_HARD: ACTIVE,
    task_states.UNPAUSING: ACTIVE, task_states.RESUMING: ACTIVE, task_states.REBUILD_SPAWNING: ACTIVE,
    task_states.UNRESCUING: ACTIVE, task_states.UNSHELVING: ACTIVE,
}
_HARD_REBOOT = (task_states.REBOOTING_HARD, task_states.REBOOT_PENDING_HARD, task_states.REBOOT_STARTED_HARD)
# Nova's power sync leaves these vm_states alone when the guest is off.
_LEFT_ALONE = (BUILDING, "rescued", "resized", SUSPENDED, ERROR, "soft-delete", "shelved", "shelved_offloaded")


class Fault(NamedTuple):
    """An instance fault as Nova records it: code, message (the API cuts it to 255), details."""

    code: int
    message: str
    details: str


class Observation(NamedTuple):
    """What the server's row becomes. The controller writes it with expected_task_state = the task it read."""

    vm_state: str
    task_state: str | None
    power_state: int
    fault: Fault | None = None
    #: the addresses the guest has now: its VMI's; none while no VMI runs or it shows none (a stopped
    #: server's pod-network address is given back with its launcher pod). None: keep what the row has
    addresses: dict[str, list[dict[str, Any]]] | None = None
    progress: int | None = None
    host: str | None = None  # the node the VMI runs on
    launched: bool = False  # the server reached Running for the first time: set launched_at
    host_status_unknown: bool = False  # the node stopped answering (2.16 host_status UNKNOWN)
    deleted: bool = False  # a delete finished: the VM object is gone
    stop_guest: bool = False  # a stopped server's guest runs: stop it, as Nova's power sync does
    stopped_by_sync: bool = False  # a guest found off without a task: Nova's power sync calls its stop API


class _Seen(TypedDict):
    """What every observation of a server carries, whatever its state."""

    addresses: dict[str, list[dict[str, Any]]] | None
    host: str | None
    host_status_unknown: bool


def _start_requested(vm: Mapping[str, Any] | None) -> bool:
    """Whether the VM has a start request KubeVirt has not carried out yet (``status.stateChangeRequests``:
    a restart is a stop then a start)."""
    requests = ((vm or {}).get("status") or {}).get("stateChangeRequests") or ()
    return any(r.get("action") == "Start" for r in requests if isinstance(r, Mapping))


def _conditions(obj: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    if not obj:
        return {}
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or ()}


def _is(condition: Mapping[str, Any] | None, status: str, reason: str | None = None) -> bool:
    return (condition is not None and condition.get("status") == status
            and (reason is None or condition.get("reason") == reason))


def _vmi_power(vmi: Mapping[str, Any] | None) -> tuple[int, bool]:
    """(power_state, node unresponsive) of a VMI."""
    if vmi is None:
        return power_state.SHUTDOWN, False
    status = vmi.get("status") or {}
    phase = status.get("phase") or ""
    if (phase == "Failed" and status.get("reason") == "NodeUnresponsive") or phase == "Unknown":
        return power_state.NOSTATE, True
    if phase in _FINAL:
        return power_state.SHUTDOWN, False
    if phase == "Running":
        paused = _is(_conditions(vmi).get("Paused"), "True")
        return (power_state.PAUSED if paused else power_state.RUNNING), False
    return power_state.NOSTATE, False


def addresses(vmi: Mapping[str, Any] | None, network_name: str, interface: str = "default"
              ) -> dict[str, list[dict[str, Any]]] | None:
    """Nova's ``addresses`` from the VMI's pod-network interface, or None when the VMI shows no address."""
    if vmi is None:
        return None
    entries = [i for i in (vmi.get("status") or {}).get("interfaces") or () if i.get("name") == interface]
    if not entries:
        return None
    entry = entries[0]
    ips = list(entry.get("ipAddresses") or ([entry["ipAddress"]] if entry.get("ipAddress") else []))
    found = []
    for text in ips:
        try:
            ip = ipaddress.ip_address(text.split("/")[0])
        except ValueError:
            continue
        if ip.is_link_local:
            continue
        found.append({"version": ip.version, "addr": str(ip), "OS-EXT-IPS:type": "fixed",
                      "OS-EXT-IPS-MAC:mac_addr": entry.get("mac")})
    return {network_name: found} if found else None


def _progress(data_volumes: Sequence[Mapping[str, Any]]) -> int | None:
    values = []
    for dv in data_volumes:
        text = str((dv.get("status") or {}).get("progress") or "")
        try:
            values.append(float(text.rstrip("%")))
        except ValueError:
            continue
    return int(min(values)) if values else None


def _failed_import(dv: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Running condition of a DataVolume whose import failed ({} when it has none), None while it has not:
    phase Failed (a fatal error), or an importer restarted IMPORT_RETRIES times and stopped on an error again."""
    status = dv.get("status") or {}
    running = _conditions(dv).get("Running")
    if status.get("phase") == "Failed" or (int(status.get("restartCount") or 0) >= IMPORT_RETRIES
                                           and _is(running, "False")):
        return running or {}
    return None


def _import_failure(data_volumes: Sequence[Mapping[str, Any]]) -> str | None:
    for dv in data_volumes:
        running = _failed_import(dv)
        if running is not None:
            reason = running.get("reason") or (dv.get("status") or {}).get("phase")
            message = running.get("message") or "the import failed"
            name = (dv.get("metadata") or {}).get("name", "")
            return f"the disk {name} could not be imported from the image ({reason}): {message}"
    return None


#: the details of a build's fault when its root disk could not be imported (``_start_failure``)
IMPORT_FAILED_DETAILS = "KubeVirt: DataVolumeError: "
_IMPORTER_PREFIX = "Unable to connect to http data source: "
_NETWORK_ERROR = re.compile(r'^HTTP request errored: Get "(?P<url>[^"]*)": (?P<reason>.*)$', re.DOTALL)
_STATUS = re.compile(r"^expected status code 200, got (?P<code>[0-9]+)\.")


def import_failure_message(data_volumes: Sequence[Mapping[str, Any]]) -> str | None:
    """The message of the failed import (CDI's importer's, in the Running condition), or None."""
    for dv in data_volumes:
        running = _failed_import(dv)
        if running is not None:
            return str(running.get("message") or "")
    return None


def download_reason(image_id: str, importer_message: str) -> str:
    """What Nova's compute reports when it cannot download the image (the exception its image API raises
    for Glance's answer): Glance's 404 (the image deleted) is ImageNotFound, 401/403 ImageNotAuthorized, an
    image service that does not answer GlanceConnectionFailed."""
    text = importer_message.removeprefix(_IMPORTER_PREFIX)
    status = _STATUS.match(text)
    if status is not None:
        code = int(status.group("code"))
        if code == 404:
            return f"Image {image_id} could not be found."
        if code in (401, 403):
            return f"Not authorized for image {image_id}."
        return f"HTTP {text.partition('Status: ')[2] or code}"  # glanceclient's error, Nova passes it on
    network = _NETWORK_ERROR.match(text)
    if network is not None:
        parts = urllib.parse.urlsplit(network.group("url"))
        return f"Connection to glance host {parts.scheme}://{parts.netloc} failed: {network.group('reason')}"
    return text


def download_fault(uuid: str, image_id: str, importer_message: str, details: str, tried: int,
                   max_attempts: int) -> Fault:
    """Nova's fault for a build whose image could not be downloaded, once no other node is left to try.

    Nova's compute reschedules such a build (the download failed on this host); its conductor ends it once
    the alternates are used up: ``tried`` nodes tried, ``max_attempts`` Nova's ``[scheduler] max_attempts``.
    With reschedules off (max_attempts 1) the fault is the download's own reason."""
    reason = download_reason(image_id, importer_message)
    if max_attempts <= 1:
        message = reason
    elif tried >= max_attempts:
        message = (f"Exceeded maximum number of retries. Exceeded max scheduling attempts {max_attempts} for "
                   f"instance {uuid}. Last exception: {reason}")
    else:
        message = (f"Exceeded maximum number of retries. Exhausted all hosts available for retrying build "
                   f"failures for instance {uuid}.")
    return Fault(500, message, details)


#: KubeVirt's reasons (its VM controller's ``Failure`` condition) for a VM whose instancetype or preference
#: is not in the cluster: OpenKeel applies a new VM before them, so for a moment each new VM has one
SIZING_NOT_FOUND = ("FailedFindInstancetype", "FailedFindPreference")
#: how long such a condition is taken for that moment, not a fault (seconds since its transition)
SIZING_GRACE = 60.0


def _start_failure(vm: Mapping[str, Any] | None, vmi: Mapping[str, Any] | None, uuid: str,
                   data_volumes: Sequence[Mapping[str, Any]], now: dt.datetime, grace: float) -> Fault | None:
    """The fault of a VM that cannot start, naming KubeVirt's reason, or None."""
    vmi_conditions = _conditions(vmi)
    scheduled = vmi_conditions.get("PodScheduled") or _conditions(vm).get("PodScheduled")
    if scheduled is not None and _is(scheduled, "False", "Unschedulable") and not _within(scheduled, now, grace):
        message = scheduled.get("message") or "Unschedulable"
        return Fault(500, f"No valid host was found. {message}", f"KubeVirt: Unschedulable: {message}")
    imported = _import_failure(data_volumes)
    if imported:
        return Fault(500, f"Build of instance {uuid} aborted: {imported}", f"{IMPORT_FAILED_DETAILS}{imported}")
    synchronized = vmi_conditions.get("Synchronized")
    if synchronized is not None and _is(synchronized, "False") and synchronized.get("reason") in (
            "FailedPvcNotFound", "ErrImagePull", "ImagePullBackOff"):
        reason, message = synchronized.get("reason"), synchronized.get("message") or ""
        return Fault(500, f"Build of instance {uuid} aborted: {reason}: {message}", f"KubeVirt: {reason}: {message}")
    failure = _conditions(vm).get("Failure")
    if failure is not None and failure.get("reason") in SIZING_NOT_FOUND and _within(failure, now, SIZING_GRACE):
        return None  # a new VM's own instancetype and preference are applied just after it (KubeVirt then starts it)
    if failure is not None and _is(failure, "True"):
        reason, message = failure.get("reason") or "Failure", failure.get("message") or ""
        return Fault(500, f"Build of instance {uuid} aborted: {reason}: {message}", f"KubeVirt: {reason}: {message}")
    return None


def _gone(uuid: str) -> Fault:
    return Fault(500, VM_GONE_MESSAGE, f"KubeVirt: VirtualMachine {uuid} not found")


def _within(condition: Mapping[str, Any] | None, now: dt.datetime, grace: float) -> bool:
    """True while a condition is younger than the grace (an autoscaler may still add a node)."""
    if not grace or condition is None:
        return False
    since = _timestamp(condition.get("lastTransitionTime"))
    if since is None:
        return False
    if (since.tzinfo is None) != (now.tzinfo is None):  # the cluster's "...Z" against the controller's naive UTC
        since, now = since.replace(tzinfo=None) - (since.utcoffset() or dt.timedelta()), now.replace(tzinfo=None) - (
            now.utcoffset() or dt.timedelta())
    return (now - since).total_seconds() < grace


def _timestamp(value: Any) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromisoformat(str(value))


def observe(server: Mapping[str, Any], vm: Mapping[str, Any] | None, vmi: Mapping[str, Any] | None,
            data_volumes: Sequence[Mapping[str, Any]], now: dt.datetime, build_started_at: dt.datetime | None,
            build_timeout: float, network_name: str = "pod-network", unschedulable_grace: float = 0,
            node_gone: bool = False) -> Observation:
    """What KubeVirt's objects say about a server.

    ``server``: its row (uuid, vm_state, task_state, launched_at, vm_name once its VM was created;
    ``vmi_uid``, the VMI that ran before a hard reboot, when the controller keeps it). ``vm``/``vmi``:
    the objects or None when absent; ``data_volumes``: the server's DataVolumes. ``build_timeout``: Nova's instance_build_timeout in
    seconds, 0 for none; a build older than that is an ERROR, as Nova's periodic check makes it.
    ``unschedulable_grace``: seconds a launcher pod may stay unschedulable before that is a failure
    (a cluster autoscaler may be adding a node); 0 fails at once. ``node_gone``: the VMI's node object
    no longer exists (deleted, or its node pool scaled down).
    """
    uuid = str(server["uuid"])
    vm_state = server["vm_state"]
    task = server.get("task_state")
    power, unresponsive = _vmi_power(vmi)
    vmi_status = (vmi or {}).get("status") or {}
    phase = (vmi_status.get("phase") or "") if vmi is not None else None
    if node_gone and phase == "Failed":
        # A node that stopped answering and was then deleted: KubeVirt's node controller had failed the VMI
        # with reason NodeUnresponsive, and nothing will ever run it there again. Its guest is not running,
        # so it is the guest shutdown Nova's power sync turns into a stop (SHUTOFF), as KubeVirt reports a
        # VMI whose launcher pod went with its node (Failed, no reason) -- not "host unknown" any more.
        power, unresponsive = power_state.SHUTDOWN, False
    host = vmi_status.get("nodeName")
    # Never an address the guest no longer has: the pod network's address goes with the launcher pod (a
    # stop, a reboot, a rebuild, a resize, a move give the new VMI a new one, unless the network plugin
    # keeps it), so what a VMI does not show (none, a finished one, a new one not yet reporting) is none.
    seen = (addresses(vmi, network_name) if phase not in _FINAL else None) or {}
    base: _Seen = {"addresses": seen, "host": host, "host_status_unknown": unresponsive}

    if task == task_states.DELETING:
        # Deleted once the VM and its disks are gone (the VM's disks go with it, by owner reference).
        return Observation(vm_state, task, power, deleted=vm is None and not data_volumes, **base)

    if vm_state == BUILDING and server.get("launched_at") is None:
        fault = _start_failure(vm, vmi, uuid, data_volumes, now, unschedulable_grace)
        if fault is None and phase == "Failed":
            message = vmi_status.get("reason") or "the virtual machine failed before it ran"
            fault = Fault(500, f"Build of instance {uuid} aborted: {message}", f"KubeVirt: VMI Failed: {message}")
        if fault is not None:
            return Observation(ERROR, None, power, fault, **base)
        if phase == "Running":
            # the import's progress shown during the build ends; Nova shows an ACTIVE server's progress as 0
            return Observation(ACTIVE, None, power, launched=True, progress=0, **base)
        started = _timestamp(build_started_at)
        if build_timeout and started is not None and (now - started).total_seconds() > build_timeout:
            return Observation(ERROR, None, power, Fault(500, BUILD_TIMEOUT_MESSAGE, ""), **base)
        if vm is None:
            if server.get("vm_name"):  # the controller created it (it records the name after): removed since
                return Observation(ERROR, None, power, _gone(uuid), **base)
            # the build step's stages before the VM is made (controller/steps/build.py): the host chosen
            # (no task), the network allocated, the volumes mapped; before the claim still scheduling
            return Observation(BUILDING, task if task in BEFORE_THE_VM else task_states.SCHEDULING, power, **base)
        # The VM made and started: its guest is being spawned, as Nova's driver.spawn makes the root disk
        # from the image (the DataVolume's import, its progress shown), then defines and boots the guest.
        return Observation(BUILDING, task_states.SPAWNING, power,
                           progress=_progress(data_volumes) if phase not in _NOT_STARTED else None, **base)

    if vm is None:
        # Gone from the cluster (removed behind our back): Nova's power sync finds no guest on the host. A
        # server that ran is stopped through the stop API (SHUTOFF, no fault); a start or a hard reboot
        # makes the VM again from the server's record. A stop under way is done; any other task is its
        # step's to end (it makes the VM again, or ends in Nova's fault).
        if task == task_states.POWERING_OFF:
            return Observation(STOPPED, None, power_state.NOSTATE, **base)
        if task is None and vm_state not in _LEFT_ALONE and vm_state != STOPPED:
            return Observation(STOPPED, None, power_state.NOSTATE, stopped_by_sync=True, **base)
        if task is None and vm_state == "shelved_offloaded":  # Nova keeps the power state it had when offloaded
            return Observation(vm_state, None, power_state.SHUTDOWN, **base)
        return Observation(vm_state, task, power_state.NOSTATE if task is None else power, **base)
    if unresponsive:
        return Observation(vm_state, task, power, **base)

    if phase == "Running":
        if power == power_state.PAUSED:
            reason = (_conditions(vmi).get("Paused") or {}).get("reason")
            if task == task_states.PAUSING and reason == "PausedByUser":
                return Observation(PAUSED, None, power, **base)
            if task == task_states.SUSPENDING and reason == "PausedByUser":
                return Observation(SUSPENDED, None, power, **base)
            return Observation(vm_state, task, power, **base)
        if task == task_states.RESCUING:  # the rescue step ends it, once the VM in its rescue form runs
            return Observation(vm_state, task, power, **base)
        if task == task_states.UNRESCUING and is_rescued(vm):
            return Observation(vm_state, task, power, **base)  # the rescue guest still runs
        if task in _DONE_WHEN_RUNNING:
            uid = (vmi or {}).get("metadata", {}).get("uid")
            if task in _HARD_REBOOT and server.get("vmi_uid") and uid == server.get("vmi_uid"):
                return Observation(vm_state, task, power, **base)  # the old VMI still runs
            return Observation(_DONE_WHEN_RUNNING[task], None, power, **base)
        if task is None and vm_state == STOPPED:
            return Observation(vm_state, None, power, stop_guest=True, **base)
        return Observation(vm_state, task, power, **base)

    # Not running: final, absent, or on its way up.
    if task == task_states.POWERING_ON:
        fault = _start_failure(vm, vmi, uuid, data_volumes, now, unschedulable_grace)
        if fault is not None:  # Nova reverts the task of a failed start and keeps the fault
            return Observation(vm_state, None, power, fault, **base)
        return Observation(vm_state, task, power, **base)
    if phase is not None and phase not in _FINAL:
        return Observation(vm_state, task, power, **base)  # starting: nothing to conclude yet
    if task == task_states.POWERING_OFF:
        return Observation(STOPPED, None, power, **base)
    if task is None and vm_state not in _LEFT_ALONE and vm_state != STOPPED:
        if _start_requested(vm):
            # a restart under way (KubeVirt stops the old VMI, then starts a new one): not a guest that shut
            # down by itself, whatever the observation between the two sees
            return Observation(vm_state, task, power, **base)
        # the guest shut down by itself (or went with its node): Nova's power sync calls the stop API
        return Observation(STOPPED, None, power, stopped_by_sync=True, **base)
    return Observation(vm_state, task, power, **base)
