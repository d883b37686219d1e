"""KubeVirt status back into Nova's states (kubevirt/vmstatus.py): every row of the lifecycle tables."""

from __future__ import annotations

import datetime as dt

import pytest

from openkeel_compute.kubevirt.vmstatus import (
    BUILD_TIMEOUT_MESSAGE,
    VM_GONE_MESSAGE,
    addresses,
    download_fault,
    download_reason,
    import_failure_message,
    observe,
)
from openkeel_compute.model.states import status_from_state
from tests.kubevirt.objects import (
    IMPORTING,
    NOW,
    UNSCHEDULABLE,
    UUID,
    cond,
    dv,
    run,
    server,
    vm,
    vmi,
)

# -- power_state (§1.6 power table) ------------------------------------------------------------------

POWER_ROWS = [
    ("no VMI", None, 4, False),
    ("Succeeded", vmi("Succeeded"), 4, False),
    ("Failed", vmi("Failed"), 4, False),
    ("Failed NodeUnresponsive", vmi("Failed", reason="NodeUnresponsive"), 0, True),
    ("Unknown", vmi("Unknown"), 0, True),
    ("Pending", vmi("Pending"), 0, False),
    ("Scheduling", vmi("Scheduling"), 0, False),
    ("Scheduled", vmi("Scheduled"), 0, False),
    ("Running", vmi("Running"), 1, False),
    ("Running Paused", vmi("Running", cond("Paused", "True", "PausedByUser")), 3, False),
    ("Running Paused=False", vmi("Running", cond("Paused", "False")), 1, False),
]


@pytest.mark.parametrize(("name", "the_vmi", "power", "unknown"), POWER_ROWS, ids=[r[0] for r in POWER_ROWS])
def test_power_state(name, the_vmi, power, unknown):
    result = run(server("error"), vm(), the_vmi)  # error: Nova's sync leaves the vm_state alone
    assert (result.power_state, result.host_status_unknown) == (power, unknown)
    assert result.vm_state == "error"


# -- during build (§1.6 "During build", §1.7 BUILD) -------------------------------------------------

BUILD_ROWS = [
    ("row written, no VM yet", None, None, (), ("building", "scheduling", "BUILD")),
    # the VM made and started: Nova's spawn, which makes the root disk from the image, then boots the guest
    ("VM created, disks to come", vm(), None, (), ("building", "spawning", "BUILD")),
    ("DV importing", vm(), None, (IMPORTING,), ("building", "spawning", "BUILD")),
    ("DV retried once", vm(), None, (dv("ImportInProgress", None, cond("Running", "False", "Error"), restarts=1),),
     ("building", "spawning", "BUILD")),
    ("VMI Pending", vm(), vmi("Pending"), (), ("building", "spawning", "BUILD")),
    ("VMI Scheduling", vm(), vmi("Scheduling"), (), ("building", "spawning", "BUILD")),
    ("VMI Scheduled", vm(), vmi("Scheduled"), (), ("building", "spawning", "BUILD")),
    ("VMI Running", vm(), vmi("Running"), (), ("active", None, "ACTIVE")),
    ("Unschedulable", vm(UNSCHEDULABLE), vmi("Scheduling", UNSCHEDULABLE), (), ("error", None, "ERROR")),
    ("DV Failed", vm(), None, (dv("Failed", None, cond("Running", "False", "Error", "HTTP 401")),),
     ("error", None, "ERROR")),
    ("DV retried too often", vm(), None,
     (dv("ImportInProgress", None, cond("Running", "False", "Error", "HTTP 401"), restarts=3),),
     ("error", None, "ERROR")),
    ("ErrImagePull", vm(), vmi("Scheduling", cond("Synchronized", "False", "ErrImagePull", "pull failed")), (),
     ("error", None, "ERROR")),
    ("ImagePullBackOff", vm(), vmi("Scheduling", cond("Synchronized", "False", "ImagePullBackOff", "back-off")), (),
     ("error", None, "ERROR")),
    ("ErrorPvcNotFound", vm(), vmi("Pending", cond("Synchronized", "False", "FailedPvcNotFound", "no pvc")), (),
     ("error", None, "ERROR")),
    ("VM Failure condition", vm(cond("Failure", "True", "FailedCreate", "admission webhook denied the request")),
     None, (), ("error", None, "ERROR")),
    ("VMI Failed before Running", vm(), vmi("Failed"), (), ("error", None, "ERROR")),
]


