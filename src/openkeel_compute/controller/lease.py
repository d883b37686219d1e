"""Leader election on a coordination.k8s.io/v1 Lease, written by hand (lightkube has none).

get → create when absent, or replace with the resourceVersion we read (optimistic concurrency): of two
replicas racing, the API server lets one through and answers the other 409. A standby takes over only
after the record stayed unchanged for leaseDurationSeconds *by its own clock* (client-go's rule), so
clock skew between replicas does not matter. A leader stops writing when it could not renew within
``renew_deadline`` (less than the duration), before anyone else may take over.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from openkeel_compute.kubevirt.mapping import MANAGED_BY, MANAGER

if TYPE_CHECKING:
    from openkeel_compute.controller.gateway import Gateway

LOG = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, cluster: Gateway, name: str, namespace: str, identity: str, duration: int = 15,
                 renew_interval: float = 5.0, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[bool], None] | None = None) -> None:
        self.cluster = cluster
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.duration = duration
        self.renew_interval = renew_interval
        self.renew_deadline = duration * 2 / 3
        self.clock = clock
        self.on_change = on_change
        self._renewed_at: float | None = None
        self._observed: tuple | None = None
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_leader = False

    @property
    def is_leader(self) -> bool:
        return self._renewed_at is not None and self.clock() - self._renewed_at < self.renew_deadline

    def _now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def _spec(self, previous: LeaseSpec | None) -> LeaseSpec:
        now = self._now()
        ours = previous is not None and previous.holderIdentity == self.identity
        transitions = (previous.leaseTransitions or 0) if previous is not None else 0
        return LeaseSpec(
            holderIdentity=self.identity,
            leaseDurationSeconds=self.duration,
            acquireTime=previous.acquireTime if previous is not None and ours and previous.acquireTime else now,
            renewTime=now,
            leaseTransitions=transitions if ours or previous is None or not previous.holderIdentity
            else transitions + 1,
        )

    def try_acquire_or_renew(self) -> bool:
        """One round: True when we hold the Lease afterwards."""
        lease = self.cluster.lease(self.name, self.namespace)
        if lease is None:
            return self._create()
        spec = lease.spec or LeaseSpec()
        record = (spec.holderIdentity, spec.renewTime, spec.leaseDurationSeconds,
                  lease.metadata.resourceVersion if lease.metadata is not None else None)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        holder = spec.holderIdentity
        if holder and holder != self.identity:
            duration = spec.leaseDurationSeconds or self.duration
            if self.clock() - self._observed_at < duration:
                self._renewed_at = None
                return False  # someone else holds it and renews it
            LOG.info("lease %s/%s: holder %s stopped renewing, taking over", self.namespace, self.name, holder)
        lease.spec = self._spec(spec)
        # carries metadata.resourceVersion: a concurrent change gives 409
        if not self.cluster.write_lease(lease, create=False):
            self._renewed_at = None
            return False
        self._renewed_at = self.clock()
        return True

    def _create(self) -> bool:
        lease = Lease(metadata=ObjectMeta(name=self.name, namespace=self.namespace, labels={MANAGED_BY: MANAGER}),
                      spec=self._spec(None))
        if not self.cluster.write_lease(lease, create=True):
            return False  # another replica created it first
        self._renewed_at = self.clock()
        return True

    def release(self) -> None:
        """Give the Lease up (holder cleared) so a standby does not wait for it to expire."""
        if not self.is_leader:
            return
        self._renewed_at = None
        try:
            lease = self.cluster.lease(self.name, self.namespace)
            if lease is not None and lease.spec and lease.spec.holderIdentity == self.identity:
                lease.spec.holderIdentity = None
                self.cluster.write_lease(lease, create=False)
        except Exception:
            LOG.warning("could not release lease %s/%s", self.namespace, self.name, exc_info=True)

    def _round(self) -> None:
        try:
            self.try_acquire_or_renew()
        except Exception as exc:  # noqa: BLE001 - the API server may be down; is_leader then lapses
            LOG.warning("lease %s/%s: %s", self.namespace, self.name, exc)
        leader = self.is_leader
        if leader != self._was_leader:
            LOG.info("lease %s/%s: %s", self.namespace, self.name, "acquired" if leader else "lost")
            self._was_leader = leader
            if self.on_change is not None:
                self.on_change(leader)

    def start(self) -> None:
        """Renew (or try to acquire) every renew_interval in a daemon thread."""
        def loop() -> None:
            while not self._stop.is_set():
                self._round()
                self._stop.wait(self.renew_interval)

        self._round()
        self._thread = threading.Thread(target=loop, name="lease", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.renew_interval + 5)
        if release:
            self.release()
