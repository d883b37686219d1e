"""What nodes offer Placement and how claims are tried: Nova's allocation ratio and reserved-resource
options of [DEFAULT], [scheduler] max_attempts, [filter_scheduler] (which of Nova's scheduler filters are
enabled) and [placement_service] (the embedded Placement)."""

from oslo_config import cfg

from openkeel_compute.conf import groups

RATIO_OPTS = [
    cfg.FloatOpt("cpu_allocation_ratio", min=0.0,
                 help="Virtual CPUs per physical CPU a node offers (VCPU allocation ratio). Unset: a new node's "
                 "provider starts with initial_cpu_allocation_ratio, and a ratio changed in Placement is kept."),
    cfg.FloatOpt("ram_allocation_ratio", min=0.0,
                 help="Virtual RAM per physical RAM a node offers (MEMORY_MB allocation ratio). Unset: "
                 "initial_ram_allocation_ratio for a new node, then whatever Placement holds."),
    cfg.FloatOpt("disk_allocation_ratio", min=0.0,
                 help="Virtual disk per physical disk a node offers (DISK_GB allocation ratio). Unset: "
                 "initial_disk_allocation_ratio for a new node, then whatever Placement holds."),
    cfg.FloatOpt("initial_cpu_allocation_ratio", default=4.0, min=0.0,
                 help="VCPU allocation ratio of a node's new provider when cpu_allocation_ratio is unset."),
    cfg.FloatOpt("initial_ram_allocation_ratio", default=1.0, min=0.0,
                 help="MEMORY_MB allocation ratio of a node's new provider when ram_allocation_ratio is unset."),
    cfg.FloatOpt("initial_disk_allocation_ratio", default=1.0, min=0.0,
                 help="DISK_GB allocation ratio of a node's new provider when disk_allocation_ratio is unset."),
    cfg.IntOpt("reserved_host_cpus", default=0, min=0,
               help="CPUs of each node kept from servers, on top of what Kubernetes already keeps out of the "
               "node's allocatable (VCPU reserved)."),
    cfg.IntOpt("reserved_host_memory_mb", default=512, min=0,
               help="Megabytes of each node's memory kept from servers, on top of the node's allocatable "
               "(MEMORY_MB reserved)."),
    cfg.IntOpt("reserved_host_disk_mb", default=0, min=0,
               help="Megabytes of each node's ephemeral storage kept from servers, on top of the node's "
               "allocatable (DISK_GB reserved, rounded up to whole gigabytes)."),
]

scheduler_group = cfg.OptGroup("scheduler", title="Scheduler options")
SCHEDULER_OPTS = [
    cfg.IntOpt("max_attempts", default=3, min=1,
               help="How many nodes a server's build tries: the claimed node, then the alternates Placement "
               "offered, each after the previous one could not run the server (its pod unschedulable). "
               "Then the build fails with 'No valid host was found'."),
    cfg.IntOpt("max_placement_results", default=1000, min=1,
               help="The most allocation candidates asked of Placement for one server."),
]

#: Nova's [filter_scheduler] enabled_filters default (nova/conf/scheduler.py)
DEFAULT_FILTERS = ["ComputeFilter", "ComputeCapabilitiesFilter", "ImagePropertiesFilter",
                   "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"]

