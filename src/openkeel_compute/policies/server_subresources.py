"""The rules of a server's addresses, password, security groups and migrations, under Nova
34.0.0's names and defaults (with the older rule names an operator may still override)."""

from oslo_policy import policy

from openkeel_compute.policies import base

IPS = "os_compute_api:ips:%s"
PASSWORD = "os_compute_api:os-server-password:%s"
SECURITY_GROUPS = "os_compute_api:os-security-groups:%s"
MIGRATIONS = "os_compute_api:os-migrations:%s"
SERVER_MIGRATIONS = "os_compute_api:servers:migrations:%s"
INTERFACES = "os_compute_api:os-attach-interfaces:%s"
VOLUME_ATTACHMENTS = "os_compute_api:os-volumes-attachments:%s"

_REASON = ("Nova API policies introduced new default roles with scope_type capabilities; "
           "the old defaults are ignored when [oslo_policy] enforce_new_defaults is true.")
_OLD_PASSWORD = policy.DeprecatedRule("os_compute_api:os-server-password", base.RULE_ADMIN_OR_OWNER,
                                      deprecated_reason=_REASON, deprecated_since="21.0.0")
_OLD_SECURITY_GROUPS = policy.DeprecatedRule("os_compute_api:os-security-groups", base.RULE_ADMIN_OR_OWNER,
                                             deprecated_reason=_REASON, deprecated_since="22.0.0")
_OLD_MIGRATIONS = policy.DeprecatedRule(
    MIGRATIONS % "index", base.ADMIN, deprecated_since="32.0.0",
    deprecated_reason="Listing migrations with host details or across projects has rules of its own; an "
                      "override of the index rule applies to them too.")
_OLD_SERVER_MIGRATIONS = policy.DeprecatedRule(
    SERVER_MIGRATIONS % "index", base.ADMIN, deprecated_since="32.0.0",
    deprecated_reason="Listing a server's live migrations with host details has a rule of its own; an "
                      "override of the index rule applies to it too.")
_OLD_INTERFACES = policy.DeprecatedRule("os_compute_api:os-attach-interfaces", base.RULE_ADMIN_OR_OWNER,
                                         deprecated_reason=_REASON, deprecated_since="21.0.0")
_SERVER_ACTION = "/servers/{server_id}/action (%s)"


def _rule(name, check_str, description, method, path, deprecated=None):
    return policy.DocumentedRuleDefault(name=name, check_str=check_str, description=description,
                                        operations=[{"method": method, "path": path}], scope_types=["project"],
                                        deprecated_rule=deprecated)


