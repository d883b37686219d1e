"""os-start, os-stop, pause, unpause, reboot SOFT: one KubeVirt subresource verb each.

``start``/``stop`` act on the VirtualMachine, ``softreboot``/``pause``/``unpause`` on its instance; a
verb whose end state is already there (409 "already running", ...) is done. The observation ends the
task once the cluster shows its result. A start first moves a server whose node was deleted
(``placing.start_where_it_can_run``) and makes again a VM gone from the cluster (``placing.make_again``).
On a guest that does not run (no VMI, or a finished one): a soft reboot falls back to a hard one (as
Nova's does), a pause or unpause ends at once in Nova's InstanceNotRunning fault; a stop of a VM that
is gone is done.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.controller import tasks
from openkeel_compute.controller.kube import ClusterError, status_code
from openkeel_compute.controller.steps import reboot
from openkeel_compute.controller.steps.base import (
    DONE,
    FINAL_PHASES,
    Context,
    Failed,
    Outcome,
    ServerRow,
    vmi_phase,
)
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states

#: operation -> KubeVirt's subresource verb (controller/gateway.py SUBRESOURCES)
VERBS: dict[str, str] = {ops.START: "start", ops.STOP: "stop", ops.REBOOT_HARD: "restart",
                         ops.REBOOT_SOFT: "softreboot", ops.PAUSE: "pause", ops.UNPAUSE: "unpause"}
#: the verbs KubeVirt runs on the VirtualMachineInstance (a guest that runs)
ON_THE_INSTANCE = ("softreboot", "pause", "unpause")


def verb_for(operation: str) -> str | None:
    """KubeVirt's subresource verb of a power operation, or None for create, delete and the others."""
    return VERBS.get(operation)


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    verb, namespace, uuid = VERBS[row.operation], ctx.namespace_of(server), row.server_uuid
    if row.operation in reboot.STAGES and not reboot.begin(ctx, row, server):
        return DONE  # another task took over (a delete)
    if verb in ON_THE_INSTANCE:
        vmi = ctx.cluster.vmi(namespace, uuid)
        if vmi_phase(vmi) in (None, *FINAL_PHASES):  # no guest runs (its VM may be gone from the cluster)
            if verb == "softreboot":  # Nova's soft reboot that fails falls back to a hard reboot
                return reboot.start(ctx, server)
            return _not_running(ctx, server)
    try:
        ctx.cluster.subresource(namespace, server_vm_name(uuid), verb)
    except ClusterError as exc:
        if verb == "stop" and status_code(exc) == 404:
            return DONE  # no VM to stop: the observation ends the stop (SHUTOFF)
        raise
    return DONE


def start(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    """os-start: as a hard reboot of a server that does not run (reboot.start): a node that exists, the VM
    made again when it is gone, then ``start``; no node can take it: the start failed, it stays SHUTOFF."""
    return reboot.start(ctx, server)


def _not_running(ctx: Context, server: dict[str, Any]) -> Failed:
    """A pause or unpause of a server whose guest does not run ends as Nova's does when the hypervisor
    refuses it: the task reverted, the fault InstanceNotRunning recorded, the state unchanged (the power
    sync then stops a server whose guest is gone)."""
    uuid = server["uuid"]
    fault = Fault(409, f"Instance {uuid} is not running.", "KubeVirt: no VirtualMachineInstance runs")
    with transaction(ctx.engine) as conn:
        tasks.end_in_fault(conn, server, fault, expected=[server.get("task_state")], host=server.get("host"))
    return Failed(fault.message, fault)


def _give_up(ctx: Context, server: dict[str, Any], reason: str, vm_state: str | None) -> Failed:
    fault = Fault(500, reason, reason)
    with transaction(ctx.engine) as conn:
        tasks.end_in_fault(conn, server, fault, expected=[server.get("task_state")], vm_state=vm_state,
                           host=server.get("host"))
    return Failed(reason, fault)


def give_up(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """A start, stop, pause, unpause or soft reboot whose attempts are spent ends as Nova's compute ends a
    power action that raised: the task reverted, the fault recorded, the server in the state it had."""
    return _give_up(ctx, server, reason, None)


def give_up_in_error(ctx: Context, row: ServerRow, server: dict[str, Any], reason: str) -> Failed:
    """A hard reboot or a rebuild whose attempts are spent ends in ERROR with the fault, as Nova's compute
    ends a reboot that leaves the guest off and a rebuild that raised."""
    return _give_up(ctx, server, reason, states.ERROR)
