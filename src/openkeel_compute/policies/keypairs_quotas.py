"""Nova's rules for key pairs, quota sets, quota classes, limits and availability zones."""

from oslo_policy import policy

from openkeel_compute.policies import base

KEYPAIRS = "os_compute_api:os-keypairs:%s"
QUOTA_SETS = "os_compute_api:os-quota-sets:%s"
QUOTA_CLASS_SETS = "os_compute_api:os-quota-class-sets:%s"
LIMITS = "os_compute_api:limits"
LIMITS_OTHER_PROJECT = "os_compute_api:limits:other_project"
AVAILABILITY_ZONE = "os_compute_api:os-availability-zone:%s"

_OWNER = "(" + base.ADMIN + ") or user_id:%(user_id)s"


def _rule(name, check_str, description, method, path, **kwargs):
    return policy.DocumentedRuleDefault(name=name, check_str=check_str, description=description,
                                        operations=[{"method": method, "path": path}], scope_types=["project"],
                                        **kwargs)


_USED_LIMITS_DEPRECATED = policy.DeprecatedRule(
    "os_compute_api:os-used-limits",
    base.RULE_ADMIN_API,
    deprecated_reason="Nova API policies introduced new default roles with scope_type capabilities; "
    "the old defaults are ignored when [oslo_policy] enforce_new_defaults is true.",
    deprecated_since="21.0.0",
)

rules = [
    _rule(KEYPAIRS % "index", _OWNER, "List all keypairs", "GET", "/os-keypairs"),
    _rule(KEYPAIRS % "create", _OWNER, "Create a keypair", "POST", "/os-keypairs"),
    _rule(KEYPAIRS % "delete", _OWNER, "Delete a keypair", "DELETE", "/os-keypairs/{keypair_name}"),
    _rule(KEYPAIRS % "show", _OWNER, "Show details of a keypair", "GET", "/os-keypairs/{keypair_name}"),
    _rule(QUOTA_SETS % "update", base.ADMIN, "Update the quotas", "PUT", "/os-quota-sets/{tenant_id}"),
    _rule(QUOTA_SETS % "defaults", base.RULE_ANY, "List default quotas", "GET", "/os-quota-sets/{tenant_id}/defaults"),
    _rule(QUOTA_SETS % "show", base.PROJECT_READER_OR_ADMIN, "Show a quota", "GET", "/os-quota-sets/{tenant_id}"),
    _rule(QUOTA_SETS % "delete", base.ADMIN, "Revert quotas to defaults", "DELETE", "/os-quota-sets/{tenant_id}"),
    _rule(QUOTA_SETS % "detail", base.PROJECT_READER_OR_ADMIN, "Show the detail of quota", "GET",
          "/os-quota-sets/{tenant_id}/detail"),
    _rule(QUOTA_CLASS_SETS % "show", base.ADMIN, "List quotas for specific quota classes", "GET",
          "/os-quota-class-sets/{quota_class}"),
    _rule(QUOTA_CLASS_SETS % "update", base.ADMIN, "Update quotas for specific quota class", "PUT",
          "/os-quota-class-sets/{quota_class}"),
    _rule(LIMITS, base.RULE_ANY, "Show rate and absolute limits for the current user project", "GET", "/limits"),
    _rule(LIMITS_OTHER_PROJECT, base.ADMIN,
          "Show rate and absolute limits of other project.\n\nThis policy only checks if the user has access to "
          "the requested\nproject limits. And this check is performed only after the check\n"
          "os_compute_api:limits passes", "GET", "/limits", deprecated_rule=_USED_LIMITS_DEPRECATED),
    _rule(AVAILABILITY_ZONE % "list", base.RULE_ANY,
          "List availability zone information without host information", "GET", "/os-availability-zone"),
    _rule(AVAILABILITY_ZONE % "detail", base.ADMIN,
          "List detailed availability zone information with host information", "GET", "/os-availability-zone/detail"),
]


def list_rules():
    return rules
