"""create: a new server's objects, then its start.

The project's namespace if missing, the server's Secrets, its own instancetype and preference (copies of
its flavor's in its namespace: the VM never depends on the catalogue's objects, which may not be synced
yet, or not be in this namespace) and its VirtualMachine by server-side apply, the instancetype and
preference then owned by the VM, then KubeVirt's ``start``. With Placement the
resources are claimed first (the builds of a pass together, ``claim_together``); no node with room ends
the build in ERROR with Nova's fault and nothing made. A build that already left BUILD (timed out) makes
nothing.
"""

from __future__ import annotations

from typing import Any

from openkeel_compute.compute.instances import cas
from openkeel_compute.controller.steps import placing, vm_edits
from openkeel_compute.controller.steps.base import DONE, Context, Failed, Outcome, ServerRow, read_server
from openkeel_compute.db.api import transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import states


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    if server["vm_state"] != states.BUILDING:
        return DONE  # the build ended meanwhile (ERROR after instance_build_timeout): no VM for it now
    if ctx.claims is not None:
        fault = placing.claim(ctx, server)
        if fault is not None:  # no node has room: the build failed, nothing was made
            return Failed(fault.message + fault.details, fault)
    objects = ctx.objects(server)
    namespace, name = ctx.namespace_of(server), server_vm_name(row.server_uuid)
    ctx.ensure_namespace(namespace, str(server["project_id"]))
    vm_edits.apply_server(ctx, objects, None)
    ctx.pass_state.placed.append((row.server_uuid, namespace, name))  # written with the rows done
    ctx.cluster.subresource(namespace, name, "start")
    return DONE


def claim_together(ctx: Context, rows: list[ServerRow]) -> None:
    """The builds of a pass claimed together (``Claims.claim_many``: one POST /allocations), their host
    and node written in one transaction; what it leaves is claimed one by one by ``run``. ``rows``: the
    create rows that are their server's first of the pass (a create behind another row may not run now)."""
    if ctx.claims is None or len(rows) < 2:
        return
    servers = [s for s in (read_server(ctx.engine, row.server_uuid) for row in rows)
               if s is not None and s["vm_state"] == states.BUILDING]
    made = ctx.claims.claim_many(servers)
    if made:
        with transaction(ctx.engine) as conn:
            for uuid, node in made.items():
                cas.save_state(conn, uuid, host=node, node=node)
