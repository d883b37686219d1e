"""A build waits for Neutron's network-vif-plugged of each of its ports, as Nova's libvirt driver waits
before it resumes the guest (``[DEFAULT] vif_plugging_timeout``, ``vif_plugging_is_fatal``).

Once the VM is started, a build whose ports are not all ACTIVE keeps its row and the server in BUILD
(system metadata ``VIF_WAIT``: when the wait ends; the observation does not move such a build to
ACTIVE). Each pass consumes the server's recorded network-vif-plugged events (POST
/os-server-external-events): a port plugged is marked so in the network info; ``failed`` ends the build
when plugging is fatal. Every port plugged: the build goes on (ACTIVE once the VM runs). The time up:
the build ends in Nova's fault "Failed to allocate the network(s), not rescheduling." when plugging is
fatal, else goes on, as Nova does. A port still bound to no node (no Placement: the node is known once
the VM is scheduled) is bound to the server's node meanwhile, which is what makes Neutron's agent
report it.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from openkeel_compute.compute import external_events
from openkeel_compute.compute.instances import instance_sysmeta
from openkeel_compute.controller.steps import ports
from openkeel_compute.controller.steps.base import DONE, Context, Failed, Outcome, ServerRow, Waiting
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.model import sysmeta

LOG = logging.getLogger(__name__)
PLUGGED = "network-vif-plugged"
POLL = 0.5  # seconds between two looks at the events while waiting


def begin(ctx: Context, server: dict[str, Any], info: list[dict[str, Any]]) -> Outcome:
    """After the VM's start: wait when some port is not plugged yet (and the timeout is not 0)."""
    if ctx.settings.vif_plugging_timeout <= 0 or all(vif.get("active") for vif in info):
        return DONE
    until = ctx.now() + dt.timedelta(seconds=ctx.settings.vif_plugging_timeout)
    with transaction(ctx.engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, server["uuid"], sysmeta.VIF_WAIT, until.isoformat())
    server["system_metadata"][sysmeta.VIF_WAIT] = until.isoformat()
    return Waiting("waiting for network-vif-plugged of the server's ports", POLL)


def _end(ctx: Context, uuid: str) -> None:
    with transaction(ctx.engine) as conn:
        instance_sysmeta.set_system_metadata_item(conn, uuid, sysmeta.VIF_WAIT, None)


def check(ctx: Context, row: ServerRow, server: dict[str, Any], give_up: Any,
          only: set[str] | None = None, bind: bool = True) -> Outcome:
    """One look at the wait; ``give_up``: the build's (Nova's fault, what was made let go); ``only``: the
    ports waited for (an attach's), None: all of them; ``bind``: ports bound to no node yet are bound to the
    server's (not while a revert moves them: the server's node is the one it leaves)."""
    uuid = server["uuid"]
    info = ports.info_of(server) or []
    waited = [vif for vif in info if only is None or vif["port_id"] in only]
    try:
        changed = ports.bind_to_node(ctx, server, info) if bind else False
    except ports.AllocationFailed as exc:  # no agent on the node can bind it: Nova's build abort
        LOG.warning("server %s: %s", uuid, exc)
        _end(ctx, uuid)
        failure: Failed = give_up(ctx, row, server, ports.NETWORK_FAILED)
        return failure
    with reader(ctx.engine) as conn:
        events = [e for e in external_events.pending(conn, uuid) if e["name"] == PLUGGED]
    by_port = {vif["port_id"]: vif for vif in info}
    failed = []
    for event in events:
        vif = by_port.get(event["tag"] or "")
        if vif is None:
            continue
        if event["status"] == "failed":
            failed.append(vif["port_id"])
        elif not vif.get("active"):
            vif["active"] = changed = True
    if changed:
        ports.save(ctx, server, info)
    if events:
        with transaction(ctx.engine) as conn:
            external_events.handled(conn, [e["id"] for e in events])
    fatal = ctx.settings.vif_plugging_is_fatal
    if failed and fatal:
        LOG.warning("server %s: Neutron failed to plug port(s) %s", uuid, ", ".join(failed))
        _end(ctx, uuid)
        result: Failed = give_up(ctx, row, server, ports.NETWORK_FAILED)
        return result
    if all(vif.get("active") for vif in waited):
        _end(ctx, uuid)
        return DONE
    until = dt.datetime.fromisoformat(server["system_metadata"][sysmeta.VIF_WAIT])
    now = ctx.now()
    if now.tzinfo is None and until.tzinfo is not None:
        until = until.replace(tzinfo=None)
    if now >= until:
        missing = [vif["port_id"] for vif in waited if not vif.get("active")]
        LOG.warning("server %s: timeout waiting for network-vif-plugged of %s", uuid, ", ".join(missing))
        _end(ctx, uuid)
        if fatal:
            result = give_up(ctx, row, server, ports.NETWORK_FAILED)
            return result
        return DONE
    return Waiting("waiting for network-vif-plugged of the server's ports", POLL)


#: the fault of a move whose ports were never plugged again (Nova's VirtualInterfaceCreateException)
VIF_CREATE_FAILED = "Virtual Interface creation failed"


def after_rebinding(ctx: Context, row: ServerRow, server: dict[str, Any], give_up: Any) -> Outcome:
    """Nova's ``_create_guest_with_network`` after a revert moved the ports' bindings back
    (``migrate_instance_finish``, then the network info read again): the guest waits for
    network-vif-plugged of each port Neutron does not show ACTIVE now, up to ``vif_plugging_timeout``;
    ``give_up`` (the operation's) with Nova's "Virtual Interface creation failed" when plugging is fatal.
    DONE at once without Neutron ports."""
    if not ports.wanted(ctx, server) or ctx.settings.vif_plugging_timeout <= 0:
        return DONE

    def failed(ctx: Context, row: ServerRow, server: dict[str, Any], _reason: str) -> Failed:
        result: Failed = give_up(ctx, row, server, VIF_CREATE_FAILED)
        return result

    if server["system_metadata"].get(sysmeta.VIF_WAIT):
        return check(ctx, row, server, failed, bind=False)
    info = ports.info_of(server) or []
    if ports.refresh_states(ctx, server, info):
        ports.save(ctx, server, info)
    return begin(ctx, server, info)
