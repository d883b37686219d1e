"""Nodes as resource providers against a real Placement: inventories from allocatable, ratios and reserved
amounts, PCPU for CPU-manager nodes, traits and aggregates from labels, disabled nodes, nodes that leave."""

from __future__ import annotations

import uuid

import pytest

from openkeel_compute.controller import providers
from openkeel_compute.controller.providers import Labels, Ratios, provider_uuid, quantity, zone_aggregate
from openkeel_compute.emulator.server import node
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import make_conf, placement_overrides


@pytest.fixture
def placement(tmp_path, placement_service):
    return PlacementClient.from_conf(make_conf(tmp_path, placement=placement_overrides(placement_service)))


def _name():
    return f"node-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize(("text", "value"), [
    ("16", 16), ("7500m", 7.5), ("64Gi", 64 * 2**30), ("65536Mi", 64 * 2**30), ("16384000Ki", 16384000 * 1024),
    ("100G", 10**11), ("1e3", 1000), ("0", 0),
])
def test_kubernetes_quantities(text, value):
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["", "12x", "Gi", "1.2.3"])
def test_malformed_quantities(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity(text)


def test_desired_provider_of_a_node():
    n = node("w1", zone="az-1", cpu="7500m", memory="16Gi", disk="100Gi",
             labels={"openkeel.io/trait.HW_CPU_X86_AVX2": "true", "openkeel.io/trait.CUSTOM_GOLD": "false",
                     "openkeel.io/trait.bad-name": "true", "openkeel.io/aggregate.ssd": "true"})
    want = providers.desired(n, Ratios(reserved_cpus=1), Labels())
    assert want.uuid == provider_uuid("w1") == str(uuid.uuid5(providers.PROVIDER_NAMESPACE, "w1"))
    assert want.inventories["VCPU"] == {"total": 7, "reserved": 1, "min_unit": 1, "max_unit": 7, "step_size": 1,
                                        "allocation_ratio": 4.0}
    assert want.inventories["MEMORY_MB"]["total"] == 16384
    assert want.inventories["MEMORY_MB"]["reserved"] == 512
    assert want.inventories["DISK_GB"]["total"] == 100
    assert want.traits == {"HW_CPU_X86_AVX2", providers.MARKER_TRAIT}
    assert want.aggregates == {zone_aggregate("az-1"), providers.label_aggregate("ssd", "true")}
    # a configured ratio wins over Placement's; unset, Placement's is kept
    kept = providers.desired(n, Ratios(), Labels(), current={"VCPU": {"allocation_ratio": 2.0}})
    assert kept.inventories["VCPU"]["allocation_ratio"] == 2.0
    forced = providers.desired(n, Ratios(cpu=8.0), Labels(), current={"VCPU": {"allocation_ratio": 2.0}})
    assert forced.inventories["VCPU"]["allocation_ratio"] == 8.0


def test_cpu_manager_nodes_offer_pcpu_and_unavailable_nodes_are_disabled():
    dedicated = providers.desired(node("d1", cpu="8", labels={"cpumanager": "true"}), Ratios(), Labels())
    assert "VCPU" not in dedicated.inventories
    assert dedicated.inventories["PCPU"]["total"] == 8
    assert dedicated.inventories["PCPU"]["allocation_ratio"] == 1.0
    assert providers.DISABLED_TRAIT not in dedicated.traits
    assert dedicated.aggregates == {zone_aggregate("nova")}  # no zone label: the default zone
    not_ready = providers.desired(node("d2", ready=False), Ratios(), Labels())
    assert providers.DISABLED_TRAIT in not_ready.traits
    cordoned = node("d3")
    cordoned["spec"]["unschedulable"] = True
    assert providers.DISABLED_TRAIT in providers.desired(cordoned, Ratios(), Labels()).traits
    tiny = providers.desired(node("d4", memory="256Mi"), Ratios(), Labels())
    assert tiny.inventories["MEMORY_MB"]["reserved"] == 256  # never more than the total


def test_sync_creates_updates_and_retires_providers(placement):
    """The Placement is shared with other tests, whose providers a sync of this test's nodes sees too
    (and retires or keeps): only this test's nodes are looked at in the reports."""
    a, b = _name(), _name()

    def mine(names):
        return sorted(n for n in names if n in (a, b))

    nodes = [node(a, zone="az-x", labels={"openkeel.io/trait.CUSTOM_FAST": "true"}), node(b, cpu="4")]
    report = providers.sync(placement, nodes, Ratios(), Labels())
    assert mine(report.created) == sorted([a, b])
    rp_a = provider_uuid(a)
    assert placement.provider(rp_a)["name"] == a
    assert placement.inventories(rp_a)[1]["VCPU"]["total"] == 16
    assert placement.traits(rp_a)[1] == {"CUSTOM_FAST", providers.MARKER_TRAIT}
    assert placement.aggregates(rp_a)[1] == {zone_aggregate("az-x")}
    # a second pass changes nothing
    again = providers.sync(placement, nodes, Ratios(), Labels())
    assert not mine(again.created + again.updated + again.deleted)
    # the node grows and loses its trait; a ratio set in Placement is kept
    generation, inventories = placement.inventories(rp_a)
    inventories["VCPU"]["allocation_ratio"] = 2.0
    placement.set_inventories(rp_a, generation, inventories)
    nodes[0] = node(a, zone="az-x", cpu="32")
    changed = providers.sync(placement, nodes, Ratios(), Labels())
    assert mine(changed.updated) == [a]
    vcpu = placement.inventories(rp_a)[1]["VCPU"]
    assert (vcpu["total"], vcpu["allocation_ratio"]) == (32, 2.0)
    assert placement.traits(rp_a)[1] == {providers.MARKER_TRAIT}
    # node a leaves while a server holds resources on it: kept and disabled until that is given back
    server = str(uuid.uuid4())
    placement.put_allocations(server, {rp_a: {"VCPU": 1}}, project_id="p", user_id="u", consumer_generation=None)
    gone = providers.sync(placement, nodes[1:], Ratios(), Labels())
    assert mine(gone.kept) == [a] and mine(gone.deleted) == []
    assert providers.DISABLED_TRAIT in placement.traits(rp_a)[1]
    assert placement.get_allocations(server).allocations == {rp_a: {"VCPU": 1}}
    placement.delete_allocations(server)
    assert mine(providers.sync(placement, nodes[1:], Ratios(), Labels()).deleted) == [a]
    assert placement.provider(rp_a) is None
    providers.sync(placement, [], Ratios(), Labels())
    assert placement.provider(provider_uuid(b)) is None


def test_a_foreign_provider_of_the_same_name_is_left_alone(placement):
    name = _name()
    other = str(uuid.uuid4())
    placement.create_provider(other, name)
    report = providers.sync(placement, [node(name)], Ratios(), Labels())
    assert report.created == []
    assert placement.provider(provider_uuid(name)) is None
    assert placement.provider(other)["name"] == name
    providers.sync(placement, [], Ratios(), Labels())
    assert placement.provider(other) is not None  # not ours: never deleted
    placement.delete_provider(other)


def test_a_new_nodes_provider_is_written_without_reading_back_what_it_cannot_have_yet(placement):
    """A provider just created has no inventory, traits or aggregates: its first sync creates it and
    writes them, with no read of them in between (a cluster's first start syncs every node at once)."""
    name = _name()
    sent: list[tuple[str, str]] = []
    request = placement._request

    def counted(method, path, *args, **kwargs):
        sent.append((method, path.split("?")[0]))
        return request(method, path, *args, **kwargs)

    placement._request = counted
    rp = provider_uuid(name)
    report = providers.sync(placement, [node(name, zone="az-y")], Ratios(), Labels())
    assert report.created == [name]
    mine = [(m, p) for m, p in sent if rp in p or p == "/resource_providers"]
    assert [m for m, p in mine if m == "GET" and p != f"/resource_providers/{rp}" and p != "/resource_providers"] \
        == [], mine
    placement._request = request
    assert placement.inventories(rp)[1]["MEMORY_MB"]["total"] == 65536
    assert placement.traits(rp)[1] == {providers.MARKER_TRAIT}
    assert placement.aggregates(rp)[1] == {zone_aggregate("az-y")}
