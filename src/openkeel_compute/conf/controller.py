"""[controller] options: where the controller writes, how often it resyncs, how it elects a leader."""

from __future__ import annotations

import os
import socket
from typing import Any

from oslo_config import cfg

from openkeel_compute.conf import groups

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
    cfg.StrOpt("emulator_state_dir", default="$state_path/emulator",
               help="Directory where the built-in cluster keeps its objects (VMs, VMIs, DataVolumes, pods, "
                    "nodes, … with their status and resource versions), so that a restarted controller finds "
                    "the cluster as it left it, as a real cluster outlives the controller. Empty: the cluster "
                    "lives in memory and a restart finds it empty."),
    cfg.FloatOpt("emulator_delay_scale", default=1.0, min=0.0,
                 help="Multiplies the built-in cluster's phase durations (image import about 12 s, VM start "
                      "about 5 s at 1.0); 0 makes every step immediate."),
    cfg.IntOpt("emulator_nodes", default=1, min=1, max=5000,
               help="Ready worker nodes the built-in cluster has (emulated-node-1 … emulated-node-N), each "
                    "16 CPUs, 64 GiB of memory and 500 GiB of disk; each becomes a resource provider in "
                    "Placement, so this is how many servers the built-in cluster can hold."),
    cfg.BoolOpt("emulator_read_images", default=True,
                help="Whether the built-in cluster's image imports read each server's image from the image "
                     "service, as CDI's importer does on a real cluster: a server whose image cannot be "
                     "downloaded (deleted, a bad URL, the image service down) then fails to build, as with "
                     "Nova. False: every import succeeds without reading its image (an image service the "
                     "built-in cluster cannot reach); a server then boots even from an image that is gone."),
    cfg.PortOpt("emulator_guest_ssh_port", default=22,
                help="The port on which the built-in cluster's running guests answer SSH (as Ubuntu's "
                     "OpenSSH: the user ubuntu with the server's key pair, commands run over the files of its "
                     "boot disk), on those of their addresses this machine has: a loopback network "
                     "(a Neutron subnet in 127.0.0.0/8 without DHCP) or an address added to an interface. "
                     "0: no guest answers. Port 22 needs the privilege to bind it (root or "
                     "CAP_NET_BIND_SERVICE); without it the guests stay unreachable."),
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
    cfg.StrOpt("network_name", default="pod-network",
               help="The network name a server's addresses are listed under (GET /servers/{id} addresses). "
                    "Servers are on the cluster's pod network; this is the name users see for it."),
    cfg.StrOpt("keep_pod_address", default="", choices=[
                   ("", "no: each new launcher pod gets the address the network plugin gives it"),
                   ("calico", "Calico: the pod annotation cni.projectcalico.org/ipAddrs"),
                   ("kube-ovn", "Kube-OVN: the pod annotation ovn.kubernetes.io/ip_address")],
               help="Keep a server's pod-network address across the new virtual machine instances a stop and "
                    "start, a reboot, a resize or a rebuild make, through the annotation by which the cluster's "
                    "network plugin gives a pod a chosen address: once a server has an address, its "
                    "VirtualMachine's template asks for it again. Only when that plugin is the cluster's and "
                    "its address pool allows it; another pod that took the address meanwhile keeps the new "
                    "instance from starting."),
    cfg.StrOpt("network_attachment_config", default="",
               help="With [neutron]: the CNI configuration of the NetworkAttachmentDefinition the controller "
                    "makes for each Neutron network in a server's namespace, as a JSON template whose "
                    "placeholders ($name, $namespace, $network_id, $network_name, $network_type, "
                    "$physical_network, $segmentation_id, $mtu, $topology) take the network's values. "
                    "Empty: OVN-Kubernetes secondary networks (type ovn-k8s-cni-overlay, topology localnet "
                    "for flat and VLAN provider networks, layer2 otherwise, Neutron's MTU). See "
                    "docs/networking.md for Kube-OVN and other plugins."),
    cfg.StrOpt("storage_class",
               help="Storage class of the servers' disks (their DataVolumes); unset uses the cluster's default "
                    "storage class."),
    cfg.IntOpt("unschedulable_grace", default=30, min=0,
               help="Seconds a server's pod may stay unschedulable before its build fails with 'No valid host "
                    "was found'. A little patience lets a volume bind or a cluster autoscaler add a node; 0 "
                    "fails at once."),
    cfg.BoolOpt("server_watch", default=True,
                help="Keep the servers' VirtualMachines, instances and DataVolumes current through watches, so "
                     "that a pass reads nothing from the cluster; when False each pass lists them."),
    cfg.IntOpt("orphan_interval", default=300, min=1,
               help="Seconds between two sweeps for servers' objects whose server no longer exists (only "
                    "objects labelled app.kubernetes.io/managed-by=openkeel); they are deleted."),
]

# Nova's names, in [DEFAULT], for the compute side of a server.
DEFAULT_OPTS = [
    cfg.IntOpt("instance_build_timeout", default=3600, min=0,
               help="Seconds a server may stay in BUILD before it goes to ERROR ('Instance build timed out. Set "
                    "to error state.'). 0 disables the check. Nova's default is 0; here it is an hour, so that "
                    "a build the cluster never starts (objects refused, an import that hangs) does not stay in "
                    "BUILD for ever."),
    cfg.BoolOpt("force_config_drive", default=False,
                help="Give every server a config drive (cloud-init ConfigDrive) instead of NoCloud, whatever "
                     "the request says."),
    cfg.IntOpt("shutdown_timeout", default=60, min=0,
               help="Seconds a server's guest has to shut down cleanly when it is stopped before it is powered "
                    "off (the VM's termination grace period). An image's os_shutdown_timeout property "
                    "overrides it."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # [service_user] (conf/service_user.py) is registered by the controller's image access
    # (controller/images.py ImageAccess.from_conf) when it starts: API workers never read it.
    conf.register_opts(DEFAULT_OPTS)
    conf.register_group(groups.own(GROUP))
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[Any, list[cfg.Opt]]]:
    from openkeel_compute.conf import service_user

    return [("DEFAULT", DEFAULT_OPTS), (GROUP, OPTS), *service_user.list_opts()]


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"
