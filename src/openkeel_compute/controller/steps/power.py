"""os-start, os-stop, pause, unpause, reboot SOFT: one KubeVirt subresource verb each.

``start``/``stop`` act on the VirtualMachine, ``softreboot``/``pause``/``unpause`` on its instance; a
verb whose end state is already there (409 "already running", ...) is done. The observation ends the
task once the cluster shows its result. A start first moves a server whose node was deleted
(``placing.start_where_it_can_run``).
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.controller.steps import placing
from openkeel_compute.controller.steps.base import DONE, Context, Failed, Outcome, ServerRow
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import operations as ops

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