rules = [
    _rule(SECURITY_GROUPS % "get", base.PROJECT_READER_OR_ADMIN, "List security groups. This API is deprecated.",
          "GET", "/os-security-groups", _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "show", base.PROJECT_READER_OR_ADMIN,
          "Show security group. This API is deprecated.", "GET", "/os-security-groups/{security_group_id}",
          _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "create", base.PROJECT_MEMBER_OR_ADMIN,
          "Create security group. This API is deprecated.", "POST", "/os-security-groups", _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "update", base.PROJECT_MEMBER_OR_ADMIN,
          "Update security group. This API is deprecated.", "PUT", "/os-security-groups/{security_group_id}",
          _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "delete", base.PROJECT_MEMBER_OR_ADMIN,
          "Delete security group. This API is deprecated.", "DELETE", "/os-security-groups/{security_group_id}",
          _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "rule:create", base.PROJECT_MEMBER_OR_ADMIN,
          "Create security group Rule. This API is deprecated.", "POST", "/os-security-group-rules",
          _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "rule:delete", base.PROJECT_MEMBER_OR_ADMIN,
          "Delete security group Rule. This API is deprecated.", "DELETE",
          "/os-security-group-rules/{security_group_id}", _OLD_SECURITY_GROUPS),
    _rule(INTERFACES % "list", base.PROJECT_READER_OR_ADMIN, "List port interfaces attached to a server",
          "GET", "/servers/{server_id}/os-interface", _OLD_INTERFACES),
    _rule(INTERFACES % "show", base.PROJECT_READER_OR_ADMIN, "Show details of a port interface attached to a server",
          "GET", "/servers/{server_id}/os-interface/{port_id}", _OLD_INTERFACES),
    _rule(INTERFACES % "create", base.PROJECT_MEMBER_OR_ADMIN, "Attach an interface to a server",
          "POST", "/servers/{server_id}/os-interface", _OLD_INTERFACES),
    _rule(INTERFACES % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Detach an interface from a server",
          "DELETE", "/servers/{server_id}/os-interface/{port_id}", _OLD_INTERFACES),
    _rule(VOLUME_ATTACHMENTS % "index", base.PROJECT_READER_OR_ADMIN, "List volume attachments for an instance",
          "GET", "/servers/{server_id}/os-volume_attachments"),
    _rule(VOLUME_ATTACHMENTS % "show", base.PROJECT_READER_OR_ADMIN, "Show details of a volume attachment",
          "GET", "/servers/{server_id}/os-volume_attachments/{volume_id}"),
    _rule(VOLUME_ATTACHMENTS % "create", base.PROJECT_MEMBER_OR_ADMIN, "Attach a volume to an instance",
          "POST", "/servers/{server_id}/os-volume_attachments"),
    _rule(VOLUME_ATTACHMENTS % "update", base.PROJECT_MEMBER_OR_ADMIN,
          "Update a volume attachment. New 'update' policy about 'swap + update' request (which is possible "
          "only >2.85) only <swap policy> is checked. We expect <swap policy> to be always superset of this "
          "policy permission.",
          "PUT", "/servers/{server_id}/os-volume_attachments/{volume_id}"),
    _rule(VOLUME_ATTACHMENTS % "swap", base.SERVICE_ROLE, "Update a volume attachment with a different volumeId",
          "PUT", "/servers/{server_id}/os-volume_attachments/{volume_id}"),
    _rule(VOLUME_ATTACHMENTS % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Detach a volume from an instance",
          "DELETE", "/servers/{server_id}/os-volume_attachments/{volume_id}"),
    _rule(IPS % "show", base.PROJECT_READER_OR_ADMIN, "Show the addresses a server has on one network",
          "GET", "/servers/{server_id}/ips/{network_label}"),
    _rule(IPS % "index", base.PROJECT_READER_OR_ADMIN, "List the addresses of a server",
          "GET", "/servers/{server_id}/ips"),
    _rule(PASSWORD % "show", base.PROJECT_READER_OR_ADMIN, "Show the encrypted password a server's guest left",
          "GET", "/servers/{server_id}/os-server-password", _OLD_PASSWORD),
    _rule(PASSWORD % "clear", base.PROJECT_MEMBER_OR_ADMIN, "Clear the encrypted password of a server",
          "DELETE", "/servers/{server_id}/os-server-password", _OLD_PASSWORD),
    _rule(SECURITY_GROUPS % "list", base.PROJECT_READER_OR_ADMIN, "List the security groups of a server",
          "GET", "/servers/{server_id}/os-security-groups", _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "add", base.PROJECT_MEMBER_OR_ADMIN, "Add a security group to a server",
          "POST", _SERVER_ACTION % "addSecurityGroup", _OLD_SECURITY_GROUPS),
    _rule(SECURITY_GROUPS % "remove", base.PROJECT_MEMBER_OR_ADMIN, "Remove a security group from a server",
          "POST", _SERVER_ACTION % "removeSecurityGroup", _OLD_SECURITY_GROUPS),
    _rule(MIGRATIONS % "index", base.PROJECT_MANAGER_OR_ADMIN,
          "List the migrations of the caller's project, without host details", "GET", "/os-migrations"),
    _rule(MIGRATIONS % "index:all_projects", base.ADMIN, "List the migrations of any or every project",
          "GET", "/os-migrations", _OLD_MIGRATIONS),
    _rule(MIGRATIONS % "index:host", base.ADMIN, "List migrations with their source and destination hosts",
          "GET", "/os-migrations", _OLD_MIGRATIONS),
    _rule(SERVER_MIGRATIONS % "force_complete", base.PROJECT_MANAGER_OR_ADMIN,
          "Force an in-progress live migration for a given server to complete",
          "POST", "/servers/{server_id}/migrations/{migration_id}/action (force_complete)"),
    _rule(SERVER_MIGRATIONS % "delete", base.PROJECT_MANAGER_OR_ADMIN, "Delete(Abort) an in-progress live migration",
          "DELETE", "/servers/{server_id}/migrations/{migration_id}"),
    _rule(SERVER_MIGRATIONS % "show", base.ADMIN, "Show a live migration of a server in progress",
          "GET", "/servers/{server_id}/migrations/{migration_id}"),
    _rule(SERVER_MIGRATIONS % "index", base.PROJECT_MANAGER_OR_ADMIN,
          "List the live migrations of a server in progress, without host details",
          "GET", "/servers/{server_id}/migrations"),
    _rule(SERVER_MIGRATIONS % "index:host", base.ADMIN,
          "List the live migrations of a server in progress, with their hosts",
          "GET", "/servers/{server_id}/migrations", _OLD_SERVER_MIGRATIONS),
]


def list_rules():
    return rules
