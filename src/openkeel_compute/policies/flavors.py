"""The 11 flavor rules: flavor-manage, flavor-access and flavor-extra-specs, as Nova names them."""

from oslo_policy import policy

from openkeel_compute.policies import base

MANAGE = "os_compute_api:os-flavor-manage:%s"
ACCESS = "os_compute_api:os-flavor-access"
ACCESS_ADD = "os_compute_api:os-flavor-access:add_tenant_access"
ACCESS_REMOVE = "os_compute_api:os-flavor-access:remove_tenant_access"
EXTRA_SPECS = "os_compute_api:os-flavor-extra-specs:%s"

_ACCESS_DEPRECATED = policy.DeprecatedRule(
    name=ACCESS,
    check_str=base.RULE_ADMIN_OR_OWNER,
    deprecated_reason=(
        "Listing a flavor's access list is an administrator's operation; the old default also let "
        "the owner of the project read it."
    ),
    deprecated_since="21.0.0",
)

rules = [
    policy.DocumentedRuleDefault(
        name=ACCESS_ADD,
        check_str=base.ADMIN,
        description="Add flavor access to a tenant",
        operations=[{"method": "POST", "path": "/flavors/{flavor_id}/action (addTenantAccess)"}],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=ACCESS_REMOVE,
        check_str=base.ADMIN,
        description="Remove flavor access from a tenant",
        operations=[{"method": "POST", "path": "/flavors/{flavor_id}/action (removeTenantAccess)"}],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=ACCESS,
        check_str=base.ADMIN,
        description="List flavor access information\n\nAllows access to the full list of tenants that "
        "have access\nto a flavor via an os-flavor-access API.\n",
        operations=[{"method": "GET", "path": "/flavors/{flavor_id}/os-flavor-access"}],
        scope_types=["project"],
        deprecated_rule=_ACCESS_DEPRECATED,
    ),
    policy.DocumentedRuleDefault(
        name=EXTRA_SPECS % "show",
        check_str=base.PROJECT_READER_OR_ADMIN,
        description="Show an extra spec for a flavor",
        operations=[{"path": "/flavors/{flavor_id}/os-extra_specs/{flavor_extra_spec_key}", "method": "GET"}],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=EXTRA_SPECS % "create",
        check_str=base.ADMIN,
        description="Create extra specs for a flavor",
        operations=[{"path": "/flavors/{flavor_id}/os-extra_specs/", "method": "POST"}],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=EXTRA_SPECS % "update",
        check_str=base.ADMIN,
        description="Update an extra spec for a flavor",
        operations=[{"path": "/flavors/{flavor_id}/os-extra_specs/{flavor_extra_spec_key}", "method": "PUT"}],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=EXTRA_SPECS % "delete",
        check_str=base.ADMIN,
        description="Delete an extra spec for a flavor",
        operations=[
            {"path": "/flavors/{flavor_id}/os-extra_specs/{flavor_extra_spec_key}", "method": "DELETE"}
        ],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=EXTRA_SPECS % "index",
        check_str=base.PROJECT_READER_OR_ADMIN,
        description="List extra specs for a flavor. Starting with microversion 2.61, extra specs may be "
        "returned in responses for the flavor resource.",
        operations=[
            {"path": "/flavors/{flavor_id}/os-extra_specs/", "method": "GET"},
            {"path": "/flavors", "method": "POST"},
            {"path": "/flavors/detail", "method": "GET"},
            {"path": "/flavors/{flavor_id}", "method": "GET"},
            {"path": "/flavors/{flavor_id}", "method": "PUT"},
        ],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=MANAGE % "create",
        check_str=base.ADMIN,
        description="Create a flavor",
        operations=[{"method": "POST", "path": "/flavors"}],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=MANAGE % "update",
        check_str=base.ADMIN,
        description="Update a flavor",
        operations=[{"method": "PUT", "path": "/flavors/{flavor_id}"}],
        scope_types=["project"],
    ),
    policy.DocumentedRuleDefault(
        name=MANAGE % "delete",
        check_str=base.ADMIN,
        description="Delete a flavor",
        operations=[{"method": "DELETE", "path": "/flavors/{flavor_id}"}],
        scope_types=["project"],
    ),
]


def list_rules():
    return rules
