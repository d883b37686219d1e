"""Where a server runs: its resources claimed in Placement, and the node its VM is pinned to.

Used by the build (the claim before any object exists), by the starts (a server whose node was deleted
is started elsewhere; one whose VM is gone gets it again) and by the observation (a build whose node
cannot run it tries another one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from openkeel_compute.compute import compute_services, host_filters, server_groups, working_state
from openkeel_compute.compute.instances import cas
from openkeel_compute.controller import nodes, tasks
from openkeel_compute.controller.claims import NoValidHost
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps import ports, vm_edits
from openkeel_compute.controller.steps.base import Context
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import states, sysmeta

LOG = logging.getLogger(__name__)


def claim(ctx: Context, server: dict[str, Any]) -> Fault | None:
    """Claim the server's resources (controller/claims.py): its node is then its host and node, and the VM
    is pinned there. When no node has room the build ends in ERROR with Nova's fault, which is returned."""
    assert ctx.claims is not None
    try:
        node, _alternates = ctx.claims.claim(server)
        node = as_filters_allow(ctx, server, node)
    except NoValidHost as exc:
        with transaction(ctx.engine) as conn:
            tasks.end_in_fault(conn, server, exc.fault, expected=[server.get("task_state")], vm_state=states.ERROR)
        return exc.fault
    if server.get("node") != node:
        with transaction(ctx.engine) as conn:
            cas.save_state(conn, server["uuid"], host=node, node=node)
    server["host"] = server["node"] = node
    return None


def as_filters_allow(ctx: Context, server: dict[str, Any], node: str, *, groups: bool = True) -> str:
    """The node the scheduler's filters let the server run on, as Nova's late check on the chosen host: its
    group's policy (compute/server_groups.py; not when ``groups`` is False) and the enabled filters that
    read the node's aggregates and servers, the request and the server's different_host / same_host
    hints (compute/host_filters.py). ``node`` when it satisfies them all, else the claim moves to a node
    that does. When no node satisfies a hard policy or the filters, the claim is given back and it is
    "No valid host"; a soft policy no node satisfies keeps the node."""
    with reader(ctx.engine) as conn:
        rule = server_groups.placement_rule(conn, server["uuid"]) if groups else None
        hints = host_filters.host_filter(conn, server, ctx.settings.filters)
    if rule is None and hints is None:
        return node

    def policy(n: str) -> bool:
        return rule is None or server_groups.allowed(*rule, n)

    def hard(n: str) -> bool:
        return (hints is None or hints(n)) and (rule is None or rule[0] not in server_groups.HARD or policy(n))

    def preferred(n: str) -> bool:
        return hard(n) and policy(n)

    if preferred(node):
        return node
    assert ctx.claims is not None
    moved = ctx.claims.move(server, {node}, usable=preferred)
    if moved is None and hard(node):
        return node  # a soft policy only weighs
    if moved is None and rule is not None and rule[0] not in server_groups.HARD:  # soft: any node hints allow
        moved = ctx.claims.move(server, {node}, usable=hard)
    if moved is not None:
        LOG.info("server %s: node %s breaks its group's policy or the scheduler's filters, placed on %s",
                 server["uuid"], node, moved)
        return moved
    ctx.claims.release(server["uuid"])
    if rule is not None and rule[0] in server_groups.HARD and not policy(node):
        raise NoValidHost(f"No node satisfies the {rule[0]} policy of the server's group")
    raise NoValidHost("No node passes the scheduler's filters", filtered=True)


def hint_filter(ctx: Context, server: dict[str, Any], flavor: dict[str, Any] | None = None
                ) -> Callable[[str], bool] | None:
    """Which nodes a move of the server may go to under the enabled filters of compute/host_filters.py
    (its different_host / same_host hints among them); ``flavor``: the one asked for when not its own (a
    resize's new flavor). None: no filter acts."""
    with reader(ctx.engine) as conn:
        return host_filters.host_filter(conn, server, ctx.settings.filters, flavor=flavor)


def move_filter(ctx: Context, server: dict[str, Any], flavor: dict[str, Any] | None = None
                ) -> Callable[[str], bool] | None:
    """``group_filter`` and ``hint_filter`` together: the nodes a resize or migration may go to."""
    uuid = server["uuid"]
    group, hints = group_filter(ctx, uuid), hint_filter(ctx, server, flavor)
    if group is None or hints is None:
        return group or hints
    return lambda node: group(node) and hints(node)


def group_filter(ctx: Context, uuid: str) -> Callable[[str], bool] | None:
    """Which nodes a move of the server may go to under its group's hard policy, as Nova's
    ServerGroup(Anti)AffinityFilter: anti-affinity refuses a node holding ``max_server_per_host`` other
    members, affinity keeps to the other members' node. None: no hard policy (soft ones only weigh)."""
    with reader(ctx.engine) as conn:
        rule = server_groups.placement_rule(conn, uuid)
    if rule is None or rule[0] not in server_groups.HARD:
        return None
    policy, members, per_host = rule
    return lambda node: server_groups.allowed(policy, members, per_host, node)


