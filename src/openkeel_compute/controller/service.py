"""Assemble a controller from configuration: backend (cluster or render directory), Lease, metrics."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from lightkube import Client

from openkeel_compute import signals
from openkeel_compute.compute import host_filters
from openkeel_compute.conf import cinder as cinder_conf
from openkeel_compute.conf.controller import default_identity
from openkeel_compute.conf.kubevirt import mapping_options
from openkeel_compute.controller import audit, compute_services, evacuations, nodes, providers, usage_audit
from openkeel_compute.controller.claims import Claims
from openkeel_compute.controller.engine import Controller
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.kube import Retry, make_client
from openkeel_compute.controller.lease import LeaderElector
from openkeel_compute.controller.metrics import Metrics
from openkeel_compute.controller.render import RenderBackend
from openkeel_compute.controller.servers import ServerLoop
from openkeel_compute.controller.settings import ServerSettings, Settings
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.db.api import get_engine
from openkeel_compute.kubevirt.flavor import FlavorCheck
from openkeel_compute.notifications import server_events
from openkeel_compute.notifications.server import ServerNotifier
from openkeel_compute.placement import client as placement_client

LOG = logging.getLogger(__name__)


def gateway_from(conf: Any, client: Client, metrics: Metrics | None = None) -> Gateway:
    """The cluster gateway on a lightkube client, with [controller]'s retry policy."""
    retry = Retry(conf.controller.max_retries, conf.controller.retry_base_delay,
                  on_retry=(lambda _r: metrics.errors.labels("retry").inc()) if metrics else None)
    return Gateway(client, retry)


def server_loop_from(conf: Any, engine: Any, cluster: Gateway | Client, *, once: bool = False,
                     claims: Claims | None = None) -> ServerLoop:
    """The server loop with the site's settings (ServerSettings.from_conf), [service_user] for the image
    token, and Placement: the claims' client, or ``[placement]``'s for the resizes' accounting."""
    if not isinstance(cluster, Gateway):
        cluster = gateway_from(conf, cluster)
    placement = None
    if claims is None and placement_client.configured(conf):
        placement = placement_client.PlacementClient.from_conf(conf)
    network = None
    from openkeel_compute.conf import neutron as neutron_conf

    if neutron_conf.configured(conf):  # Neutron is the network service: servers' interfaces are its ports
        from openkeel_compute.network.client import NeutronClient

        network = NeutronClient(conf)
    volumes = None
    if cinder_conf.configured(conf):  # Cinder: servers' volumes are its attachments
        from openkeel_compute.volume.client import CinderClient

        volumes = CinderClient(conf)
    return ServerLoop(engine, cluster, ServerSettings.from_conf(conf, once=once), images=ImageAccess.from_conf(conf),
                      claims=claims, placement=placement, network=network, volumes=volumes)


def build_backend(conf: Any, kubeconfig: str | None = None, render_dir: str | None = None,
                  metrics: Metrics | None = None):
    """(backend, cluster gateway or None): a cluster when a kubeconfig is given (the gateway is then the
    flavor engine's backend too), else a render directory."""
    if render_dir is None:
        kubeconfig = kubeconfig or conf.controller.kubeconfig
    if kubeconfig:
        gateway = gateway_from(conf, make_client(kubeconfig, conf.controller.request_timeout), metrics)
        return gateway, gateway
    return RenderBackend(render_dir or conf.controller.render_dir), None


def _acquire_within(elector: LeaderElector, seconds: float) -> bool:
    """Try for the Lease for up to ``seconds``: long enough for a dead holder's claim to expire."""
    deadline = time.monotonic() + seconds
    while True:
        if elector.try_acquire_or_renew():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(0.5, elector.renew_interval))


def _node_publisher(engine, cluster: Gateway, stop: threading.Event, interval: float, is_leader,
                    publish_providers=None) -> threading.Thread:
    """Publish the nodes' zones (availability zones) and their resource providers every ``interval``
    seconds while leading."""

    def loop() -> None:
        while not stop.wait(max(interval, 1.0)):
            if is_leader():
                try:
                    nodes.sync(engine, cluster)
                    if publish_providers is not None:
                        publish_providers()
                except Exception as exc:  # noqa: BLE001 - the database or the cluster away: next time
                    LOG.warning("nodes not published: %s", str(exc).splitlines()[0][:300] if str(exc) else exc)

    thread = threading.Thread(target=loop, name="node-zones", daemon=True)
    thread.start()
    return thread


