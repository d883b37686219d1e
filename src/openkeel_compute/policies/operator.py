"""The rules of the operator's view (os-services, os-hypervisors, os-hosts, os-aggregates,
os-server-groups), under Nova 34.0.0's names and defaults (with the older rule names an operator may
still override)."""

from oslo_policy import policy

from openkeel_compute.policies import base

SERVICES = "os_compute_api:os-services:%s"
HYPERVISORS = "os_compute_api:os-hypervisors:%s"
HOSTS = "os_compute_api:os-hosts:%s"
AGGREGATES = "os_compute_api:os-aggregates:%s"
AGGREGATE_IMAGES = "compute:aggregates:%s"
SERVER_GROUPS = "os_compute_api:os-server-groups:%s"

_REASON = ("Nova API policies introduced new default roles with scope_type capabilities; "
           "the old defaults are ignored when [oslo_policy] enforce_new_defaults is true.")
_OLD_SERVICES = policy.DeprecatedRule("os_compute_api:os-services", base.RULE_ADMIN_API,
                                      deprecated_reason=_REASON, deprecated_since="21.0.0")
_OLD_HYPERVISORS = policy.DeprecatedRule("os_compute_api:os-hypervisors", base.RULE_ADMIN_API,
                                         deprecated_reason=_REASON, deprecated_since="21.0.0")
_OLD_HOSTS = policy.DeprecatedRule("os_compute_api:os-hosts", base.RULE_ADMIN_API,
                                   deprecated_reason=_REASON, deprecated_since="22.0.0")
_HOSTS_DEPRECATED = " This API is deprecated in favor of os-hypervisors and os-services."


def _rule(name, check_str, description, operations, deprecated=None):
    return policy.DocumentedRuleDefault(name=name, check_str=check_str, description=description,
                                        operations=[{"method": m, "path": p} for m, p in operations],
                                        scope_types=["project"], deprecated_rule=deprecated)


rules = [
    _rule(SERVICES % "list", base.ADMIN, "List all running Compute services in a region.",
          [("GET", "/os-services")], _OLD_SERVICES),
    _rule(SERVICES % "update", base.ADMIN, "Update a Compute service.",
          [("PUT", "/os-services/{service_id}")], _OLD_SERVICES),
    _rule(SERVICES % "delete", base.ADMIN, "Delete a Compute service.",
          [("DELETE", "/os-services/{service_id}")], _OLD_SERVICES),
    _rule(HYPERVISORS % "list", base.ADMIN, "List all hypervisors.", [("GET", "/os-hypervisors")],
          _OLD_HYPERVISORS),
    _rule(HYPERVISORS % "list-detail", base.ADMIN, "List all hypervisors with details",
          [("GET", "/os-hypervisors/details")], _OLD_HYPERVISORS),
    _rule(HYPERVISORS % "statistics", base.ADMIN, "Show summary statistics for all hypervisors over all "
          "compute nodes.", [("GET", "/os-hypervisors/statistics")], _OLD_HYPERVISORS),
    _rule(HYPERVISORS % "show", base.ADMIN, "Show details for a hypervisor.",
          [("GET", "/os-hypervisors/{hypervisor_id}")], _OLD_HYPERVISORS),
    _rule(HYPERVISORS % "uptime", base.ADMIN, "Show the uptime of a hypervisor.",
          [("GET", "/os-hypervisors/{hypervisor_id}/uptime")], _OLD_HYPERVISORS),
    _rule(HYPERVISORS % "search", base.ADMIN, "Search hypervisor by hypervisor_hostname pattern.",
          [("GET", "/os-hypervisors/{hypervisor_hostname_pattern}/search")], _OLD_HYPERVISORS),
    _rule(HYPERVISORS % "servers", base.ADMIN, "List all servers on hypervisors that can match the provided "
          "hypervisor_hostname_pattern.", [("GET", "/os-hypervisors/{hypervisor_hostname_pattern}/servers")],
          _OLD_HYPERVISORS),
    _rule(HOSTS % "list", base.ADMIN, "List physical hosts." + _HOSTS_DEPRECATED, [("GET", "/os-hosts")],
          _OLD_HOSTS),
    _rule(HOSTS % "show", base.ADMIN, "Show physical host." + _HOSTS_DEPRECATED,
          [("GET", "/os-hosts/{host_name}")], _OLD_HOSTS),
    _rule(HOSTS % "update", base.ADMIN, "Update physical host." + _HOSTS_DEPRECATED,
          [("PUT", "/os-hosts/{host_name}")], _OLD_HOSTS),
    _rule(HOSTS % "reboot", base.ADMIN, "Reboot physical host." + _HOSTS_DEPRECATED,
          [("GET", "/os-hosts/{host_name}/reboot")], _OLD_HOSTS),
    _rule(HOSTS % "shutdown", base.ADMIN, "Shutdown physical host." + _HOSTS_DEPRECATED,
          [("GET", "/os-hosts/{host_name}/shutdown")], _OLD_HOSTS),
    _rule(HOSTS % "start", base.ADMIN, "Start physical host." + _HOSTS_DEPRECATED,
          [("GET", "/os-hosts/{host_name}/startup")], _OLD_HOSTS),
    _rule(AGGREGATES % "set_metadata", base.ADMIN, "Create or replace metadata for an aggregate",
          [("POST", "/os-aggregates/{aggregate_id}/action (set_metadata)")]),
    _rule(AGGREGATES % "add_host", base.ADMIN, "Add a host to an aggregate",
          [("POST", "/os-aggregates/{aggregate_id}/action (add_host)")]),
    _rule(AGGREGATES % "create", base.ADMIN, "Create an aggregate", [("POST", "/os-aggregates")]),
    _rule(AGGREGATES % "remove_host", base.ADMIN, "Remove a host from an aggregate",
          [("POST", "/os-aggregates/{aggregate_id}/action (remove_host)")]),
    _rule(AGGREGATES % "update", base.ADMIN, "Update name and/or availability zone for an aggregate",
          [("PUT", "/os-aggregates/{aggregate_id}")]),
    _rule(AGGREGATES % "index", base.ADMIN, "List all aggregates", [("GET", "/os-aggregates")]),
    _rule(AGGREGATES % "delete", base.ADMIN, "Delete an aggregate", [("DELETE", "/os-aggregates/{aggregate_id}")]),
    _rule(AGGREGATES % "show", base.ADMIN, "Show details for an aggregate", [("GET", "/os-aggregates/{aggregate_id}")]),
    _rule(AGGREGATE_IMAGES % "images", base.ADMIN, "Request image caching for an aggregate",
          [("POST", "/os-aggregates/{aggregate_id}/images")]),
    _rule(SERVER_GROUPS % "create", base.PROJECT_MEMBER_OR_ADMIN, "Create a new server group",
          [("POST", "/os-server-groups")]),
    _rule(SERVER_GROUPS % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Delete a server group",
          [("DELETE", "/os-server-groups/{server_group_id}")]),
    _rule(SERVER_GROUPS % "index", base.PROJECT_READER_OR_ADMIN, "List all server groups",
          [("GET", "/os-server-groups")]),
    _rule(SERVER_GROUPS % "index:all_projects", base.ADMIN, "List all server groups for all projects",
          [("GET", "/os-server-groups")]),
    _rule(SERVER_GROUPS % "show", base.PROJECT_READER_OR_ADMIN, "Show details of a server group",
          [("GET", "/os-server-groups/{server_group_id}")]),
]


def list_rules():
    return rules