def start_where_it_can_run(ctx: Context, server: dict[str, Any]) -> Fault | None:
    """Before a start (os-start, or a hard reboot of a stopped server): a server whose node was deleted
    has its VM pinned to a node that will never take it again. Its resources are claimed on a node that
    exists and that the scheduler's filters let pass (one PUT at its consumer generation, which drops the
    old node's allocation), and the VM is pinned there, as Nova's evacuate rebuilds the server of a gone
    host on another one. When no node can
    take it the start fails as a Nova start does: the task goes back, the server stays SHUTOFF with
    "No valid host was found." as its fault (returned), and nothing moved."""
    node = server.get("node")
    if ctx.claims is None or not node or ctx.cluster.node_exists(node):
        return None
    moved = ctx.claims.move(server, {node}, usable=move_filter(ctx, server))
    if moved is None:
        fault = NoValidHost(f"The server's node {node} is gone and no other node can take it").fault
        with transaction(ctx.engine) as conn:
            tasks.end_in_fault(conn, server, fault, expected=[server.get("task_state")], host=node)
        return fault
    LOG.info("server %s: its node %s is gone, starting it on %s", server["uuid"], node, moved)
    # the VM is pinned before the row names the new node: a failure in between leaves the row on the
    # gone node, and the next attempt moves again (to the node the claim now holds, or another)
    ports.follow(ctx, server, moved)
    vm_edits.apply_server(ctx, ctx.objects({**server, "host": moved, "node": moved}),
                          ctx.cluster.look(ctx.namespace_of(server), server["uuid"])[0])
    with transaction(ctx.engine) as conn:
        cas.save_state(conn, server["uuid"], host=moved, node=moved)
    server["host"] = server["node"] = moved
    return None


def make_again(ctx: Context, server: dict[str, Any]) -> bool:
    """A server whose VirtualMachine is gone from the cluster (removed behind our back) gets it again from
    its record, as Nova's hard reboot defines the guest again from the instance's record: its own
    instancetype and preference, its Secrets, and a root disk imported again from its image (the old one
    went with the VM). True when it was made again."""
    namespace = ctx.namespace_of(server)
    if ctx.cluster.look(namespace, server["uuid"])[0] is not None:
        return False
    LOG.warning("server %s: its virtual machine is gone from the cluster: made again from the server's record",
                server["uuid"])
    ctx.ensure_namespace(namespace, str(server["project_id"]))
    vm_edits.apply_server(ctx, ctx.objects(server), None)
    return True


def tried_nodes(ctx: Context, server: dict[str, Any]) -> list[str]:
    """The nodes the build was tried on, its current one included (Nova's retry hosts)."""
    with reader(ctx.engine) as conn:
        tried = [n for n in (working_state.get(conn, server["uuid"], sysmeta.TRIED_NODES) or "").split(",") if n]
    if server.get("node") and server["node"] not in tried:
        tried.append(server["node"])
    return tried


def try_alternate(ctx: Context, server: dict[str, Any], namespace: str, reimport: Sequence[str] = ()) -> bool:
    """A build whose node cannot run it moves to another node Placement offers (Nova's alternates),
    until ``[scheduler] max_attempts`` nodes were tried: the claim moves, to a node the scheduler's filters
    and the group's hard policy let pass (``move_filter``), the VM is pinned to the new node and restarted.
    ``reimport``: the DataVolumes whose import failed (an image that could not be downloaded): they are
    deleted instead, so that KubeVirt makes them again from the VM's templates and the new attempt downloads
    the image again, as Nova's compute on the alternate host does. False when no attempt is left or no
    other node has room."""
    assert ctx.claims is not None
    tried = tried_nodes(ctx, server)
    if len(tried) >= ctx.claims.max_attempts:
        return False
    node = ctx.claims.move(server, set(tried), usable=move_filter(ctx, server))  # Nova's alternates passed them
    if node is None:
        return False
    LOG.info("server %s: node %s cannot run it, trying %s (attempt %d of %d)", server["uuid"],
             server.get("node"), node, len(tried) + 1, ctx.claims.max_attempts)
    with transaction(ctx.engine) as conn:
        cas.save_state(conn, server["uuid"], host=node, node=node)
        working_state.put(conn, server["uuid"], sysmeta.TRIED_NODES, ",".join([*tried, node]))
    server["host"] = server["node"] = node
    vm_edits.apply_server(ctx, ctx.objects(server), ctx.cluster.look(namespace, server["uuid"])[0])
    if reimport:
        for name in reimport:
            ctx.cluster.delete(ObjectKey("DataVolume", namespace, name))
    else:
        ctx.cluster.subresource(namespace, server_vm_name(server["uuid"]), "restart")
    return True


def another_node(ctx: Context, server: dict[str, Any], named: str | None) -> str:
    """A node for a cold migration when nothing was claimed in Placement: a Ready, schedulable node other
    than the server's whose compute service is neither disabled nor forced down (Nova's ComputeFilter),
    ``named`` only when given; the first by name. NoValidHost as Nova's scheduler words it otherwise."""
    with reader(ctx.engine) as conn:
        unusable = {r.host for r in compute_services.listed(conn, binary="nova-compute") if r.disabled or r.forced_down}
    for name, (_zone, ready, cordoned) in sorted(nodes.observed(ctx.cluster.nodes()).items()):
        if name == server.get("node") or (named is not None and name != named):
            continue
        if ready and not cordoned and name not in unusable:
            return name
    raise NoValidHost("There are not enough hosts available.")