def _heartbeat(engine, cluster: Gateway, stop: threading.Event, interval: float, is_leader,
               publish_providers, after_beat=None) -> threading.Thread:
    """The compute services' heartbeat every ``interval`` seconds while leading (controller/compute_services.py);
    the providers are updated at once when a node was cordoned, uncordoned or moved to another zone, a service
    forced down or up, or a host added to or removed from an aggregate."""

    def loop() -> None:
        seen = None
        while not stop.wait(max(interval, 1.0)):
            if not is_leader():
                continue
            try:
                changed = compute_services.heartbeat(engine, cluster)
                if after_beat is not None:
                    after_beat()  # the services up again: their evacuated servers' allocations
                now = compute_services.placement_view(engine)
                if changed or (seen is not None and now != seen):
                    publish_providers(audit_too=False)
                seen = now
            except Exception as exc:  # noqa: BLE001 - the database or the cluster away: next time
                LOG.warning("compute services not published: %s",
                            str(exc).splitlines()[0][:300] if str(exc) else exc)

    thread = threading.Thread(target=loop, name="service-heartbeat", daemon=True)
    thread.start()
    return thread


def _when_database_answers(work, stop: threading.Event, max_delay: float = 30.0) -> bool:
    """Run ``work`` (a start-up step reading or writing the database); while the database is away, try
    again with a delay doubling up to ``max_delay``, as the running loop does (False: stopped first)."""
    delay = 0.5
    away = False
    while True:
        try:
            work()
        except Exception as exc:
            if not db_api.unavailable(exc):
                raise
            if not away:
                LOG.warning("the database cannot be used yet, trying again with backoff: %s",
                            str(exc).splitlines()[0][:300])
                away = True
            if stop.wait(delay):
                return False
            delay = min(max_delay, delay * 2)
            continue
        if away:
            LOG.warning("the database answers: starting")
        return True


def placement_from(conf: Any, embedded_url: str | None = None):
    """The controller's Placement client: ``[placement]``, or the embedded Placement at ``embedded_url``."""
    from openkeel_compute.placement import embedded
    from openkeel_compute.placement.client import PlacementClient

    if embedded_url is not None:
        return PlacementClient.for_endpoint(embedded_url, embedded.TOKEN)
    return PlacementClient.from_conf(conf)


def _server_notifier(conf: Any, engine: Any) -> ServerNotifier | None:
    """The controller's server notifications (the compute steps' instance.* events), installed for the
    hooks in compute/; None when nothing would be sent."""
    notifier = ServerNotifier(conf, host=conf.host, engine=engine)
    if not notifier.sends_servers:
        notifier.close()
        return None
    server_events.install(notifier)
    return notifier


def _with_usage_audit(conf: Any, engine: Any, notifier: Any, then: Any) -> Any:
    """The leader's periodic work, with Nova's instance usage audit when [DEFAULT] instance_usage_audit is on
    (once per period and node: controller/usage_audit.py)."""
    if not conf.instance_usage_audit:
        return then

    def work() -> None:
        if then is not None:
            then()
        try:
            usage_audit.run(engine, conf.instance_usage_audit_period, notifier)
        except Exception as exc:  # noqa: BLE001 - the next pass tries again
            LOG.warning("instance usage audit not run: %s", exc)

    return work


def warn_filters_without_effect(conf: Any) -> list[str]:
    """One warning naming the enabled scheduler filters that do nothing here (returned)."""
    names = host_filters.without_effect(conf.filter_scheduler.enabled_filters)
    if names:
        LOG.warning("[filter_scheduler] enabled_filters names filters that have no effect on KubeVirt: %s",
                    ", ".join(names))
    return names


