"""The Placement client against a real Placement (openstack-placement 16, embedded): allocations with
consumer generations, candidates, moves, usages, providers, and its errors."""

from __future__ import annotations

import socket
import uuid

import pytest

from openkeel_compute.placement import errors
from openkeel_compute.placement.client import PlacementClient, configured
from tests.conftest import make_conf, placement_overrides

INVENTORY = {"VCPU": {"total": 8, "allocation_ratio": 1.0}, "MEMORY_MB": {"total": 4096, "allocation_ratio": 1.0},
             "DISK_GB": {"total": 100, "allocation_ratio": 1.0}}


@pytest.fixture
def client(tmp_path, placement_service):
    return PlacementClient.from_conf(make_conf(tmp_path, placement=placement_overrides(placement_service)))


def _provider(client, inventory=INVENTORY, traits=(), aggregates=()):
    rp = str(uuid.uuid4())
    client.create_provider(rp, f"node-{rp}")
    generation = client.set_inventories(rp, 0, inventory)
    if traits:
        generation = client.set_traits(rp, generation, traits)
    if aggregates:
        client.set_aggregates(rp, generation, aggregates)
    return rp


def _ids():
    return str(uuid.uuid4()), uuid.uuid4().hex, uuid.uuid4().hex


def test_claim_read_and_give_back_with_consumer_generation(client):
    rp = _provider(client)
    consumer, project, user = _ids()
    assert client.get_allocations(consumer).allocations == {}
    assert client.get_allocations(consumer).generation is None
    client.put_allocations(consumer, {rp: {"VCPU": 2, "MEMORY_MB": 512}}, project_id=project, user_id=user,
                           consumer_generation=None)
    got = client.get_allocations(consumer)
    assert got.allocations == {rp: {"VCPU": 2, "MEMORY_MB": 512}}
    assert (got.generation, got.project_id, got.user_id) == (1, project, user)
    # a second claim as if the consumer were new loses: its generation moved on
    with pytest.raises(errors.PlacementConflict) as conflict:
        client.put_allocations(consumer, {rp: {"VCPU": 1}}, project_id=project, user_id=user,
                               consumer_generation=None)
    assert conflict.value.concurrent_update
    assert client.usages(project) == {"VCPU": 2, "MEMORY_MB": 512}
    assert client.usages(project, user) == {"VCPU": 2, "MEMORY_MB": 512}
    assert client.usages(project, "someone-else") == {}
    assert client.provider_allocations(rp) == {consumer: {"VCPU": 2, "MEMORY_MB": 512}}
    assert client.delete_allocations(consumer) is True
    assert client.get_allocations(consumer).allocations == {}
    assert client.delete_allocations(consumer) is False
    assert client.usages(project) == {}


def test_capacity_short_is_a_conflict_that_is_not_a_generation_one(client):
    rp = _provider(client)
    consumer, project, user = _ids()
    with pytest.raises(errors.PlacementConflict) as short:
        client.put_allocations(consumer, {rp: {"VCPU": 9}}, project_id=project, user_id=user,
                               consumer_generation=None)
    assert not short.value.concurrent_update
    assert client.get_allocations(consumer).allocations == {}


def test_forced_delete(client):
    rp = _provider(client)
    consumer, project, user = _ids()
    client.put_allocations(consumer, {rp: {"DISK_GB": 10}}, project_id=project, user_id=user,
                           consumer_generation=None)
    assert client.delete_allocations(consumer, force=True) is True
    assert client.delete_allocations(consumer, force=True) is False