@pytest.mark.parametrize(("name", "the_vm", "the_vmi", "dvs", "expected"), BUILD_ROWS, ids=[r[0] for r in BUILD_ROWS])
def test_build(name, the_vm, the_vmi, dvs, expected):
    result = run(server("building", "scheduling", launched=False), the_vm, the_vmi, dvs)
    assert (result.vm_state, result.task_state, status_from_state(result.vm_state, result.task_state)) == expected
    assert (result.fault is not None) == (expected[0] == "error")
    assert result.launched == (expected[0] == "active")


@pytest.mark.parametrize("task", [None, "networking", "block_device_mapping"])
def test_build_keeps_the_build_steps_stage_until_the_vm_exists(task):
    """The build step writes Nova's stages before it makes the VM (placed: no task, networking, block device
    mapping): the observation of a server with no VM yet keeps them, never back to scheduling."""
    result = run(server("building", task, launched=False), None, None, ())
    assert (result.vm_state, result.task_state) == ("building", task)


def test_build_progress_is_the_import_progress():
    assert run(server("building", "scheduling", launched=False), vm(), None, [IMPORTING]).progress == 45


def test_unschedulable_fault_names_kubevirt_reason():
    fault = run(server("building", launched=False), vm(UNSCHEDULABLE), vmi("Scheduling", UNSCHEDULABLE)).fault
    assert fault.code == 500
    assert fault.message == "No valid host was found. 0/3 nodes are available: 3 Insufficient memory."
    assert "Unschedulable" in fault.details


def test_import_failure_fault_names_the_disk_and_reason():
    failed = dv("Failed", None, cond("Running", "False", "Error", "Unable to connect to http data source: 401"))
    fault = run(server("building", launched=False), vm(), None, [failed]).fault
    assert fault.message == (f"Build of instance {UUID} aborted: the disk {UUID}-root could not be imported from "
                             "the image (Error): Unable to connect to http data source: 401")


@pytest.mark.parametrize(("message", "reason"), [
    ("Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found",
     "Image img-1 could not be found."),
    ("Unable to connect to http data source: expected status code 200, got 403. Status: 403 Forbidden",
     "Not authorized for image img-1."),
    ("Unable to connect to http data source: expected status code 200, got 500. Status: 500 Internal Server Error",
     "HTTP 500 Internal Server Error"),
    (('Unable to connect to http data source: HTTP request errored: Get "http://10.0.0.5:9292/v2/images/img-1/file": '
     "dial tcp 10.0.0.5:9292: connect: connection refused"),
     "Connection to glance host http://10.0.0.5:9292 failed: dial tcp 10.0.0.5:9292: connect: connection refused"),
])
def test_an_image_that_cannot_be_downloaded_is_novas_download_failure(message, reason):
    assert download_reason("img-1", message) == reason
    assert download_fault(UUID, "img-1", message, "d", 1, 1) == (500, reason, "d")  # reschedules off
    assert download_fault(UUID, "img-1", message, "d", 3, 3).message == (
        f"Exceeded maximum number of retries. Exceeded max scheduling attempts 3 for instance {UUID}. "
        f"Last exception: {reason}")
    assert download_fault(UUID, "img-1", message, "d", 1, 3).message == (
        "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for "
        f"instance {UUID}.")


