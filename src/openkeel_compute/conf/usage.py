"""[DEFAULT] instance_usage_audit_period: the audit periods os-instance_usage_audit_log reports on
(Nova's option; the controller's periodic audit records its runs per period in the task log)."""

from oslo_config import cfg

AUDIT_OPTS = [
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