filter_group = cfg.OptGroup("filter_scheduler", title="Filter scheduler options")
FILTER_OPTS = [
    cfg.MultiStrOpt("available_filters", default=["nova.scheduler.filters.all_filters"],
                    help="Filters the scheduler may use, as Nova's option (all of Nova's by default). Kept "
                    "for configuration files written for Nova: which filters act is enabled_filters' matter."),
    cfg.ListOpt("enabled_filters", default=list(DEFAULT_FILTERS),
                help="Filters the scheduler uses, by Nova's class names. They act at a server's build and at "
                "its moves that ask the scheduler (resize, cold and live migration without a forced host, "
                "evacuation, unshelve); a request no node passes ends in 'No valid host was found.'. Acting "
                "on KubeVirt: ComputeFilter (the compute service's state), the server group filters and what "
                "Placement matches (flavor and image requirements), which always apply, and, through the VM's node "
                "requirements Kubernetes enforces, ComputeCapabilitiesFilter (capabilities: extra specs as "
                "node labels) and ImagePropertiesFilter (the image's architecture); "
                "DifferentHostFilter and SameHostFilter (the different_host and same_host scheduler hints); "
                "AggregateInstanceExtraSpecsFilter (the flavor's unscoped and "
                "aggregate_instance_extra_specs: extra specs against the metadata of the node's "
                "aggregates); AggregateMultiTenancyIsolation (filter_tenant_id aggregate metadata); "
                "IsolatedHostsFilter (isolated_images, isolated_hosts); NumInstancesFilter and "
                "AggregateNumInstancesFilter (max_instances_per_host, also as aggregate metadata); "
                "AggregateImagePropertiesIsolation (image properties against aggregate metadata); "
                "SimpleCIDRAffinityFilter (the build_near_host_ip and cidr hints against the node's "
                "address); JsonFilter (the query hint). Other "
                "names are accepted and have no effect (the controller warns of them at its start)."),
    cfg.IntOpt("max_instances_per_host", default=50, min=1,
               help="The most servers a node may hold for NumInstancesFilter and AggregateNumInstancesFilter "
               "(the latter's when none of the node's aggregates sets max_instances_per_host): a node "
               "holding as many is refused."),
    cfg.ListOpt("isolated_images", default=[],
                help="Image UUIDs that IsolatedHostsFilter keeps to the nodes of isolated_hosts."),
    cfg.ListOpt("isolated_hosts", default=[],
                help="Nodes (compute service hosts) that IsolatedHostsFilter keeps for the images of "
                "isolated_images."),
    cfg.BoolOpt("restrict_isolated_hosts_to_isolated_images", default=True,
                help="With IsolatedHostsFilter, the nodes of isolated_hosts take servers of isolated_images "
                "only (with no isolated image, none at all). False: they take any image's servers too."),
    cfg.StrOpt("aggregate_image_properties_isolation_namespace",
               deprecated_for_removal=True, deprecated_since="33.0.0",
               deprecated_reason="Filtering on arbitrary image properties is gone since Liberty: only Nova's "
               "own image properties are compared, whatever the namespace.",
               help="With AggregateImagePropertiesIsolation, only the aggregate metadata keys that begin "
               "with this namespace and the separator are compared with the image's properties (all "
               "keys when unset). Only keys that are Nova's image property names ever act."),
    cfg.StrOpt("aggregate_image_properties_isolation_separator", default=".",
               deprecated_for_removal=True, deprecated_since="33.0.0",
               deprecated_reason="Filtering on arbitrary image properties is gone since Liberty.",
               help="What separates aggregate_image_properties_isolation_namespace from the rest of an "
               "aggregate metadata key."),
]

service_group = cfg.OptGroup("placement_service", title="Embedded Placement",
                             help="A Placement the controller may rely on when [placement] names none.")
SERVICE_OPTS = [
    cfg.BoolOpt("embedded", default=False,
                help="With a real cluster and [placement] unset, the controller runs Placement's own service "
                "(openstack-placement, its SQLite database under $state_path/placement) on a loopback port "
                "instead of refusing to start. For development only: that Placement lets anyone in. With the "
                "built-in cluster ([controller] driver = emulated) this happens whenever [placement] is unset."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(RATIO_OPTS)
    conf.register_group(groups.own(scheduler_group))
    conf.register_opts(SCHEDULER_OPTS, group=scheduler_group)
    conf.register_group(groups.own(filter_group))
    conf.register_opts(FILTER_OPTS, group=filter_group)
    conf.register_group(groups.own(service_group))
    conf.register_opts(SERVICE_OPTS, group=service_group)


def list_opts():
    return [("DEFAULT", RATIO_OPTS), (scheduler_group, SCHEDULER_OPTS), (filter_group, FILTER_OPTS),
            (service_group, SERVICE_OPTS)]
