"""[DEFAULT] instance_usage_audit and instance_usage_audit_period: whether the controller runs Nova's periodic
instance usage audit, and the audit periods it and os-instance_usage_audit_log use (Nova's options; the audit
records its runs per period and node in the task log)."""

from oslo_config import cfg

AUDIT_OPTS = [
    cfg.BoolOpt(
        "instance_usage_audit",
        default=False,
        help="As Nova's option: the controller audits the servers' usage once per period "
        "(instance_usage_audit_period) and node, sending compute.instance.exists / instance.exists for every "
        "server that was on the node during the last completed period and recording the run in the task "
        "log that os-instance_usage_audit_log reports.",
    ),
    cfg.StrOpt(
        "instance_usage_audit_period",
        default="month",
        regex="^(hour|month|day|year)(@([0-9]+))?$",
        help="Period of the instance usage audit: hour, day, month or year, optionally with an offset after @ "
        "(month@15: monthly periods starting on the 15th; day@18: daily periods starting at 18:00 UTC; year@3: "
        "yearly periods starting on March 1st; hour@30: hourly periods starting at half past). "
        "os-instance_usage_audit_log reports on the last period completed. As Nova's option of the same name.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(AUDIT_OPTS)


def list_opts():
    return [("DEFAULT", AUDIT_OPTS)]
