"""os-start, os-stop, pause, unpause, reboot SOFT: one KubeVirt subresource verb each.

``start``/``stop`` act on the VirtualMachine, ``softreboot``/``pause``/``unpause`` on its instance; a
verb whose end state is already there (409 "already running", ...) is done. The observation ends the
task once the cluster shows its result. A start first moves a server whose node was deleted
(``placing.start_where_it_can_run``).
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.controller import tasks
from openkeel_compute.controller.steps import placing
from openkeel_compute.controller.steps.base import DONE, Context, Failed, Outcome, ServerRow
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import operations as ops
from openkeel_compute.model import states

#: operation -> KubeVirt's subresource verb (controller/gateway.py SUBRESOURCES)
VERBS: dict[str, str] = {ops.START: "start", ops.STOP: "stop", ops.REBOOT_HARD: "restart",
                         ops.REBOOT_SOFT: "softreboot", ops.PAUSE: "pause", ops.UNPAUSE: "unpause"}


def verb_for(operation: str) -> str | None:
    """KubeVirt's subresource verb of a power operation, or None for create, delete and the others."""
    return VERBS.get(operation)


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    ctx.cluster.subresource(ctx.namespace_of(server), server_vm_name(row.server_uuid), VERBS[row.operation])
    return DONE


def start(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    fault = placing.start_where_it_can_run(ctx, server)
    if fault is not None:  # no node can take it: the start failed, the server stays SHUTOFF
        return Failed(fault.message + fault.details, fault)
    return run(ctx, row, server)


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
