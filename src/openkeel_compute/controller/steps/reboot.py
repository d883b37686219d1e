"""reboot HARD: KubeVirt's ``restart`` of a running VM, done only once another VMI runs.

The VMI it replaces is kept in the server's system metadata (``model.sysmeta.REPLACED_VMI``): the
observation ends the task once a VMI of another uid runs, also after a controller restart. A hard reboot
of a server that does not run starts it, as Nova's powers a stopped server on (KubeVirt restarts only
running VMs).
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.compute.instances import instance_sysmeta
from openkeel_compute.controller.steps import placing
from openkeel_compute.controller.steps.base import DONE, FINAL_PHASES, Context, Failed, Outcome, ServerRow
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import sysmeta


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    namespace, name = ctx.namespace_of(server), server_vm_name(row.server_uuid)
    _vm, vmi, _dvs = ctx.cluster.look(namespace, row.server_uuid)
    uid = ((vmi or {}).get("metadata") or {}).get("uid")
    phase = ((vmi or {}).get("status") or {}).get("phase")
    if not uid or phase in FINAL_PHASES:
        fault = placing.start_where_it_can_run(ctx, server)
        if fault is not None:
            return Failed(fault.message + fault.details, fault)
        ctx.cluster.subresource(namespace, name, "start")
        return DONE
    with transaction(ctx.engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, row.server_uuid, sysmeta.REPLACED_VMI, uid)
    ctx.cluster.subresource(namespace, name, "restart")
    return DONE
