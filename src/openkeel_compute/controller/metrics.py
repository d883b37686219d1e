"""Prometheus metrics of the controller, on a registry of its own (several controllers per test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconciles = Counter("openkeel_controller_reconciles", "Reconcile passes, by trigger (outbox|resync).",
                                  ["trigger"], registry=r)
        self.errors = Counter("openkeel_controller_errors", "Errors, by reason (transient, refused, conflict, "
                              "namespace-missing, mapping, retry).", ["reason"], registry=r)
        self.writes = Counter("openkeel_controller_writes", "Writes sent, by verb (create|apply|replace|delete).",
                              ["verb"], registry=r)
        self.outbox_pending = Gauge("openkeel_controller_outbox_pending", "Pending outbox rows.", registry=r)
        self.outbox_oldest_age = Gauge("openkeel_controller_outbox_oldest_pending_age_seconds",
                                       "Age of the oldest pending outbox row (0 when none).", registry=r)
        self.leader = Gauge("openkeel_controller_leader", "1 while this replica holds the Lease.", registry=r)
        self.out_of_sync = Gauge("openkeel_controller_problems",
                                 "Objects left out of sync by the last full resync (conflicts, missing namespaces, "
                                 "refused writes).", registry=r)
        self.last_resync = Gauge("openkeel_controller_last_resync_timestamp_seconds",
                                 "When the last full resync finished.", registry=r)

    def serve(self, host: str, port: int):
        """Serve /metrics in a daemon thread; returns (server, thread)."""
        return start_http_server(port, addr=host, registry=self.registry)