def test_an_importer_restarted_on_an_error_is_a_failed_import_once_restarted_enough():
    running = cond("Running", "False", "Error", "Unable to connect to http data source: x")
    assert import_failure_message([dv("ImportInProgress", None, running, restarts=2)]) is None
    assert import_failure_message([dv("ImportInProgress", None, running, restarts=3)]) == (
        "Unable to connect to http data source: x")


@pytest.mark.parametrize(("age", "timeout", "vm_state"), [
    (3601, 3600, "error"), (3600, 3600, "building"), (10**6, 0, "building"), (10, 5, "error")])
def test_build_timeout(age, timeout, vm_state):
    result = run(server("building", "block_device_mapping", launched=False), vm(), None, [IMPORTING],
                 started=NOW - dt.timedelta(seconds=age), timeout=timeout)
    assert result.vm_state == vm_state
    if vm_state == "error":
        assert result.task_state is None
        assert result.fault.message == BUILD_TIMEOUT_MESSAGE == "Instance build timed out. Set to error state."


def test_running_wins_over_the_timeout():
    result = run(server("building", "spawning", launched=False), vm(), vmi("Running"),
                 started=NOW - dt.timedelta(days=1), timeout=60)
    assert (result.vm_state, result.launched) == ("active", True)


# -- after launch (§1.6 "After launch", §1.7) --------------------------------------------------------

PAUSED_BY_USER = cond("Paused", "True", "PausedByUser")
AFTER_ROWS = [
    ("Running completes powering-on", server("stopped", "powering-on"), vm(), vmi("Running"),
     ("active", None, 1, "ACTIVE")),
    ("Running completes soft reboot", server("active", "reboot_started"), vm(), vmi("Running"),
     ("active", None, 1, "ACTIVE")),
    ("Running completes hard reboot (new VMI)", server("active", "reboot_started_hard", vmi_uid="uid-1"), vm(),
     vmi("Running", uid="uid-2"), ("active", None, 1, "ACTIVE")),
    ("old VMI still running during hard reboot", server("active", "reboot_started_hard", vmi_uid="uid-1"), vm(),
     vmi("Running", uid="uid-1"), ("active", "reboot_started_hard", 1, "HARD_REBOOT")),
    ("hard reboot from stopped", server("stopped", "rebooting_hard"), vm(), vmi("Running"),
     ("active", None, 1, "ACTIVE")),
    ("Running completes unpausing", server("paused", "unpausing"), vm(), vmi("Running"), ("active", None, 1, "ACTIVE")),
    ("Running completes resuming", server("suspended", "resuming"), vm(), vmi("Running"), ("active", None, 1, "ACTIVE")),
    ("Running, nothing to do", server("active"), vm(), vmi("Running"), ("active", None, 1, "ACTIVE")),
    ("PausedByUser after pause", server("active", "pausing"), vm(), vmi("Running", PAUSED_BY_USER),
     ("paused", None, 3, "PAUSED")),
    ("PausedByUser after suspend", server("active", "suspending"), vm(), vmi("Running", PAUSED_BY_USER),
     ("suspended", None, 3, "SUSPENDED")),
    ("pausing, not yet paused", server("active", "pausing"), vm(), vmi("Running"),
     ("active", "pausing", 1, "ACTIVE")),
    ("paused by KubeVirt (I/O error)", server("active"), vm(), vmi("Running", cond("Paused", "True", "PausedIOError")),
     ("active", None, 3, "ACTIVE")),
    ("guest shut down by itself", server("active"), vm(), vmi("Succeeded"), ("stopped", None, 4, "SHUTOFF")),
    ("guest crashed", server("active"), vm(), vmi("Failed"), ("stopped", None, 4, "SHUTOFF")),
    ("VMI absent, active", server("active"), vm(), None, ("stopped", None, 4, "SHUTOFF")),
    ("stop done", server("active", "powering-off"), vm(), None, ("stopped", None, 4, "SHUTOFF")),
    ("stop done (final VMI)", server("active", "powering-off"), vm(), vmi("Succeeded"), ("stopped", None, 4, "SHUTOFF")),
    ("stop under way", server("active", "powering-off"), vm(), vmi("Running"),
     ("active", "powering-off", 1, "ACTIVE")),
    ("paused guest gone", server("paused"), vm(), None, ("stopped", None, 4, "SHUTOFF")),
    ("suspended left alone", server("suspended"), vm(), None, ("suspended", None, 4, "SUSPENDED")),
    ("error left alone", server("error"), vm(), None, ("error", None, 4, "ERROR")),
    ("rescued left alone", server("rescued"), vm(), None, ("rescued", None, 4, "RESCUE")),
    ("stopped stays stopped", server("stopped"), vm(), None, ("stopped", None, 4, "SHUTOFF")),
    ("start not yet running", server("stopped", "powering-on"), vm(), None, ("stopped", "powering-on", 4, "SHUTOFF")),
    ("start pending pod", server("stopped", "powering-on"), vm(), vmi("Scheduling"),
     ("stopped", "powering-on", 0, "SHUTOFF")),
    ("start unschedulable", server("stopped", "powering-on"), vm(UNSCHEDULABLE), vmi("Scheduling", UNSCHEDULABLE),
     ("stopped", None, 0, "SHUTOFF")),
    ("start refused", server("stopped", "powering-on"), vm(cond("Failure", "True", "FailedCreate", "denied")), None,
     ("stopped", None, 4, "SHUTOFF")),
    ("node unresponsive", server("active"), vm(), vmi("Failed", reason="NodeUnresponsive"),
     ("active", None, 0, "ACTIVE")),
    ("terminating", server("active", "deleting"), vm(deleting=True), vmi("Running"),
     ("active", "deleting", 1, "ACTIVE")),
    ("VM gone during delete", server("active", "deleting"), None, None, ("active", "deleting", 4, "ACTIVE")),
    ("VM vanished", server("active"), None, None, ("stopped", None, 0, "SHUTOFF")),
    ("stopped, but the guest runs", server("stopped"), vm(), vmi("Running"), ("stopped", None, 1, "SHUTOFF")),
]


