"""The servers' rules, under the names and defaults Nova 34.0.0 uses."""

from oslo_policy import policy

from openkeel_compute.policies import base

SERVERS = "os_compute_api:servers:%s"
EXTENDED_ATTRIBUTES = "os_compute_api:os-extended-server-attributes"
INSTANCE_ACTIONS = "os_compute_api:os-instance-actions:%s"
SERVER_TAGS = "os_compute_api:os-server-tags:%s"
SERVER_METADATA = "os_compute_api:server-metadata:%s"
REQUESTED_DESTINATION = "compute:servers:create:requested_destination"


#: Nova's rule for an unshared external network (router:external) given a server's port
NETWORK_ATTACH_EXTERNAL = "network:attach_external_network"


def _rule(name, check_str, description, operations):
    return policy.DocumentedRuleDefault(name=name, check_str=check_str, description=description,
                                        operations=operations, scope_types=["project"])


rules = [
    _rule(SERVERS % "index", base.PROJECT_READER_OR_ADMIN, "List servers",
          [{"method": "GET", "path": "/servers"}]),
    _rule(SERVERS % "detail", base.PROJECT_READER_OR_ADMIN, "List servers with details",
          [{"method": "GET", "path": "/servers/detail"}]),
    _rule(SERVERS % "index:get_all_tenants", base.ADMIN, "List servers of all projects",
          [{"method": "GET", "path": "/servers"}]),
    _rule(SERVERS % "detail:get_all_tenants", base.ADMIN, "List servers of all projects with details",
          [{"method": "GET", "path": "/servers/detail"}]),
    _rule(SERVERS % "allow_all_filters", base.ADMIN, "Filter server lists on every filter, not only "
          "the ones open to project users",
          [{"method": "GET", "path": "/servers"}, {"method": "GET", "path": "/servers/detail"}]),
    _rule(SERVERS % "show", base.PROJECT_READER_OR_ADMIN, "Show a server",
          [{"method": "GET", "path": "/servers/{server_id}"}]),
    _rule(SERVERS % "show:flavor-extra-specs", base.PROJECT_READER_OR_ADMIN,
          "Show the extra specs of a server's flavor (from microversion 2.47)",
          [{"method": "GET", "path": "/servers/{server_id}"}, {"method": "GET", "path": "/servers/detail"},
           {"method": "PUT", "path": "/servers/{server_id}"}]),
    _rule(SERVERS % "show:host_status", base.ADMIN,
          "Show the state of a server's host (host_status, from microversion 2.16)",
          [{"method": "GET", "path": "/servers/{server_id}"}, {"method": "GET", "path": "/servers/detail"},
           {"method": "PUT", "path": "/servers/{server_id}"}]),
    _rule(SERVERS % "show:host_status:unknown-only", base.ADMIN,
          "Show a server's host_status only when it is UNKNOWN, to those the show:host_status rule "
          "refuses",
          [{"method": "GET", "path": "/servers/{server_id}"}, {"method": "GET", "path": "/servers/detail"},
           {"method": "PUT", "path": "/servers/{server_id}"}]),
    _rule(SERVERS % "create", "rule:project_member_api", "Create a server",
          [{"method": "POST", "path": "/servers"}]),
    _rule(SERVERS % "create:attach_network", "rule:project_member_api",
          "Create a server with the requested networks", [{"method": "POST", "path": "/servers"}]),
    _rule(NETWORK_ATTACH_EXTERNAL, base.ADMIN, "Attach an unshared external network to a server",
          [{"method": "POST", "path": "/servers"}, {"method": "POST", "path": "/servers/{server_id}/os-interface"}]),
    _rule(SERVERS % "create:forced_host", base.ADMIN,
          "Create a server on the named node (availability_zone 'zone:host', 'zone:host:node' or 'zone::node'), "
          "bypassing the scheduler's checks",
          [{"method": "POST", "path": "/servers"}]),
    _rule(REQUESTED_DESTINATION, base.ADMIN,
          "Create a server on the requested host and/or hypervisor_hostname (from microversion 2.74); the node "
          "must exist and the scheduler's checks still apply",
          [{"method": "POST", "path": "/servers"}]),
    _rule(SERVERS % "create:attach_volume", "rule:project_member_api",
          "Create a server with the requested volumes", [{"method": "POST", "path": "/servers"}]),
    _rule(SERVERS % "create:zero_disk_flavor", base.ADMIN,
          "Create an image-backed server with a flavor of zero disk (its root disk then has no size limit)",
          [{"method": "POST", "path": "/servers"}]),
    _rule(SERVERS % "update", base.PROJECT_MEMBER_OR_ADMIN, "Update a server",
          [{"method": "PUT", "path": "/servers/{server_id}"}]),
    _rule(SERVERS % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Delete a server",
          [{"method": "DELETE", "path": "/servers/{server_id}"}]),
    _rule(INSTANCE_ACTIONS % "list", base.PROJECT_READER_OR_ADMIN, "List the actions of a server",
          [{"method": "GET", "path": "/servers/{server_id}/os-instance-actions"}]),
    _rule(INSTANCE_ACTIONS % "show", base.PROJECT_READER_OR_ADMIN, "Show an action of a server",
          [{"method": "GET", "path": "/servers/{server_id}/os-instance-actions/{request_id}"}]),
    _rule(INSTANCE_ACTIONS % "events", base.ADMIN,
          "Show an action's events with their tracebacks (and, from 2.62, their hosts); others see "
          "the events without them from 2.51",
          [{"method": "GET", "path": "/servers/{server_id}/os-instance-actions/{request_id}"}]),
    _rule(INSTANCE_ACTIONS % "events:details", base.ADMIN, "Show the details of an action's events (2.84)",
          [{"method": "GET", "path": "/servers/{server_id}/os-instance-actions/{request_id}"}]),
    _rule(SERVER_TAGS % "index", base.PROJECT_READER_OR_ADMIN, "List the tags of a server",
          [{"method": "GET", "path": "/servers/{server_id}/tags"}]),
    _rule(SERVER_TAGS % "show", base.PROJECT_READER_OR_ADMIN, "Check whether a server has a tag",
          [{"method": "GET", "path": "/servers/{server_id}/tags/{tag}"}]),
    _rule(SERVER_TAGS % "update", base.PROJECT_MEMBER_OR_ADMIN, "Add a tag to a server",
          [{"method": "PUT", "path": "/servers/{server_id}/tags/{tag}"}]),
    _rule(SERVER_TAGS % "update_all", base.PROJECT_MEMBER_OR_ADMIN, "Replace the tags of a server",
          [{"method": "PUT", "path": "/servers/{server_id}/tags"}]),
    _rule(SERVER_TAGS % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Remove a tag from a server",
          [{"method": "DELETE", "path": "/servers/{server_id}/tags/{tag}"}]),
    _rule(SERVER_TAGS % "delete_all", base.PROJECT_MEMBER_OR_ADMIN, "Remove all the tags of a server",
          [{"method": "DELETE", "path": "/servers/{server_id}/tags"}]),
    _rule(SERVER_METADATA % "index", base.PROJECT_READER_OR_ADMIN, "List the metadata of a server",
          [{"method": "GET", "path": "/servers/{server_id}/metadata"}]),
    _rule(SERVER_METADATA % "show", base.PROJECT_READER_OR_ADMIN, "Show a metadata item of a server",
          [{"method": "GET", "path": "/servers/{server_id}/metadata/{key}"}]),
    _rule(SERVER_METADATA % "create", base.PROJECT_MEMBER_OR_ADMIN, "Add or change metadata items of a server",
          [{"method": "POST", "path": "/servers/{server_id}/metadata"}]),
    _rule(SERVER_METADATA % "update_all", base.PROJECT_MEMBER_OR_ADMIN, "Replace the metadata of a server",
          [{"method": "PUT", "path": "/servers/{server_id}/metadata"}]),
    _rule(SERVER_METADATA % "update", base.PROJECT_MEMBER_OR_ADMIN, "Set one metadata item of a server",
          [{"method": "PUT", "path": "/servers/{server_id}/metadata/{key}"}]),
    _rule(SERVER_METADATA % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Remove a metadata item of a server",
          [{"method": "DELETE", "path": "/servers/{server_id}/metadata/{key}"}]),
    _rule(EXTENDED_ATTRIBUTES, base.ADMIN,
          "Show the OS-EXT-SRV-ATTR attributes of servers (host, instance name, user data, ...)",
          [{"method": "GET", "path": "/servers/{id}"}, {"method": "GET", "path": "/servers/detail"},
           {"method": "PUT", "path": "/servers/{server_id}"}]),
]


def list_rules():
    return rules
