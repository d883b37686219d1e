"""Claims before the VM, against the built-in cluster and a real Placement: the node with room and the
right traits is claimed and the VM pinned there; no room is Nova's "No valid host was found."; Placement
unreachable fails the build with nothing half-written; a controller that died between the claim and the
VM uses its claim; a node that leaves keeps its provider while servers hold resources on it."""

from __future__ import annotations

import dataclasses
import socket
import uuid as uuidlib

import pytest

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute import preconditions, working_state
from openkeel_compute.compute.instances import cas, instance_faults, store, updates
from openkeel_compute.controller import providers
from openkeel_compute.controller.claims import NO_VALID_HOST, Claims
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.emulator.lifecycle import NODE
from openkeel_compute.emulator.server import node
from openkeel_compute.model import states
from openkeel_compute.placement.client import PlacementClient
from tests.controller.helpers import IMAGE, OWNER, Both, action, active, row_of, until
from tests.server_world import with_placement


@pytest.fixture
def world(apiserver, kube, db, ctl, placement_service):
    """(loop, placement); the cluster has its node and ``ssd-1`` (trait CUSTOM_SSD), both providers."""
    apiserver.seed(node("ssd-1", labels={"openkeel.io/trait.CUSTOM_SSD": "true"}))
    servers = make_loop(kube, db)
    placement = with_placement(placement_service, apiserver, servers)
    return Both(ctl, servers), placement


def _boot(engine, *, vcpus=1, ram=512, disk=1, specs=None) -> str:
    flavorid = f"f-{uuidlib.uuid4().hex[:8]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=ram, vcpus=vcpus, root_gb=disk, flavorid=flavorid)
        flavor = catalog.get(conn, flavorid)
        if specs:
            catalog.set_extra_specs(conn, flavor, specs)
            flavor = catalog.get(conn, flavorid)
        row = store.create(conn, actor=OWNER, flavor=flavor, extra_specs=specs or {}, display_name="web 1",
                           image_ref=IMAGE, system_metadata={"image_min_disk": "1", "image_disk_format": "qcow2"})
        updates.outbox(conn, row["uuid"], "create", OWNER)
    return row["uuid"]


def _faults(engine, uuid):
    with db_api.reader(engine) as conn:
        return instance_faults.latest_faults(conn, [uuid])


def _failed(row) -> bool:
    return row["vm_state"] == states.ERROR


def test_the_claim_follows_the_flavors_traits_and_pins_the_vm(world, db, apiserver):
    loop, placement = world
    uuid = _boot(db, vcpus=2, ram=1024, specs={"trait:CUSTOM_SSD": "required"})
    row = until(loop, db, uuid, active)
    assert active(row), row
    assert (row["host"], row["node"]) == ("ssd-1", "ssd-1")
    rp = providers.provider_uuid("ssd-1")
    assert placement.get_allocations(uuid).allocations == {rp: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}}
    got = placement.get_allocations(uuid)
    assert (got.project_id, got.user_id) == (OWNER.project_id, OWNER.user_id)
    vm = apiserver.get("VirtualMachine", uuid, row["namespace"])
    terms = vm["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all({"key": "kubernetes.io/hostname", "operator": "In", "values": ["ssd-1"]} in t["matchExpressions"]
               for t in terms)
    vmi = apiserver.get("VirtualMachineInstance", uuid, row["namespace"])
    assert vmi["status"]["nodeName"] == "ssd-1"
    assert placement.usages(OWNER.project_id) == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}
    # delete gives it back
    action(db, uuid, "delete", "delete")
    assert until(loop, db, uuid, lambda r: r["deleted"])["deleted"]
    assert placement.get_allocations(uuid).allocations == {}


def test_no_room_is_no_valid_host_with_nothing_made(world, db, apiserver):
    loop, placement = world
    uuid = _boot(db, vcpus=200)  # 2 nodes x 16 CPUs x ratio 4 = at most 64 each
    row = until(loop, db, uuid, _failed)
    assert (row["vm_state"], row["task_state"]) == (states.ERROR, None)
    fault = _faults(db, uuid)[uuid]
    assert (fault["code"], fault["message"]) == (500, NO_VALID_HOST)
    assert "VCPU:200" in fault["details"]
    assert placement.get_allocations(uuid).allocations == {}
    assert [k for k in apiserver.objects("VirtualMachine") if k[1] == uuid] == []
    assert row["host"] is None
    # a trait Placement does not know (no node has it): Placement refuses the query, no valid host either
    other = _boot(db, specs={"trait:CUSTOM_NOWHERE": "required"})
    assert until(loop, db, other, _failed)["vm_state"] == states.ERROR
    fault = _faults(db, other)[other]
    assert fault["message"] == NO_VALID_HOST and "No such trait(s): CUSTOM_NOWHERE" in fault["details"]