@pytest.mark.parametrize(("name", "row", "the_vm", "the_vmi", "expected"), AFTER_ROWS, ids=[r[0] for r in AFTER_ROWS])
def test_after_launch(name, row, the_vm, the_vmi, expected):
    result = run(row, the_vm, the_vmi)
    status = status_from_state(result.vm_state, result.task_state)
    assert (result.vm_state, result.task_state, result.power_state, status) == expected
    assert not result.launched


def test_start_failure_keeps_a_fault_and_reverts_the_task():
    result = run(server("stopped", "powering-on"), vm(UNSCHEDULABLE), vmi("Scheduling", UNSCHEDULABLE))
    assert result.fault.message.startswith("No valid host was found. 0/3 nodes")


def test_delete_finishes_when_the_vm_is_gone():
    assert run(server("active", "deleting"), None, None).deleted
    assert not run(server("active", "deleting"), vm(deleting=True), None).deleted


def test_a_vanished_vm_is_nova_power_sync_finding_no_guest():
    """A server that ran is stopped by the sync (SHUTOFF, no fault); a stopped one stays; a stop under way is
    done; another task is its step's to end; an ERROR server is left alone."""
    result = run(server("active"), None, None)
    assert (result.vm_state, result.task_state, result.power_state, result.fault) == ("stopped", None, 0, None)
    assert result.stopped_by_sync
    for state, task, expected in (("stopped", None, ("stopped", None)), ("active", "powering-off", ("stopped", None)),
                                  ("active", "rebooting_hard", ("active", "rebooting_hard")),
                                  ("error", None, ("error", None))):
        seen = run(server(state, task), None, None)
        assert ((seen.vm_state, seen.task_state), seen.fault, seen.stopped_by_sync) == (expected, None, False)


