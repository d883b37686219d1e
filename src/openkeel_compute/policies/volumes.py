"""The rules of Nova's Cinder proxies (os-volumes, os-snapshots) and os-assisted-volume-snapshots,
under Nova 34.0.0's names and defaults (with the older rule name an operator may still override)."""

from oslo_policy import policy

from openkeel_compute.policies import base

VOLUMES = "os_compute_api:os-volumes:%s"
ASSISTED_SNAPSHOTS = "os_compute_api:os-assisted-volume-snapshots:%s"

_REASON = ("Nova API policies are introducing new default roles with scope_type capabilities. Old policies are "
           "deprecated and silently going to be ignored in nova 23.0.0 release.")
_OLD_VOLUMES = policy.DeprecatedRule("os_compute_api:os-volumes", base.RULE_ADMIN_OR_OWNER,
                                     deprecated_reason=_REASON, deprecated_since="22.0.0")
_PROXY = "\nThis API is a proxy call to the Volume service. It is deprecated."


def _rule(name, check_str, description, method, path, deprecated=None):
    return policy.DocumentedRuleDefault(name=name, check_str=check_str, description=description,
                                        operations=[{"method": method, "path": path}], scope_types=["project"],
                                        deprecated_rule=deprecated)


rules = [
    _rule(VOLUMES % "list", base.PROJECT_READER_OR_ADMIN, "List volumes." + _PROXY, "GET", "/os-volumes",
          _OLD_VOLUMES),
    _rule(VOLUMES % "create", base.PROJECT_MEMBER_OR_ADMIN, "Create volume." + _PROXY, "POST", "/os-volumes",
          _OLD_VOLUMES),
    _rule(VOLUMES % "detail", base.PROJECT_READER_OR_ADMIN, "List volumes detail." + _PROXY, "GET",
          "/os-volumes/detail", _OLD_VOLUMES),
    _rule(VOLUMES % "show", base.PROJECT_READER_OR_ADMIN, "Show volume." + _PROXY, "GET",
          "/os-volumes/{volume_id}", _OLD_VOLUMES),
    _rule(VOLUMES % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Delete volume." + _PROXY, "DELETE",
          "/os-volumes/{volume_id}", _OLD_VOLUMES),
    _rule(VOLUMES % "snapshots:list", base.PROJECT_READER_OR_ADMIN, "List snapshots." + _PROXY, "GET",
          "/os-snapshots", _OLD_VOLUMES),
    _rule(VOLUMES % "snapshots:create", base.PROJECT_MEMBER_OR_ADMIN, "Create snapshots." + _PROXY, "POST",
          "/os-snapshots", _OLD_VOLUMES),
    _rule(VOLUMES % "snapshots:detail", base.PROJECT_READER_OR_ADMIN, "List snapshots details." + _PROXY, "GET",
          "/os-snapshots/detail", _OLD_VOLUMES),
    _rule(VOLUMES % "snapshots:show", base.PROJECT_READER_OR_ADMIN, "Show snapshot." + _PROXY, "GET",
          "/os-snapshots/{snapshot_id}", _OLD_VOLUMES),
    _rule(VOLUMES % "snapshots:delete", base.PROJECT_MEMBER_OR_ADMIN, "Delete snapshot." + _PROXY, "DELETE",
          "/os-snapshots/{snapshot_id}", _OLD_VOLUMES),
    _rule(ASSISTED_SNAPSHOTS % "create", base.SERVICE_ROLE, "Create an assisted volume snapshot", "POST",
          "/os-assisted-volume-snapshots"),
    _rule(ASSISTED_SNAPSHOTS % "delete", base.SERVICE_ROLE, "Delete an assisted volume snapshot", "DELETE",
          "/os-assisted-volume-snapshots/{snapshot_id}"),
]


def list_rules():
    return rules