def test_a_disabled_node_is_not_claimed(world, db, apiserver):
    loop, placement = world
    cordoned = apiserver.get("Node", "ssd-1")
    cordoned["spec"]["unschedulable"] = True
    apiserver.seed(cordoned)
    providers.sync(placement, list(apiserver.objects("Node").values()))
    uuid = _boot(db, specs={"trait:CUSTOM_SSD": "required"})
    assert until(loop, db, uuid, _failed)["vm_state"] == states.ERROR
    plain = _boot(db)
    assert until(loop, db, plain, active)["host"] == NODE


def test_placement_unreachable_fails_the_build_with_nothing_half_written(world, db, apiserver):
    loop, placement = world
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    loop.servers.claims = Claims(PlacementClient.for_endpoint(dead, "admin:admin", timeout=2))
    uuid = _boot(db)
    row = until(loop, db, uuid, _failed)
    assert row["vm_state"] == states.ERROR
    fault = _faults(db, uuid)[uuid]
    assert (fault["code"], fault["message"]) == (500, NO_VALID_HOST)
    assert "unreachable" in fault["details"]
    assert [k for k in apiserver.objects("VirtualMachine") if k[1] == uuid] == []
    assert placement.get_allocations(uuid).allocations == {}


def test_a_controller_killed_between_claim_and_vm_uses_its_claim_or_gives_it_back(world, db, apiserver):
    loop, placement = world
    claims = loop.servers.claims
    # the claim was made, then the controller died before it wrote anything else
    uuid = _boot(db, specs={"trait:CUSTOM_SSD": "required"})
    node_name, _alternates = claims.claim(row_of(db, uuid) | {"system_metadata": {}})
    assert node_name == "ssd-1"
    before = placement.get_allocations(uuid)
    row = until(loop, db, uuid, active)  # a new pass: the create row is still pending
    assert row["host"] == "ssd-1"
    after = placement.get_allocations(uuid)
    assert after.allocations == before.allocations and after.generation == before.generation  # not claimed twice
    # the same, but the server was deleted before the controller came back: the claim is given back
    gone = _boot(db)
    claims.claim(row_of(db, gone) | {"system_metadata": {}})
    assert placement.get_allocations(gone).allocations
    action(db, gone, "delete", "delete")
    assert until(loop, db, gone, lambda r: r["deleted"])["deleted"]
    assert placement.get_allocations(gone).allocations == {}
    assert [k for k in apiserver.objects("VirtualMachine") if k[1] == gone] == []


def test_a_node_that_leaves_keeps_its_provider_while_servers_hold_resources_on_it(world, db, apiserver):
    from openkeel_compute.emulator.faults import Fault

    loop, placement = world
    uuid = _boot(db, specs={"trait:CUSTOM_SSD": "required"})
    assert until(loop, db, uuid, active)["host"] == "ssd-1"
    held = placement.get_allocations(uuid).allocations
    # the node stops answering first (the VMI Failed, NodeUnresponsive): the server shows what Nova shows
    # for a compute host that is down (its vm_state, no power state) and keeps its allocations
    namespace = row_of(db, uuid)["namespace"]
    assert apiserver.inject(Fault(kind="node-loss", namespace=namespace, name=uuid)) == 1
    row = until(loop, db, uuid, lambda r: r["power_state"] == states.power_state.NOSTATE)
    assert (row["vm_state"], row["power_state"]) == (states.ACTIVE, states.power_state.NOSTATE), row
    # then the operator deletes the node: its guests will never run there again, the servers are shut off
    cluster = loop.servers.cluster
    asked = []
    real_node_exists = cluster.node_exists
    cluster.node_exists = lambda name: asked.append(name) or real_node_exists(name)
    apiserver.remove("Node", "ssd-1")
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED)
    assert (row["vm_state"], row["task_state"], row["power_state"]) == (
        states.STOPPED, None, states.power_state.SHUTDOWN), row
    assert row["host"] == "ssd-1"
    # its VMI stays failed on the gone node: the cluster is not asked about that node on every pass
    before = len(asked)
    for _ in range(5):
        loop.run_once()
    assert len(asked) == before and row_of(db, uuid)["power_state"] == states.power_state.SHUTDOWN
    report = providers.sync(placement, list(apiserver.objects("Node").values()))
    assert report.kept == ["ssd-1"]
    rp = providers.provider_uuid("ssd-1")
    assert providers.DISABLED_TRAIT in placement.traits(rp)[1]
    assert placement.get_allocations(uuid).allocations == held
    assert providers.sync(placement, list(apiserver.objects("Node").values())).kept == ["ssd-1"]  # no loop, no error
    action(db, uuid, "delete", "delete")
    assert until(loop, db, uuid, lambda r: r["deleted"])["deleted"]
    assert providers.sync(placement, list(apiserver.objects("Node").values())).deleted == ["ssd-1"]
    assert placement.provider(rp) is None


