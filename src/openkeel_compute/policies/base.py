"""Nova's base rules: the names, check strings and scope types deployments override in policy.yaml."""

from oslo_policy import policy

from openkeel_compute.policies import extension_checks

# before the first rule below is parsed (every policy module imports this one first)
extension_checks.defer()

RULE_ADMIN_OR_OWNER = "rule:admin_or_owner"
RULE_ADMIN_API = "rule:admin_api"
ADMIN = "rule:context_is_admin"
PROJECT_MANAGER_OR_ADMIN = "rule:project_manager_or_admin"
PROJECT_MEMBER_OR_ADMIN = "rule:project_member_or_admin"
PROJECT_READER_OR_ADMIN = "rule:project_reader_or_admin"
SERVICE_ROLE = "rule:service_or_admin"
RULE_ANY = "@"
RULE_NOBODY = "!"

_DEPRECATED_REASON = (
    "Nova API policies introduced new default roles with scope_type capabilities; "
    "the old defaults are ignored when [oslo_policy] enforce_new_defaults is true."
)

DEPRECATED_ADMIN_POLICY = policy.DeprecatedRule(
    name=RULE_ADMIN_API,
    check_str="is_admin:True",
    deprecated_reason=_DEPRECATED_REASON,
    deprecated_since="21.0.0",
)
DEPRECATED_ADMIN_OR_OWNER_POLICY = policy.DeprecatedRule(
    name=RULE_ADMIN_OR_OWNER,
    check_str="is_admin:True or project_id:%(project_id)s",
    deprecated_reason=_DEPRECATED_REASON,
    deprecated_since="21.0.0",
)

rules = [
    policy.RuleDefault(
        "context_is_admin",
        "role:admin",
        "Decides what is required for the 'is_admin:True' check to succeed.",
        deprecated_rule=DEPRECATED_ADMIN_POLICY,
    ),
    policy.RuleDefault(
        "admin_or_owner",
        "is_admin:True or project_id:%(project_id)s",
        "Default rule for most non-Admin APIs.",
        deprecated_for_removal=True,
        deprecated_reason=_DEPRECATED_REASON,
        deprecated_since="21.0.0",
    ),
    policy.RuleDefault(
        "admin_api",
        "is_admin:True",
        "Default rule for most Admin APIs.",
        deprecated_for_removal=True,
        deprecated_reason=_DEPRECATED_REASON,
        deprecated_since="21.0.0",
    ),
    policy.RuleDefault(
        "project_manager_api",
        "role:manager and project_id:%(project_id)s",
        "Default rule for Project level management APIs.",
        deprecated_rule=DEPRECATED_ADMIN_POLICY,
    ),
    policy.RuleDefault(
        "project_member_api",
        "role:member and project_id:%(project_id)s",
        "Default rule for Project level non admin APIs.",
        deprecated_rule=DEPRECATED_ADMIN_OR_OWNER_POLICY,
    ),
    policy.RuleDefault(
        "project_reader_api",
        "role:reader and project_id:%(project_id)s",
        "Default rule for Project level read only APIs.",
        deprecated_rule=DEPRECATED_ADMIN_OR_OWNER_POLICY,
    ),
    policy.RuleDefault(
        "service_api",
        "role:service",
        "Default rule for service-to-service APIs.",
        deprecated_rule=DEPRECATED_ADMIN_POLICY,
    ),
    policy.RuleDefault(
        "project_manager_or_admin",
        "rule:project_manager_api or rule:context_is_admin",
        "Default rule for Project Manager or admin APIs.",
        deprecated_rule=DEPRECATED_ADMIN_POLICY,
    ),
    policy.RuleDefault(
        "project_member_or_admin",
        "rule:project_member_api or rule:context_is_admin",
        "Default rule for Project Member or admin APIs.",
        deprecated_rule=DEPRECATED_ADMIN_OR_OWNER_POLICY,
    ),
    policy.RuleDefault(
        "project_reader_or_admin",
        "rule:project_reader_api or rule:context_is_admin",
        "Default rule for Project reader or admin APIs.",
        deprecated_rule=DEPRECATED_ADMIN_OR_OWNER_POLICY,
    ),
    policy.RuleDefault(
        "service_or_admin",
        "rule:service_api or rule:context_is_admin",
        "Default rule for service or admin APIs.",
        deprecated_rule=DEPRECATED_ADMIN_POLICY,
    ),
]


def list_rules():
    return rules
