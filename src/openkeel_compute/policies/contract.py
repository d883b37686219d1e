"""The rules of /extensions, usage (os-simple-tenant-usage, os-instance_usage_audit_log), the
bare-metal proxy and server shares, under Nova 34.0.0's names and defaults (with the older rule
names an operator may still override)."""

from oslo_policy import policy

from openkeel_compute.policies import base

EXTENSIONS = "os_compute_api:extensions"
TENANT_USAGE = "os_compute_api:os-simple-tenant-usage:%s"
AUDIT_LOG = "os_compute_api:os-instance-usage-audit-log:%s"
BAREMETAL = "os_compute_api:os-baremetal-nodes:%s"
SHARES = "os_compute_api:os-server-shares:%s"
EXTERNAL_EVENTS = "os_compute_api:os-server-external-events:%s"
NETWORKS = "os_compute_api:os-networks:%s"
TENANT_NETWORKS = "os_compute_api:os-tenant-networks:%s"
FLOATING_IP_POOLS = "os_compute_api:os-floating-ip-pools"
FLOATING_IPS = "os_compute_api:os-floating-ips:%s"
MULTINIC = "os_compute_api:os-multinic:%s"

_REASON = ("Nova API policies introduced new default roles with scope_type capabilities; "
           "the old defaults are ignored when [oslo_policy] enforce_new_defaults is true.")
_OLD_AUDIT_LOG = policy.DeprecatedRule("os_compute_api:os-instance-usage-audit-log", base.RULE_ADMIN_API,
                                       deprecated_reason=_REASON, deprecated_since="21.0.0")
_OLD_BAREMETAL = policy.DeprecatedRule("os_compute_api:os-baremetal-nodes", base.RULE_ADMIN_API,
                                       deprecated_reason=_REASON, deprecated_since="22.0.0")

_OLD_NETWORKS = policy.DeprecatedRule("os_compute_api:os-networks:view", base.RULE_ADMIN_OR_OWNER,
                                      deprecated_reason=_REASON, deprecated_since="22.0.0")
_OLD_FLOATING_IPS = policy.DeprecatedRule("os_compute_api:os-floating-ips", base.RULE_ADMIN_OR_OWNER,
                                          deprecated_reason=_REASON, deprecated_since="22.0.0")
_OLD_MULTINIC = policy.DeprecatedRule("os_compute_api:os-multinic", base.RULE_ADMIN_OR_OWNER,
                                      deprecated_reason=_REASON, deprecated_since="22.0.0")
_OLD_TENANT_NETWORKS = policy.DeprecatedRule("os_compute_api:os-tenant-networks", base.RULE_ADMIN_OR_OWNER,
                                             deprecated_reason=_REASON, deprecated_since="22.0.0")


def _rule(name, check_str, description, operations, deprecated=None):
    return policy.DocumentedRuleDefault(name=name, check_str=check_str, description=description,
                                        operations=[{"method": m, "path": p} for m, p in operations],
                                        scope_types=["project"], deprecated_rule=deprecated)