def test_starting_a_server_whose_node_was_deleted_claims_another_node_or_fails_with_no_valid_host(
        world, db, apiserver):
    loop, placement = world
    uuid = _boot(db, specs={"trait:CUSTOM_SSD": "required"})
    assert until(loop, db, uuid, active)["host"] == "ssd-1"
    held = placement.get_allocations(uuid).allocations
    apiserver.remove("Node", "ssd-1")
    row = until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED)
    assert (row["task_state"], row["power_state"]) == (None, states.power_state.SHUTDOWN)
    providers.sync(placement, list(apiserver.objects("Node").values()))
    # no other node has the trait: the start fails as Nova's does, the server stays SHUTOFF, nothing moved
    action(db, uuid, "start", "start")
    row = until(loop, db, uuid, lambda r: r["task_state"] is None)
    assert (row["vm_state"], row["task_state"], row["host"]) == (states.STOPPED, None, "ssd-1"), row
    fault = _faults(db, uuid)[uuid]
    assert (fault["code"], fault["message"]) == (500, NO_VALID_HOST) and "ssd-1 is gone" in fault["details"]
    assert placement.get_allocations(uuid).allocations == held
    # a hard reboot of the stopped server starts it the same way, and fails the same way
    with db_api.transaction(db) as conn:
        cas.begin_action(conn, uuid, preconditions.precondition("reboot", reboot_type="HARD"), OWNER)
        updates.outbox(conn, uuid, "reboot-hard", OWNER)
    row = until(loop, db, uuid, lambda r: r["task_state"] is None)
    assert (row["vm_state"], row["task_state"], row["host"]) == (states.STOPPED, None, "ssd-1"), row
    assert placement.get_allocations(uuid).allocations == held
    # a node that can take it joins: the start claims there (the gone node's allocation dropped) and runs
    apiserver.seed(node("ssd-2", labels={"openkeel.io/trait.CUSTOM_SSD": "true"}))
    providers.sync(placement, list(apiserver.objects("Node").values()))
    action(db, uuid, "start", "start")
    row = until(loop, db, uuid, active)
    assert active(row) and (row["host"], row["node"]) == ("ssd-2", "ssd-2"), row
    assert apiserver.get("VirtualMachineInstance", uuid, row["namespace"])["status"]["nodeName"] == "ssd-2"
    assert placement.get_allocations(uuid).allocations == {
        providers.provider_uuid("ssd-2"): {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}
    assert providers.sync(placement, list(apiserver.objects("Node").values())).deleted == ["ssd-1"]


def test_a_node_that_cannot_run_the_server_moves_the_claim_to_an_alternate(apiserver, kube, db, ctl,
                                                                           placement_service):
    """The claim lands on a node whose pods stay unschedulable: the build moves to the next node Placement
    offers (the claim with it), up to [scheduler] max_attempts nodes."""
    gold = {"openkeel.io/trait.CUSTOM_GOLD": "true"}
    apiserver.seed(node("ghost-1", labels=gold))
    servers = make_loop(kube, db)
    placement = with_placement(placement_service, apiserver, servers)  # ghost-1: the only gold node
    # ghost-1 stops taking pods after its provider was published (the next provider pass would disable it)
    apiserver.seed(node("ghost-1", ready=False, labels=gold))
    loop = Both(ctl, servers)
    uuid = _boot(db, specs={"trait:CUSTOM_GOLD": "required"})
    loop.run_once()
    assert row_of(db, uuid)["host"] == "ghost-1"
    apiserver.seed(node("gold-1", labels=gold))  # a gold node that works joins
    providers.sync(placement, [n for n in apiserver.objects("Node").values() if n["metadata"]["name"] != "ghost-1"]
                   + [node("ghost-1", labels=gold)])
    row = until(loop, db, uuid, lambda r: active(r) or _failed(r))
    assert active(row), _faults(db, uuid)
    assert row["host"] == "gold-1"
    assert placement.get_allocations(uuid).allocations == {
        providers.provider_uuid("gold-1"): {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}
    with db_api.reader(db) as conn:
        assert working_state.get(conn, uuid, "openkeel_tried_nodes") == "ghost-1,gold-1"
    vmi = apiserver.get("VirtualMachineInstance", uuid, row["namespace"])
    assert vmi["status"]["nodeName"] == "gold-1"

    # with one attempt only, a node that cannot run it fails the build, and the claim is given back
    servers.claims.max_attempts = 1
    apiserver.seed(node("gold-1", ready=False, labels=gold))
    other = _boot(db, specs={"trait:CUSTOM_GOLD": "required"})
    row = until(loop, db, other, _failed)
    assert row["vm_state"] == states.ERROR and row["host"] is None
    assert _faults(db, other)[other]["message"].startswith("No valid host was found. ")
    assert placement.get_allocations(other).allocations == {}


def _dead_placement() -> PlacementClient:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    return PlacementClient.for_endpoint(dead, "admin:admin", timeout=2)


def test_delete_with_placement_unreachable_completes_and_the_audit_gives_the_claim_back(world, db, apiserver):
    """As Nova's compute service: the delete does not wait for Placement; the allocations left behind
    belong to no server and the next audit gives them back."""
    from openkeel_compute.controller import audit

    loop, placement = world
    uuid = _boot(db, specs={"trait:CUSTOM_SSD": "required"})
    assert until(loop, db, uuid, active)["host"] == "ssd-1"
    held = placement.get_allocations(uuid).allocations
    assert held
    claims = loop.servers.claims
    loop.servers.claims = Claims(_dead_placement())
    try:
        action(db, uuid, "delete", "delete")
        row = until(loop, db, uuid, lambda r: r["deleted"])
        assert row["deleted"], row
        assert [k for k in apiserver.objects("VirtualMachine") if k[1] == uuid] == []
    finally:
        loop.servers.claims = claims
    assert placement.get_allocations(uuid).allocations == held  # not given back yet: Placement was away
    report = audit.audit(db, placement)
    assert report.leaked == {uuid: held} and not report.failed
    assert placement.get_allocations(uuid).allocations == {}


def _resize(engine, uuid, *, vcpus=2, ram=1024, disk=2) -> str:
    from openkeel_compute.compute import resize

    flavorid = f"f-{uuidlib.uuid4().hex[:8]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=ram, vcpus=vcpus, root_gb=disk, flavorid=flavorid)
        return resize.start(conn, store.get(conn, uuid), catalog.get(conn, flavorid), {}, OWNER,
                            auto_disk_config=False)


def _after_resize(engine, uuid, op):
    from openkeel_compute.compute import resize

    with db_api.transaction(engine) as conn:
        return getattr(resize, op)(conn, store.get(conn, uuid), OWNER)


def _resized(row) -> bool:
    return row["vm_state"] == states.RESIZED and row["task_state"] is None


def _vmi_node(apiserver, uuid, namespace):
    return apiserver.get("VirtualMachineInstance", uuid, namespace)["status"]["nodeName"]


def test_a_resize_goes_to_another_node_unless_allowed_to_stay(world, db, apiserver):
    """allow_resize_to_same_host false (Nova's default): the new flavor is claimed on another node's provider
    and the VM is restarted pinned there; a revert brings it back. True: the server stays on its node."""
    loop, placement = world
    assert loop.servers.settings.allow_resize_to_same_host is False
    uuid = _boot(db)
    row = until(loop, db, uuid, active)
    source = row["host"]
    other = ({NODE, "ssd-1"} - {source}).pop()
    old = placement.get_allocations(uuid).allocations
    migration = _resize(db, uuid)
    row = until(loop, db, uuid, _resized)
    assert _resized(row), row
    assert (row["host"], row["node"]) == (other, other)
    assert _vmi_node(apiserver, uuid, row["namespace"]) == other
    assert placement.get_allocations(uuid).allocations == {
        providers.provider_uuid(other): {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 2}}
    assert placement.get_allocations(migration).allocations == old
    _after_resize(db, uuid, "revert")
    row = until(loop, db, uuid, lambda r: active(r) and r["task_state"] is None)
    assert (row["host"], row["node"]) == (source, source)
    assert _vmi_node(apiserver, uuid, row["namespace"]) == source
    assert placement.get_allocations(uuid).allocations == old
    assert placement.get_allocations(migration).allocations == {}
    # allowed to stay: the server's own node first
    loop.servers.settings = dataclasses.replace(loop.servers.settings, allow_resize_to_same_host=True)
    migration = _resize(db, uuid)
    row = until(loop, db, uuid, _resized)
    assert (row["host"], _vmi_node(apiserver, uuid, row["namespace"])) == (source, source)
    assert placement.get_allocations(uuid).allocations == {
        providers.provider_uuid(source): {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 2}}
    _after_resize(db, uuid, "confirm")
    row = until(loop, db, uuid, lambda r: active(r) and r["task_state"] is None)
    assert placement.get_allocations(migration).allocations == {}


@pytest.mark.parametrize("stopped", [False, True])
def test_a_revert_whose_old_node_was_deleted_reverts_where_the_server_is(world, db, apiserver, stopped):
    """The resize moved the server and its old node was deleted before the revert: the old flavor comes
    back on the node the server is on (its allocation there, the migration's given back), never pinned to
    a node that will not run it again."""
    loop, placement = world
    uuid = _boot(db)
    row = until(loop, db, uuid, active)
    source = row["host"]
    other = ({NODE, "ssd-1"} - {source}).pop()
    old = next(iter(placement.get_allocations(uuid).allocations.values()))
    if stopped:
        action(db, uuid, "stop", "stop")
        row = until(loop, db, uuid, lambda r: r["vm_state"] == states.STOPPED and r["task_state"] is None)
    migration = _resize(db, uuid)
    row = until(loop, db, uuid, _resized)
    assert row["host"] == other, row
    apiserver.remove("Node", source)
    providers.sync(placement, list(apiserver.objects("Node").values()))
    _after_resize(db, uuid, "revert")
    done = until(loop, db, uuid, lambda r: r["task_state"] is None and r["vm_state"] != states.RESIZED)
    assert (done["vm_state"], done["host"], done["node"]) == (
        states.STOPPED if stopped else states.ACTIVE, other, other), done
    assert store.flavors_of(done).cur["memory_mb"] == old["MEMORY_MB"]
    assert placement.get_allocations(uuid).allocations == {providers.provider_uuid(other): old}
    assert placement.get_allocations(migration).allocations == {}
    vm = apiserver.get("VirtualMachine", uuid, done["namespace"])
    terms = vm["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all({"key": "kubernetes.io/hostname", "operator": "In", "values": [other]} in t["matchExpressions"]
               for t in terms)
    if not stopped:
        assert _vmi_node(apiserver, uuid, done["namespace"]) == other


def test_a_resize_no_other_node_can_take_is_no_valid_host(world, db, apiserver):
    """As Nova's conductor: the server stays ACTIVE on its flavor, the migration ends in error, the fault is
    recorded, and the allocations are as before."""
    from openkeel_compute.compute import resize

    loop, placement = world
    uuid = _boot(db)
    row = until(loop, db, uuid, active)
    other = ({NODE, "ssd-1"} - {row["host"]}).pop()
    cordoned = apiserver.get("Node", other)
    cordoned["spec"]["unschedulable"] = True
    apiserver.seed(cordoned)
    providers.sync(placement, list(apiserver.objects("Node").values()))
    old = placement.get_allocations(uuid).allocations
    flavor_before = row["flavor"]
    migration = _resize(db, uuid)
    row = until(loop, db, uuid, lambda r: r["task_state"] is None)
    assert (row["vm_state"], row["task_state"], row["host"]) == (states.ACTIVE, None, row["host"])
    assert store.flavors_of(row).new is None and store.flavors_of(row).cur == \
        store.flavors_of({"flavor": flavor_before}).cur
    fault = _faults(db, uuid)[uuid]
    assert (fault["code"], fault["message"]) == (500, NO_VALID_HOST)
    assert "allow_resize_to_same_host is false" in fault["details"]
    with db_api.reader(db) as conn:
        assert resize.migration_of(conn, uuid, "error")["uuid"] == migration
    assert placement.get_allocations(uuid).allocations == old
    assert placement.get_allocations(migration).allocations == {}
    assert [k for k in apiserver.objects("VirtualMachineInstance") if k[1] == uuid]


def test_a_resize_with_placement_unreachable_fails_with_nothing_half_written(world, db, apiserver):
    """As Nova's scheduler with Placement away: no valid host; the server keeps its state, flavor and VM,
    the migration is in error, and what Placement holds is what it held."""
    from openkeel_compute.compute import resize

    loop, placement = world
    uuid = _boot(db)
    row = until(loop, db, uuid, active)
    old = placement.get_allocations(uuid).allocations
    vm_before = apiserver.get("VirtualMachine", uuid, row["namespace"])["spec"]
    claims = loop.servers.claims
    loop.servers.claims = Claims(_dead_placement())
    try:
        migration = _resize(db, uuid)
        row = until(loop, db, uuid, lambda r: r["task_state"] is None)
    finally:
        loop.servers.claims = claims
    assert (row["vm_state"], row["task_state"]) == (states.ACTIVE, None), row
    assert store.flavors_of(row).new is None
    fault = _faults(db, uuid)[uuid]
    assert (fault["code"], fault["message"]) == (500, NO_VALID_HOST) and "unreachable" in fault["details"]
    with db_api.reader(db) as conn:
        assert resize.migration_of(conn, uuid, "error")["uuid"] == migration
    assert placement.get_allocations(uuid).allocations == old
    assert placement.get_allocations(migration).allocations == {}
    assert apiserver.get("VirtualMachine", uuid, row["namespace"])["spec"] == vm_before
def _counting(claims: Claims) -> list:
    """The GET /allocation_candidates the claims make from now on (Placement still answers each)."""
    calls: list = []
    asked = claims.placement.allocation_candidates

    def counted(*args, **kwargs):
        calls.append(args)
        return asked(*args, **kwargs)

    claims.placement.allocation_candidates = counted
    return calls


def test_the_servers_of_one_pass_share_one_answer_and_still_fill_every_node(world, db, apiserver):
    """A multi-create asks Placement once for candidates (as Nova's scheduler does), each PUT is still
    Placement's to accept: a full node is skipped, the next one taken, and the one server too many is
    Nova's "No valid host was found." after a fresh answer says so."""
    loop, placement = world
    calls = _counting(loop.servers.claims)
    uuids = [_boot(db, ram=30000) for _ in range(5)]  # 65,024 MiB per node: two each on the two nodes
    loop.process_outbox()
    rows = {u: row_of(db, u) for u in uuids}
    placed = [u for u in uuids if rows[u]["host"]]
    assert len(placed) == 4, rows
    assert sorted(rows[u]["host"] for u in placed) == sorted([NODE, NODE, "ssd-1", "ssd-1"])
    for u in placed:
        got = placement.get_allocations(u).allocations
        assert got == {providers.provider_uuid(rows[u]["host"]): {"VCPU": 1, "MEMORY_MB": 30000, "DISK_GB": 1}}
    (late,) = set(uuids) - set(placed)
    assert rows[late]["vm_state"] == states.ERROR
    assert _faults(db, late)[late]["message"] == NO_VALID_HOST
    assert placement.get_allocations(late).allocations == {}
    assert len(calls) == 2  # the shared answer, then the fresh one that had nothing left


def test_a_shared_answer_that_went_stale_is_asked_again(world, db, apiserver):
    loop, placement = world
    claims = loop.servers.claims
    calls = _counting(claims)
    a, b, c, d = (_boot(db, ram=40000) for _ in range(4))  # one per node
    claims.begin_pass()
    first, _ = claims.claim(row_of(db, a) | {"system_metadata": {}})
    second, _ = claims.claim(row_of(db, b) | {"system_metadata": {}})  # the first node is full now: skipped
    assert {first, second} == {NODE, "ssd-1"} and len(calls) == 1
    apiserver.seed(node("extra-1"))  # a node joins after the answer was taken
    providers.sync(placement, list(apiserver.objects("Node").values()))
    third, _ = claims.claim(row_of(db, c) | {"system_metadata": {}})
    assert third == "extra-1" and len(calls) == 2
    with pytest.raises(Exception, match="No valid host was found. No allocation candidates for"):
        claims.claim(row_of(db, d) | {"system_metadata": {}})
    assert placement.get_allocations(d).allocations == {}
    # a server whose claim holds the last room on its node (a controller restarted after the claim):
    # no candidate is left, and its own claim is its answer, claimed once
    claims.begin_pass()
    before = placement.get_allocations(a)
    assert claims.claim(row_of(db, a) | {"system_metadata": {}})[0] == first
    after = placement.get_allocations(a)
    assert (after.allocations, after.generation) == (before.allocations, before.generation)


def _counting_writes(claims):
    """The claim requests the loop sends: ("claim_new", consumers) and ("put", consumer)."""
    calls: list[tuple] = []
    placement = claims.placement
    claim_new, put = placement.claim_new, placement.put_allocations

    def counted_claim_new(consumers, *args, **kwargs):
        calls.append(("claim_new", sorted(consumers)))
        return claim_new(consumers, *args, **kwargs)

    def counted_put(consumer, *args, **kwargs):
        calls.append(("put", consumer))
        return put(consumer, *args, **kwargs)

    placement.claim_new, placement.put_allocations = counted_claim_new, counted_put
    return calls


def test_the_builds_of_one_pass_are_claimed_in_one_request_node_by_node(world, db, apiserver):
    """Five builds of one pass, two per node: one POST /allocations claims the four that fit (each on
    the node its own claim would take), and the fifth is Nova's "No valid host was found."."""
    loop, placement = world
    writes = _counting_writes(loop.servers.claims)
    uuids = [_boot(db, ram=30000) for _ in range(5)]
    loop.process_outbox()
    rows = {u: row_of(db, u) for u in uuids}
    assert [rows[u]["host"] for u in uuids[:4]] == [NODE, NODE, "ssd-1", "ssd-1"] or \
        [rows[u]["host"] for u in uuids[:4]] == ["ssd-1", "ssd-1", NODE, NODE], rows
    assert writes[0] == ("claim_new", sorted(uuids[:4]))
    assert [w for w in writes[1:] if w[0] == "claim_new"] == []
    for u in uuids[:4]:
        got = placement.get_allocations(u)
        assert got.allocations == {providers.provider_uuid(rows[u]["host"]): {"VCPU": 1, "MEMORY_MB": 30000,
                                                                              "DISK_GB": 1}}
        assert (got.project_id, got.user_id) == (OWNER.project_id, OWNER.user_id)
    assert rows[uuids[4]]["vm_state"] == states.ERROR
    assert _faults(db, uuids[4])[uuids[4]]["message"] == NO_VALID_HOST
    assert placement.get_allocations(uuids[4]).allocations == {}


def test_claims_together_refused_are_made_one_by_one(world, db, apiserver):
    """Placement refuses the whole request when one consumer exists already (a controller that died
    after its claim, before it wrote the node): nothing of it is claimed, each server is claimed alone,
    and the one that had a claim keeps it unchanged."""
    loop, placement = world
    claims = loop.servers.claims
    earlier, *others = [_boot(db) for _ in range(3)]
    claims.begin_pass()
    node_name, _ = claims.claim(row_of(db, earlier) | {"system_metadata": {}})
    before = placement.get_allocations(earlier)
    writes = _counting_writes(claims)
    loop.process_outbox()
    assert writes[0] == ("claim_new", sorted([earlier, *others]))
    assert sorted(w[1] for w in writes[1:] if w[0] == "put") == sorted([earlier, *others])
    rows = {u: row_of(db, u) for u in (earlier, *others)}
    assert rows[earlier]["host"] == node_name
    after = placement.get_allocations(earlier)
    assert (after.allocations, after.generation) == (before.allocations, before.generation)
    for u in others:
        assert rows[u]["host"] in (NODE, "ssd-1")
        assert placement.get_allocations(u).allocations == {
            providers.provider_uuid(rows[u]["host"]): {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}}
