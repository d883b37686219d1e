"""[controller] options: where the controller writes, how often it resyncs, how it elects a leader."""

from __future__ import annotations

import os
import socket

from oslo_config import cfg

GROUP = cfg.OptGroup("controller", title="Controller",
                     help="The process that keeps KubeVirt instancetypes and preferences in step with the catalogue.")

OPTS = [
    cfg.StrOpt("driver", default="emulated", choices=[
                   ("emulated", "a built-in KubeVirt v1.9 cluster started inside the controller (no cluster needed)"),
                   ("kubernetes", "the cluster of the kubeconfig")],
               help="What the controller drives. A kubeconfig (this group's kubeconfig or --kubeconfig) always "
                    "selects a real cluster; --render DIR writes YAML files instead of using either."),
    cfg.StrOpt("kubeconfig",
               help="Kubeconfig of the cluster to write to. Setting it selects that cluster whatever driver "
                    "says."),
    cfg.HostAddressOpt("emulator_host", default="127.0.0.1",
                       help="Address the built-in cluster's Kubernetes API listens on (driver = emulated)."),
    cfg.PortOpt("emulator_port", default=0,
                help="Port of the built-in cluster's Kubernetes API; 0 picks a free port. Its kubeconfig is "
                     "written to emulator_kubeconfig so kubectl can look at it."),
    cfg.StrOpt("emulator_kubeconfig", default="$state_path/emulator.kubeconfig",
               help="Where the built-in cluster writes the kubeconfig that reaches it."),
    cfg.FloatOpt("emulator_delay_scale", default=1.0, min=0.0,
                 help="Multiplies the built-in cluster's phase durations (image import about 12 s, VM start "
                      "about 5 s at 1.0); 0 makes every step immediate."),
    cfg.StrOpt("render_dir", default="$state_path/rendered",
               help="Directory that receives one YAML file per object when there is no cluster "
                    "(ready for `kubectl apply -f`)."),
    cfg.IntOpt("resync_interval", default=300, min=1,
               help="Seconds between two full resyncs (desired state from the whole catalogue compared "
                    "with everything observed); this is what repairs drift."),
    cfg.FloatOpt("poll_interval", default=1.0, min=0.05,
                 help="Seconds between two looks at the outbox when it was empty."),
    cfg.IntOpt("batch_size", default=100, min=1, help="Outbox rows read per batch."),
    cfg.IntOpt("full_resync_threshold", default=500, min=1,
               help="With more pending outbox rows than this, one full resync replaces row-by-row "
                    "processing (and marks every row it covered done)."),
    cfg.IntOpt("workers", default=8, min=1,
               help="Concurrent Kubernetes writes during a full resync (row-by-row processing is sequential)."),
    cfg.BoolOpt("create_namespaces", default=True,
                help="Create the namespace of a project when one of its private flavors (or, later, its servers) "
                     "needs it and it does not exist yet, labelled app.kubernetes.io/managed-by=openkeel. "
                     "Namespaces are never deleted, not even emptied ones, and an existing namespace is used as "
                     "it is. When False the copies for a project without a namespace are reported as waiting "
                     "for it and retried until someone creates it."),
    cfg.IntOpt("max_retries", default=5, min=0,
               help="Retries of one Kubernetes request on 429, 5xx and refused connections."),
    cfg.FloatOpt("retry_base_delay", default=0.2, min=0.0,
                 help="First retry delay in seconds; doubles on every retry (with jitter), capped at 10 s."),
    cfg.FloatOpt("request_timeout", default=10.0, min=0.1, help="Timeout of one Kubernetes request, seconds."),
    cfg.StrOpt("lease_name", default="openkeel-compute-controller",
               help="Name of the coordination.k8s.io Lease used for leader election."),
    cfg.StrOpt("lease_namespace", default="default", help="Namespace of that Lease."),
    cfg.IntOpt("lease_duration", default=15, min=1,
               help="Seconds a leader's claim is valid without renewal; a standby takes over after that."),
    cfg.FloatOpt("lease_renew_interval", default=5.0, min=0.05,
                 help="Seconds between two renewals (and between two attempts of a standby)."),
    cfg.StrOpt("identity", sample_default="<hostname>_<pid>",
               help="Holder identity written into the Lease; defaults to hostname and process id."),
    cfg.PortOpt("metrics_port", default=9465,
                help="Port of the Prometheus metrics endpoint; 0 disables it."),
    cfg.HostAddressOpt("metrics_host", default="127.0.0.1", help="Address the metrics endpoint listens on."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"