def test_stopped_server_with_a_running_guest_asks_for_a_stop():
    assert run(server("stopped"), vm(), vmi("Running")).stop_guest
    assert not run(server("active"), vm(), vmi("Running")).stop_guest


def test_node_unresponsive_reports_host_status_unknown():
    result = run(server("active"), vm(), vmi("Failed", reason="NodeUnresponsive"))
    assert result.host_status_unknown and result.power_state == 0


def test_a_guest_whose_node_was_deleted_is_shut_off():
    # the launcher pod went with its node: KubeVirt fails the VMI without a reason
    gone = vmi("Failed", cond("Ready", "False", "PodNotExists"), node="worker-7")
    result = run(server("active"), vm(), gone)
    assert (result.vm_state, result.task_state, result.power_state) == ("stopped", None, 4)
    assert result.host == "worker-7" and not result.host_status_unknown
    assert result.stopped_by_sync  # Nova's power sync stops it through the stop API (a "stop" action)
    assert not run(server("active", "powering-off"), vm(), gone).stopped_by_sync  # the user's stop


def test_an_unresponsive_node_deleted_afterwards_shuts_its_guests_off():
    lost = vmi("Failed", reason="NodeUnresponsive")
    still_there = run(server("active"), vm(), lost)
    assert (still_there.vm_state, still_there.power_state, still_there.host_status_unknown) == ("active", 0, True)
    deleted = observe(server("active"), vm(), lost, [], NOW, None, 0, node_gone=True)
    assert (deleted.vm_state, deleted.task_state, deleted.power_state) == ("stopped", None, 4)
    assert not deleted.host_status_unknown
    # a node gone never concludes anything about a VMI still on its way up, nor about a stop under way
    assert observe(server("active"), vm(), vmi("Unknown"), [], NOW, None, 0, node_gone=True).vm_state == "active"
    stopping = observe(server("active", "powering-off"), vm(), lost, [], NOW, None, 0, node_gone=True)
    assert (stopping.vm_state, stopping.task_state) == ("stopped", None)


def test_host_is_the_node():
    assert run(server("active"), vm(), vmi("Running", node="worker-7")).host == "worker-7"


# -- addresses (§4) ---------------------------------------------------------------------------------

def test_addresses_from_the_pod_interface():
    interfaces = [{"name": "default", "mac": "fa:16:3e:a6:6c:3f", "ipAddress": "10.244.0.12",
                   "ipAddresses": ["10.244.0.12", "fd10:244::c", "fe80::1"], "infoSource": "domain, guest-agent"},
                  {"name": "other", "ipAddresses": ["192.0.2.9"]}]
    result = run(server("active"), vm(), vmi("Running", interfaces=interfaces))
    assert result.addresses == {"pod-network": [
        {"version": 4, "addr": "10.244.0.12", "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:a6:6c:3f"},
        {"version": 6, "addr": "fd10:244::c", "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:a6:6c:3f"},
    ]}
    named = observe(server("active"), vm(), vmi("Running", interfaces=interfaces), [], NOW, None, 0, "private")
    assert list(named.addresses) == ["private"]


@pytest.mark.parametrize("the_vmi", [None, vmi("Running"), vmi("Running", interfaces=[{"name": "default"}]),
                                     vmi("Running", interfaces=[{"name": "default", "ipAddresses": ["fe80::2"]}])])
def test_no_address_to_read_shows_none_never_the_last_seen(the_vmi):
    """The pod network's address goes with the launcher pod: a VMI that shows none (stopped, finished, a new
    one not yet reporting) leaves the server with no address, never one the guest no longer has."""
    assert addresses(the_vmi, "pod-network") is None
    assert run(server("active"), vm(), the_vmi).addresses == {}
    stale = [{"name": "default", "mac": "m", "ipAddress": "10.0.0.5"}]  # a finished VMI keeps its last status
    assert run(server("stopped"), vm(), vmi("Succeeded", interfaces=stale)).addresses == {}
    assert run(server("active"), vm(), vmi("Failed", interfaces=stale)).addresses == {}


