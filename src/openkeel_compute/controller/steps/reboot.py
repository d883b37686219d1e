"""reboot HARD: KubeVirt's ``restart`` of a running VM, done only once another VMI runs.

The VMI it replaces is kept in the server's system metadata (``model.sysmeta.REPLACED_VMI``): the
observation ends the task once a VMI of another uid runs, also after a controller restart. A hard reboot
of a server that does not run starts it, as Nova's powers a stopped server on (KubeVirt restarts only
running VMs); a server whose VM is gone from the cluster gets it again from its record first, as Nova's
hard reboot defines the guest again. Both reboots first pass Nova's compute's stages (``begin``): pending,
with ``reboot.start``, then started.
"""

from __future__ import annotations

import itertools
from typing import Any

from openkeel_compute.compute.instances import cas, instance_sysmeta
from openkeel_compute.controller import tasks
from openkeel_compute.controller.steps import placing
from openkeel_compute.controller.steps.base import DONE, FINAL_PHASES, Context, Failed, Outcome, ServerRow
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import events, sysmeta
from openkeel_compute.model import operations as ops
from openkeel_compute.model.states import task_states

#: a reboot's stages, soft and hard, as Nova's compute saves them: asked, pending (reboot.start sent),
#: started (the guest asked to reboot); the observation ends the last
STAGES = {ops.REBOOT_SOFT: (task_states.REBOOTING, task_states.REBOOT_PENDING, task_states.REBOOT_STARTED),
          ops.REBOOT_HARD: (task_states.REBOOTING_HARD, task_states.REBOOT_PENDING_HARD,
                            task_states.REBOOT_STARTED_HARD)}


def begin(ctx: Context, row: ServerRow, server: dict[str, Any]) -> bool:
    """The reboot's stages before the guest is asked: pending (with ``reboot.start``), then started,
    each its own write (visible as the task state). A stage already passed (the row tried again) is
    not written again. False when another task took over meanwhile (a delete)."""
    stages = STAGES[row.operation]
    uuid, host = row.server_uuid, server.get("host")
    for before, after in itertools.pairwise(stages):
        current = server.get("task_state")
        if current in stages and stages.index(current) > stages.index(before):
            continue
        with transaction(ctx.engine) as conn:
            if not cas.save_state(conn, uuid, expected_task_state=before, task_state=after):
                return False
            if after == stages[1]:
                tasks.notify_start(conn, uuid, row.request_id, events.REBOOT, host, before_update=True)
        server["task_state"] = after
    return True


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    if not begin(ctx, row, server):
        return DONE
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