rules = [
    _rule(FLOATING_IPS % "list", base.PROJECT_READER_OR_ADMIN, "List floating IPs. This API is deprecated.",
          [("GET", "/os-floating-ips")], _OLD_FLOATING_IPS),
    _rule(FLOATING_IPS % "show", base.PROJECT_READER_OR_ADMIN, "Show floating IPs. This API is deprecated.",
          [("GET", "/os-floating-ips/{floating_ip_id}")], _OLD_FLOATING_IPS),
    _rule(FLOATING_IPS % "create", base.PROJECT_MEMBER_OR_ADMIN, "Create floating IPs. This API is deprecated.",
          [("POST", "/os-floating-ips")], _OLD_FLOATING_IPS),
    _rule(FLOATING_IPS % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Delete floating IPs. This API is deprecated.",
          [("DELETE", "/os-floating-ips/{floating_ip_id}")], _OLD_FLOATING_IPS),
    _rule(FLOATING_IPS % "add", base.PROJECT_MEMBER_OR_ADMIN, "Associate floating IPs to server.  This API is "
          "deprecated.", [("POST", "/servers/{server_id}/action (addFloatingIp)")], _OLD_FLOATING_IPS),
    _rule(FLOATING_IPS % "remove", base.PROJECT_MEMBER_OR_ADMIN, "Disassociate floating IPs to server.  This API "
          "is deprecated.", [("POST", "/servers/{server_id}/action (removeFloatingIp)")], _OLD_FLOATING_IPS),
    _rule(MULTINIC % "add", base.PROJECT_MEMBER_OR_ADMIN, "Add a fixed IP address to a server.\n\nThis API is "
          "proxy calls to the Network service. This is\ndeprecated.",
          [("POST", "/servers/{server_id}/action (addFixedIp)")], _OLD_MULTINIC),
    _rule(MULTINIC % "remove", base.PROJECT_MEMBER_OR_ADMIN, "Remove a fixed IP address from a server.\n\nThis "
          "API is proxy calls to the Network service. This is\ndeprecated.",
          [("POST", "/servers/{server_id}/action (removeFixedIp)")], _OLD_MULTINIC),
    _rule(FLOATING_IP_POOLS, base.RULE_ANY, "List floating IP pools. This API is deprecated.",
          [("GET", "/os-floating-ip-pools")]),
    _rule(NETWORKS % "list", base.PROJECT_READER_OR_ADMIN,
          "List networks for the project.\nThis API is proxy calls to the Network service. This is deprecated.",
          [("GET", "/os-networks")], _OLD_NETWORKS),
    _rule(NETWORKS % "show", base.PROJECT_READER_OR_ADMIN,
          "Show network details.\nThis API is proxy calls to the Network service. This is deprecated.",
          [("GET", "/os-networks/{network_id}")], _OLD_NETWORKS),
    _rule(TENANT_NETWORKS % "list", base.PROJECT_READER_OR_ADMIN,
          "List project networks.\nThis API is proxy calls to the Network service. This is deprecated.",
          [("GET", "/os-tenant-networks")], _OLD_TENANT_NETWORKS),
    _rule(TENANT_NETWORKS % "show", base.PROJECT_READER_OR_ADMIN,
          "Show project network details.\nThis API is proxy calls to the Network service. This is deprecated.",
          [("GET", "/os-tenant-networks/{network_id}")], _OLD_TENANT_NETWORKS),
    _rule(EXTERNAL_EVENTS % "create", base.SERVICE_ROLE, "Create one or more external events",
          [("POST", "/os-server-external-events")]),
    _rule(EXTENSIONS, base.RULE_ANY, "List available extensions and show information for an extension by alias",
          [("GET", "/extensions"), ("GET", "/extensions/{alias}")]),
    _rule(TENANT_USAGE % "show", base.PROJECT_READER_OR_ADMIN, "Show usage statistics for a specific tenant",
          [("GET", "/os-simple-tenant-usage/{tenant_id}")]),
    _rule(TENANT_USAGE % "list", base.ADMIN, "List per tenant usage statistics for all tenants",
          [("GET", "/os-simple-tenant-usage")]),
    _rule(AUDIT_LOG % "list", base.ADMIN, "List all usage audits.", [("GET", "/os-instance_usage_audit_log")],
          _OLD_AUDIT_LOG),
    _rule(AUDIT_LOG % "show", base.ADMIN,
          "List all usage audits occurred before a specified time for all servers on all compute hosts where "
          "usage auditing is configured", [("GET", "/os-instance_usage_audit_log/{before_timestamp}")],
          _OLD_AUDIT_LOG),
    _rule(BAREMETAL % "list", base.ADMIN,
          "List and show details of bare metal nodes.\nThese APIs are proxy calls to the Ironic service and are "
          "deprecated.\n", [("GET", "/os-baremetal-nodes")], _OLD_BAREMETAL),
    _rule(BAREMETAL % "show", base.ADMIN, "Show action details for a server.",
          [("GET", "/os-baremetal-nodes/{node_id}")], _OLD_BAREMETAL),
    _rule(SHARES % "index", base.PROJECT_READER_OR_ADMIN, "List all shares for given server",
          [("GET", "/servers/{server_id}/shares")]),
    _rule(SHARES % "create", base.PROJECT_MEMBER_OR_ADMIN, "Attach a share to the specified server",
          [("POST", "/servers/{server_id}/shares")]),
    _rule(SHARES % "show", base.PROJECT_READER_OR_ADMIN, "Show a share configured for the specified server",
          [("GET", "/servers/{server_id}/shares/{share_id}")]),
    _rule(SHARES % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Detach a share to the specified server",
          [("DELETE", "/servers/{server_id}/shares/{share_id}")]),
]


def list_rules():
    return rules
