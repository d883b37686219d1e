"""reboot HARD: KubeVirt's ``restart`` of a running VM, done only once another VMI runs.

The VMI it replaces is kept in the server's system metadata (``model.sysmeta.REPLACED_VMI``): the
observation ends the task once a VMI of another uid runs, also after a controller restart. A hard reboot
of a server that does not run starts it, as Nova's powers a stopped server on (KubeVirt restarts only
running VMs); a server whose VM is gone from the cluster gets it again from its record first, as Nova's
hard reboot defines the guest again.
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
        return start(ctx, server)
    with transaction(ctx.engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, row.server_uuid, sysmeta.REPLACED_VMI, uid)
    ctx.cluster.subresource(namespace, name, "restart")
    return DONE


def start(ctx: Context, server: dict[str, Any]) -> Outcome:
    """Power the server on: on a node that exists (its node deleted: another), its VM made again from its
    record when it is gone from the cluster, then KubeVirt's ``start``."""
    fault = placing.start_where_it_can_run(ctx, server)
    if fault is not None:
        return Failed(fault.message + fault.details, fault)
    placing.make_again(ctx, server)
    ctx.cluster.subresource(ctx.namespace_of(server), server_vm_name(server["uuid"]), "start")
    return DONE