def run(conf: Any, kubeconfig: str | None = None, render_dir: str | None = None, once: bool = False,
        stop: threading.Event | None = None, placement_url: str | None = None,
        flavor_check: FlavorCheck | None = None) -> int:
    """Run the controller. With a cluster, servers' resources are claimed in the Placement of
    ``[placement]`` (or the embedded one at ``placement_url``) and the nodes are its providers."""
    metrics = Metrics()
    warn_filters_without_effect(conf)
    engine = get_engine(conf)
    stop = stop or threading.Event()
    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                signal.signal(sig, signals.setter(stop))
            except ValueError:  # not the main thread (tests)
                pass
    if once:
        migration.sync(engine)
    elif not _when_database_answers(lambda: migration.sync(engine), stop):
        return 0
    notifier = _server_notifier(conf, engine)
    backend, cluster = build_backend(conf, kubeconfig, render_dir, metrics)
    elector = None
    if cluster is not None:
        c = conf.controller
        elector = LeaderElector(cluster, c.lease_name, c.lease_namespace, c.identity or default_identity(),
                                c.lease_duration, c.lease_renew_interval,
                                on_change=lambda leader: metrics.leader.set(1 if leader else 0))
    servers = None
    publish_providers = None

    def is_leader() -> bool:
        return elector.is_leader if elector is not None else True

    if cluster is not None:  # servers need a cluster: rendering YAML files has no status to read back
        placement = placement_from(conf, placement_url)
        claims = Claims.from_conf(placement, conf)
        servers = server_loop_from(conf, engine, cluster, once=once, claims=claims)  # one pass: lists, no watches
        if once:
            nodes.sync(engine, cluster)
        elif not _when_database_answers(lambda: nodes.sync(engine, cluster), stop):
            return 0

        def publish_providers(audit_too: bool = True):
            # the audit repairs allocations: the leader's business only, never before the Lease is held
            # (the node publisher calls this only while leading; it checks again right before)
            down, member_of = compute_services.placement_view(engine)
            if providers.sync_from_conf(placement, cluster, conf, down, member_of) is not None and audit_too and is_leader():
                try:
                    audit.audit(engine, placement)
                except Exception as exc:  # noqa: BLE001 - a failed pass must not stop the controller
                    LOG.warning("allocations not audited: %s", exc)

        if once:
            compute_services.heartbeat(engine, cluster)
            evacuations.source_back(engine, claims, cluster)
        elif not _when_database_answers(lambda: compute_services.heartbeat(engine, cluster), stop):
            return 0
        publish_providers(audit_too=False)  # the nodes' providers before the first claim; no audit yet
    controller = Controller(engine, backend, mapping_options(conf), Settings.from_conf(conf), metrics,
                            is_leader=is_leader, servers=servers,
                            flavor_check=flavor_check)
    try:
        if once:
            if elector is not None and not _acquire_within(elector, elector.duration + elector.renew_interval):
                LOG.warning("another replica holds lease %s/%s: nothing done", elector.namespace, elector.name)
                return 1
            if publish_providers is not None:
                publish_providers()  # the Lease is held now: the audit too
            report = controller.run_once()
            for flavor_id, problem in sorted(report.problems.items()):
                LOG.warning("flavor %s: %s", flavor_id, problem)
            LOG.info("once: %s written, %d outbox rows done, %d flavors with problems%s", report.writes or "nothing",
                     report.rows_done, len(report.problems),
                     f", stopped by: {report.transient}" if report.transient else "")
            return 0 if report.transient is None and not report.problems else 1
        if conf.controller.metrics_port:
            metrics.serve(conf.controller.metrics_host, conf.controller.metrics_port)
        if elector is not None:
            elector.start()
        if cluster is not None:
            _node_publisher(engine, cluster, stop, float(conf.controller.resync_interval), is_leader,
                            _with_usage_audit(conf, engine, notifier, publish_providers))
            _heartbeat(engine, cluster, stop, float(conf.report_interval), is_leader, publish_providers,
                       lambda: evacuations.source_back(engine, claims, cluster))
        LOG.info("controller running: %s", f"cluster {kubeconfig or conf.controller.kubeconfig}" if cluster
                 else f"rendering into {render_dir or conf.controller.render_dir}")
        controller.run(stop)
        return 0
    finally:
        if notifier is not None:
            server_events.install(None)
            notifier.close()
        if servers is not None:
            servers.close()
        if elector is not None and not once:
            elector.stop(release=True)
        elif elector is not None:
            elector.release()
        backend.close()
