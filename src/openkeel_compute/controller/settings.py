"""The controller's settings, each loop's in one immutable dataclass built from configuration here only.

``Settings``: the flavor engine's ([controller] batch_size, resync_interval, ...); ``ServerSettings``:
the server loop's (Nova's [DEFAULT] options of the compute side, [controller]'s server options, and how a
server becomes KubeVirt objects). Tests build them with the values they need; nothing sets a loop's
setting from outside after it was built.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from openkeel_compute.compute.host_filters import FilterOptions
from openkeel_compute.kubevirt.server import DEFAULT_SERVER_OPTIONS, ServerOptions

#: seconds a server may stay in BUILD before it goes to ERROR (Nova's instance_build_timeout; Nova's
#: default 0 would let a build that never starts, or whose objects the cluster keeps refusing, wait forever)
BUILD_TIMEOUT = 3600.0


@dataclasses.dataclass(frozen=True)
class Settings:
    """The flavor engine's."""

    create_namespaces: bool = True
    batch_size: int = 100
    full_resync_threshold: int = 500
    workers: int = 8
    resync_interval: float = 300.0
    poll_interval: float = 1.0
    max_backoff: float = 300.0

    @classmethod
    def from_conf(cls, conf: Any) -> Settings:
        c = conf.controller
        return cls(create_namespaces=c.create_namespaces, batch_size=c.batch_size,
                   full_resync_threshold=c.full_resync_threshold, workers=c.workers,
                   resync_interval=float(c.resync_interval), poll_interval=c.poll_interval)


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """The server loop's."""

    #: how a server becomes objects ([DEFAULT] force_config_drive, shutdown_timeout, [kubevirt], ...)
    options: ServerOptions = DEFAULT_SERVER_OPTIONS
    #: [DEFAULT] instance_build_timeout (0: no limit)
    build_timeout: float = BUILD_TIMEOUT
    #: [controller] unschedulable_grace: seconds a launcher pod may stay unschedulable
    unschedulable_grace: float = 0.0
    #: [controller] network_name: what a server's addresses are listed under
    network_name: str = "pod-network"
    #: [controller] batch_size: outbox rows per pass, and servers written per transaction
    batch_size: int = 100
    #: [DEFAULT] reclaim_instance_interval (0: deleted servers are not kept)
    reclaim_interval: float = 0.0
    #: [DEFAULT] shelved_offload_time (0: offloaded at once, -1: never, >0: by the periodic task after so long)
    shelved_offload_time: float = 0.0
    #: [DEFAULT] resize_confirm_window (0: resizes wait for the user)
    resize_confirm_window: float = 0.0
    #: [DEFAULT] allow_resize_to_same_host (False: a resize claims on another node)
    allow_resize_to_same_host: bool = False
    #: [filter_scheduler] enabled_filters (Nova's default: the scheduler hints' filters off)
    enabled_filters: tuple[str, ...] = ("ComputeFilter", "ComputeCapabilitiesFilter", "ImagePropertiesFilter",
                                        "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter")
    #: [filter_scheduler]'s options the filters read (their enabled_filters the same as above)
    filter_options: FilterOptions | None = None
    #: [controller] orphan_interval: seconds between two sweeps for objects whose server is gone
    orphan_interval: float = 300.0
    #: [controller] server_watch, off for a single pass (--once)
    watch: bool = False
    #: [controller] keep_pod_address: the network plugin whose pod annotation keeps a server's address
    keep_pod_address: str = ""
    #: seconds before a failed row is tried again, doubled at each failed attempt up to retry_max_delay
    retry_delay: float = 0.5
    retry_max_delay: float = 30.0
    #: [controller] network_attachment_config: the CNI configuration template of a Neutron network's
    #: NetworkAttachmentDefinition ("": OVN-Kubernetes secondary networks)
    network_attachment_config: str = ""
    #: [DEFAULT] vif_plugging_timeout: seconds a build waits for network-vif-plugged of its ports (0: no wait)
    vif_plugging_timeout: float = 300.0
    #: [DEFAULT] vif_plugging_is_fatal: a port never plugged within the timeout fails the build
    vif_plugging_is_fatal: bool = True
    #: failed attempts after which an operation that can end in Nova's fault (a build, a reboot, a
    #: rebuild, a power action) gives up: bounded in time (about two minutes with the delays above)
    step_attempts: int = 10

    @property
    def filters(self) -> FilterOptions:
        """The filters' options, enabled_filters' names always those above."""
        options = self.filter_options or FilterOptions()
        return dataclasses.replace(options, enabled=self.enabled_filters)

    @classmethod
    def from_conf(cls, conf: Any, *, once: bool = False) -> ServerSettings:
        from openkeel_compute.conf.kubevirt import mapping_options
        from openkeel_compute.conf.neutron import register_opts as register_vif_opts

        register_vif_opts(conf)

        c = conf.controller
        options = ServerOptions(force_config_drive=conf.force_config_drive, storage_class=c.storage_class or None,
                                shutdown_timeout=conf.shutdown_timeout, mapping=mapping_options(conf),
                                default_availability_zone=conf.default_availability_zone)
        return cls(options=options, build_timeout=float(conf.instance_build_timeout),
                   unschedulable_grace=float(c.unschedulable_grace), network_name=c.network_name,
                   batch_size=c.batch_size, reclaim_interval=float(conf.reclaim_instance_interval),
                   shelved_offload_time=float(conf.shelved_offload_time),
                   resize_confirm_window=float(conf.resize_confirm_window),
                   allow_resize_to_same_host=conf.allow_resize_to_same_host,
                   enabled_filters=tuple(conf.filter_scheduler.enabled_filters),
                   filter_options=FilterOptions.from_conf(conf),
                   orphan_interval=float(c.orphan_interval), watch=c.server_watch and not once,
                   keep_pod_address=c.keep_pod_address or "",
                   network_attachment_config=c.network_attachment_config or "",
                   vif_plugging_timeout=float(conf.vif_plugging_timeout),
                   vif_plugging_is_fatal=conf.vif_plugging_is_fatal)
