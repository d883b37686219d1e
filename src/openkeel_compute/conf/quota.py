"""[quota] (Nova's names and defaults) and the availability-zone options of [DEFAULT]."""

from oslo_config import cfg

from openkeel_compute.conf import groups

quota_group = cfg.OptGroup("quota", title="Quota options",
                           help="Limits on what a project (or a user in it) may hold.")


def _limit(name: str, default: int, what: str) -> cfg.IntOpt:
    return cfg.IntOpt(name, min=-1, default=default, deprecated_name=f"quota_{name}",
                      help=f"The number of {what} allowed per project, unless a project, user or the "
                      f"'default' quota class sets its own. -1 is unlimited.")


QUOTA_OPTS = [
    _limit("instances", 10, "instances"),
    _limit("cores", 20, "instance cores (VCPUs)"),
    _limit("ram", 50 * 1024, "megabytes of instance RAM"),
    _limit("metadata_items", 128, "metadata items per instance"),
    _limit("injected_files", 5, "injected files"),
    _limit("injected_file_content_bytes", 10 * 1024, "bytes of content per injected file"),
    cfg.IntOpt("injected_file_path_length", min=-1, default=255,
               deprecated_name="quota_injected_file_path_length",
               help="The maximum length of an injected file's path. -1 is unlimited."),
    _limit("key_pairs", 100, "key pairs per user"),
    _limit("server_groups", 10, "server groups"),
    _limit("server_group_members", 10, "servers per server group"),
    cfg.StrOpt("driver", default="nova.quota.DbQuotaDriver",
               choices=[("nova.quota.DbQuotaDriver", "Limits stored in the database (per project, user, class)."),
                        ("nova.quota.NoopQuotaDriver", "No limits: every quota is -1 (unlimited).")],
               help="How quotas are stored and enforced."),
    cfg.BoolOpt("recheck_quota", default=True,
                help="Count again after the resources were created and undo the request if a concurrent "
                "one went over the limit in between."),
    cfg.BoolOpt("count_usage_from_placement", default=False,
                help="Count cores (VCPU + PCPU) and ram (MEMORY_MB) of a project, or of a user in it, from "
                "Placement's usages instead of its instances' flavors, as Nova does. Without [placement] the "
                "database stands in: the flavors of the servers that hold resources."),
]

AZ_OPTS = [
    cfg.StrOpt("default_availability_zone", default="nova",
               help="The availability zone of nodes without a topology.kubernetes.io/zone label."),
    cfg.StrOpt("default_schedule_zone",
               help="The availability zone a server is booted in when the request names none "
               "(no zone: any node)."),
    cfg.StrOpt("internal_service_availability_zone", default="internal",
               help="The zone the API lists its internal services in (not used for servers)."),
]


SERVICE_OPTS = [
    cfg.IntOpt("report_interval", default=10, min=1,
               help="Seconds between two heartbeats of the nodes' compute services: the controller looks at "
               "the nodes and records, for each Ready one, that it was seen up (os-services' updated_at)."),
    cfg.IntOpt("service_down_time", default=60, min=1,
               help="A compute service whose last heartbeat is older than this many seconds is down (its node "
               "not Ready, or the controller not running); keep it above report_interval."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(groups.own(quota_group))
    conf.register_opts(QUOTA_OPTS, group=quota_group)
    conf.register_opts(AZ_OPTS)
    conf.register_opts(SERVICE_OPTS)


def list_opts():
    return [(quota_group, QUOTA_OPTS), ("DEFAULT", AZ_OPTS + SERVICE_OPTS)]