def test_move_allocations_hands_the_server_allocation_to_the_migration(client):
    rp = _provider(client)
    server, project, user = _ids()
    migration = str(uuid.uuid4())
    client.put_allocations(server, {rp: {"VCPU": 2, "MEMORY_MB": 1024}}, project_id=project, user_id=user,
                           consumer_generation=None)
    assert client.move_allocations(server, migration) is True
    assert client.get_allocations(server).allocations == {}
    moved = client.get_allocations(migration)
    assert moved.allocations == {rp: {"VCPU": 2, "MEMORY_MB": 1024}}
    assert (moved.project_id, moved.user_id) == (project, user)
    # and back (a revert), onto a consumer that exists with no allocations
    assert client.move_allocations(migration, server) is True
    assert client.get_allocations(server).allocations == {rp: {"VCPU": 2, "MEMORY_MB": 1024}}
    assert client.get_allocations(migration).allocations == {}
    assert client.move_allocations(migration, server) is False  # nothing left to move


def test_allocation_candidates_filter_by_resources_traits_and_aggregates(client):
    aggregate = str(uuid.uuid4())
    trait = f"CUSTOM_T_{uuid.uuid4().hex.upper()}"
    plain = _provider(client, aggregates=[aggregate])
    marked = _provider(client, traits=[trait], aggregates=[aggregate])
    found = client.allocation_candidates({"resources": "VCPU:2,MEMORY_MB:512", "member_of": aggregate})
    assert sorted(c.providers[0] for c in found.candidates) == sorted([plain, marked])
    assert found.candidates[0].allocations[found.candidates[0].providers[0]] == {"VCPU": 2, "MEMORY_MB": 512}
    assert set(found.summaries) == {plain, marked}
    only = client.allocation_candidates({"resources": "VCPU:2", "member_of": aggregate, "required": trait})
    assert [c.providers for c in only.candidates] == [[marked]]
    assert client.allocation_candidates({"resources": "VCPU:9", "member_of": aggregate}).candidates == []
    assert len(client.allocation_candidates({"resources": "VCPU:1", "member_of": aggregate}, limit=1).candidates) == 1


def test_bad_query_is_a_placement_error(client):
    with pytest.raises(errors.PlacementError) as bad:
        client.allocation_candidates({"resources": "NOT_A_CLASS:1"})
    assert bad.value.status == 400


def test_providers_inventories_traits_and_deletion(client):
    rp = _provider(client, traits=["HW_CPU_X86_AVX2"])
    generation, inventories = client.inventories(rp)
    assert inventories["VCPU"]["total"] == 8
    assert client.traits(rp)[1] == {"HW_CPU_X86_AVX2"}
    assert client.provider(rp)["name"] == f"node-{rp}"
    assert [p["uuid"] for p in client.providers(name=f"node-{rp}")] == [rp]
    consumer, project, user = _ids()
    client.put_allocations(consumer, {rp: {"VCPU": 1}}, project_id=project, user_id=user, consumer_generation=None)
    with pytest.raises(errors.ProviderInUse):
        client.delete_provider(rp)
    with pytest.raises(errors.ProviderInUse):
        client.set_inventories(rp, client.inventories(rp)[0], {"MEMORY_MB": INVENTORY["MEMORY_MB"]})
    with pytest.raises(errors.PlacementConflict) as stale:
        client.set_inventories(rp, generation - 1, INVENTORY)
    assert stale.value.concurrent_update
    assert client.provider_usages(rp) == {"VCPU": 1, "MEMORY_MB": 0, "DISK_GB": 0}
    client.delete_allocations(consumer)
    assert client.delete_provider(rp) is True
    assert client.provider(rp) is None
    assert client.delete_provider(rp) is False


def test_unreachable_placement_is_unavailable(tmp_path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    client = PlacementClient.from_conf(make_conf(tmp_path, placement=placement_overrides(url)))
    with pytest.raises(errors.PlacementUnavailable, match="unreachable"):
        client.get_allocations(str(uuid.uuid4()))


def test_not_configured(tmp_path):
    conf = make_conf(tmp_path)
    assert not configured(conf)
    with pytest.raises(errors.PlacementNotConfigured, match=r"\[placement\] is not configured"):
        PlacementClient.from_conf(conf)