def test_single_ip_address_field():
    the_vmi = vmi("Running", interfaces=[{"name": "default", "mac": "m", "ipAddress": "10.0.0.5"}])
    assert addresses(the_vmi, "n") == {"n": [{"version": 4, "addr": "10.0.0.5", "OS-EXT-IPS:type": "fixed",
                                              "OS-EXT-IPS-MAC:mac_addr": "m"}]}


def test_the_doc_states_the_fault_messages():
    from tests._shared import ROOT

    section = (ROOT / "docs" / "kubevirt-mapping.md").read_text().split("## Servers", 1)[1].split("\n## ", 1)[0]
    for message in (BUILD_TIMEOUT_MESSAGE, VM_GONE_MESSAGE, "No valid host was found. <scheduler message>"):
        assert message in section


def test_delete_waits_for_the_disks():
    assert not run(server("active", "deleting"), None, None, [dv("Succeeded", "100.0%")]).deleted


@pytest.mark.parametrize(("age", "grace", "vm_state"), [(30, 300, "building"), (301, 300, "error"), (1, 0, "error")])
def test_unschedulable_grace(age, grace, vm_state):
    since = (NOW - dt.timedelta(seconds=age)).isoformat()
    pending = {**UNSCHEDULABLE, "lastTransitionTime": since}
    result = observe(server("building", "networking", launched=False), vm(pending), vmi("Scheduling", pending), [],
                     NOW, NOW - dt.timedelta(seconds=age), 3600, unschedulable_grace=grace)
    assert result.vm_state == vm_state


def test_a_build_whose_vm_was_created_and_is_gone_is_an_error():
    # before the controller created the VM: still scheduling
    waiting = run(server("building", "scheduling", launched=False), None, None)
    assert (waiting.vm_state, waiting.task_state, waiting.fault) == ("building", "scheduling", None)
    # created (the controller recorded its name), then removed by someone else
    gone = run(server("building", "spawning", launched=False, vm_name=UUID), None, None)
    assert (gone.vm_state, gone.task_state) == ("error", None)
    assert gone.fault.code == 500 and gone.fault.message == VM_GONE_MESSAGE


def test_a_restart_between_its_stop_and_its_start_is_not_a_guest_that_shut_down():
    """KubeVirt's restart stops the old VMI, then starts a new one (the start waits in the VM's
    stateChangeRequests): an observation in between must not conclude that the guest shut down by itself,
    or the server would be SHUTOFF and its new guest stopped."""
    restarting = vm()
    restarting["status"]["stateChangeRequests"] = [{"action": "Start"}]
    assert run(server("active"), restarting, None)[:2] == ("active", None)
    assert run(server("active"), restarting, vmi("Succeeded"))[:2] == ("active", None)
    # without the pending start it is what it looks like
    assert run(server("active"), vm(), None)[:2] == ("stopped", None)


@pytest.mark.parametrize(("reason", "age", "vm_state"), [
    ("FailedFindInstancetype", 2, "building"),  # the new VM applied, its own instancetype a request later
    ("FailedFindPreference", 2, "building"),
    ("FailedFindInstancetype", 61, "error"),  # still missing a minute on: the build's fault
    ("FailedCreate", 2, "error"),  # any other Failure ends the build at once
])
def test_a_new_vm_waiting_for_its_own_sizing_is_still_building(reason, age, vm_state):
    since = (NOW - dt.timedelta(seconds=age)).isoformat()
    failure = {**cond("Failure", "True", reason, 'virtualmachineinstancetypes.instancetype.kubevirt.io "x" not found'),
               "lastTransitionTime": since}
    result = observe(server("building", "scheduling", launched=False), vm(failure), None, [], NOW,
                     NOW - dt.timedelta(seconds=age), 3600)
    assert result.vm_state == vm_state
