"""Leader election on a Lease: one leader, takeover after expiry, 409 on a lost race, only the leader writes."""

from __future__ import annotations

from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.lease import LeaderElector
from openkeel_compute.emulator import Fault
from tests.controller.helpers import CIT, controller_for


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def electors(apiserver, clock, n=2):
    cluster = Gateway(make_client(apiserver.kubeconfig()))
    return [LeaderElector(cluster, "lease", "default", f"replica-{i}", duration=15, renew_interval=5, clock=clock)
            for i in range(n)]


def test_one_leader_then_takeover_after_the_holder_stops_renewing(apiserver):
    clock = FakeClock()
    a, b = electors(apiserver, clock)
    assert a.try_acquire_or_renew() and a.is_leader
    assert not b.try_acquire_or_renew() and not b.is_leader
    clock.now += 10
    assert a.try_acquire_or_renew()  # renewed: b's view of the record changes, the clock restarts
    assert not b.try_acquire_or_renew()
    clock.now += 14
    assert not b.try_acquire_or_renew()  # unchanged for 14 s < 15 s
    assert not a.is_leader  # a did not renew within its deadline (10 s): it stopped writing already
    clock.now += 2
    assert b.try_acquire_or_renew() and b.is_leader
    assert not a.try_acquire_or_renew() and not a.is_leader
    lease = apiserver.handler.get("Lease", "lease", "default")
    assert lease["spec"]["holderIdentity"] == "replica-1" and lease["spec"]["leaseTransitions"] == 1


def test_a_lost_race_is_a_409_and_not_leadership(apiserver):
    clock = FakeClock()
    a, b = electors(apiserver, clock)
    assert a.try_acquire_or_renew()
    apiserver.handler.faults.append(Fault(409, method="PUT", plural="leases"))
    assert not a.try_acquire_or_renew() and not a.is_leader
    # Two replicas reading the same resourceVersion: the second write is refused by the server.
    lease, stale = a.cluster.lease("lease", "default"), a.cluster.lease("lease", "default")
    lease.spec.holderIdentity = "x"
    assert a.cluster.write_lease(lease, create=False)
    stale.spec.holderIdentity = "y"
    assert not a.cluster.write_lease(stale, create=False)
    del b


def test_release_lets_a_standby_take_over_at_once(apiserver):
    clock = FakeClock()
    a, b = electors(apiserver, clock)
    assert a.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew()


def test_only_the_leader_writes(conf, apiserver, cat):
    clock = FakeClock()
    a, b = electors(apiserver, clock)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    leader = controller_for(conf, apiserver, is_leader=lambda: a.is_leader)
    standby = controller_for(conf, apiserver, is_leader=lambda: b.is_leader)
    cat.create("m1")
    report = standby.process_outbox()
    assert report.transient and "leader" in report.transient
    assert apiserver.handler.get(CIT, "m1") is None and len(cat.pending()) == 1
    leader.process_outbox()
    assert apiserver.handler.get(CIT, "m1") is not None and cat.pending() == []
