"""The API surface on one screen: URI template → HTTP method (or body action) → handler.

Templates are relative to /v2.1 (and /v2); an optional /{project_id} prefix is taken off
before routing (api/deploy.py). Each handler states its own contract (api/wsgi.py).
"""

from __future__ import annotations

from openkeel_compute.api.handlers import (
    availability_zones,
    baremetal_nodes,
    extensions,
    flavor_access,
    flavor_extra_specs,
    flavors,
    image_metadata,
    images,
    instance_usage_audit_log,
    keypairs,
    migrations,
    quotas,
    removed,
    server_actions,
    server_actions_unsupported,
    server_admin_actions,
    server_external_events,
    server_instance_actions,
    server_interfaces,
    server_ips,
    server_metadata,
    server_password,
    server_rebuild,
    server_resize,
    server_security_groups,
    server_shares,
    server_tags,
    servers,
    servers_create,
    servers_list,
    simple_tenant_usage,
    versions,
    volumes_boot,
)
from openkeel_compute.api.wsgi import Endpoint

ROUTES = {
    "/": {"GET": versions.show},
    "/versions/{id}": {"GET": versions.show_version},
    "/extensions": {"GET": extensions.index},
    "/extensions/{alias}": {"GET": extensions.show},
    "/flavors": {"GET": flavors.index, "POST": flavors.create},
    "/flavors/detail": {"GET": flavors.detail},
    "/flavors/{flavor_id}": {"GET": flavors.show, "PUT": flavors.update, "DELETE": flavors.delete},
    "/flavors/{flavor_id}/action": {
        "POST": {
            "addTenantAccess": flavor_access.add_tenant_access,
            "removeTenantAccess": flavor_access.remove_tenant_access,
        }
    },
    "/flavors/{flavor_id}/os-flavor-access": {"GET": flavor_access.index},
    "/flavors/{flavor_id}/os-extra_specs": {"GET": flavor_extra_specs.index, "POST": flavor_extra_specs.create},
    "/flavors/{flavor_id}/os-extra_specs/{key}": {
        "GET": flavor_extra_specs.show,
        "PUT": flavor_extra_specs.update,
        "DELETE": flavor_extra_specs.delete,
    },
    "/images": {"GET": images.index},
    "/images/detail": {"GET": images.detail},
    "/images/{image_id}": {"GET": images.show, "DELETE": images.delete},
    "/images/{image_id}/metadata": {"GET": image_metadata.index, "POST": image_metadata.create,
                                    "PUT": image_metadata.update_all},
    "/images/{image_id}/metadata/{key}": {"GET": image_metadata.show, "PUT": image_metadata.update,
                                          "DELETE": image_metadata.delete},
    "/os-keypairs": {"GET": keypairs.index, "POST": keypairs.create},
    "/os-keypairs/{keypair_name}": {"GET": keypairs.show, "DELETE": keypairs.delete},
    "/os-quota-sets/{project_id}": {"GET": quotas.show, "PUT": quotas.update, "DELETE": quotas.delete},
    "/os-quota-sets/{project_id}/detail": {"GET": quotas.detail},
    "/os-quota-sets/{project_id}/defaults": {"GET": quotas.defaults},
    "/os-quota-class-sets/{class_name}": {"GET": quotas.class_show, "PUT": quotas.class_update},
    "/limits": {"GET": quotas.limits},
    "/os-availability-zone": {"GET": availability_zones.index},
    "/os-availability-zone/detail": {"GET": availability_zones.detail},
    "/servers": {"GET": servers_list.index, "POST": servers_create.create},
    "/servers/detail": {"GET": servers_list.detail},
    "/servers/{server_id}": {"GET": servers.show, "PUT": servers.update, "DELETE": servers.delete},
    "/servers/{server_id}/metadata": {"GET": server_metadata.index, "POST": server_metadata.create,
                                      "PUT": server_metadata.update_all},
    "/servers/{server_id}/metadata/{key}": {"GET": server_metadata.show, "PUT": server_metadata.update,
                                            "DELETE": server_metadata.delete},
    "/servers/{server_id}/tags": {"GET": server_tags.index, "PUT": server_tags.update_all,
                                  "DELETE": server_tags.delete_all},
    "/servers/{server_id}/tags/{tag}": {"GET": server_tags.show, "PUT": server_tags.update,
                                        "DELETE": server_tags.delete},
    "/servers/{server_id}/os-instance-actions": {"GET": server_instance_actions.index},
    "/servers/{server_id}/os-instance-actions/{request_id}": {"GET": server_instance_actions.show},
    "/servers/{server_id}/ips": {"GET": server_ips.index},
    "/servers/{server_id}/os-interface": {"GET": server_interfaces.index},
    "/servers/{server_id}/os-interface/{port_id}": {"GET": server_interfaces.show},
    "/servers/{server_id}/ips/{network_label}": {"GET": server_ips.show},
    "/servers/{server_id}/os-server-password": {"GET": server_password.index, "DELETE": server_password.clear},
    "/servers/{server_id}/os-security-groups": {"GET": server_security_groups.index},
    "/servers/{server_id}/migrations": {"GET": migrations.server_index},
    "/servers/{server_id}/migrations/{migration_id}": {"GET": migrations.server_show},
    "/os-migrations": {"GET": migrations.index},
    "/servers/{server_id}/shares": {"GET": server_shares.index, "POST": server_shares.create},
    "/servers/{server_id}/shares/{share_id}": {"GET": server_shares.show, "DELETE": server_shares.delete},
    "/os-volumes_boot": {"GET": volumes_boot.index, "POST": volumes_boot.create},
    "/os-volumes_boot/detail": {"GET": volumes_boot.detail},
    "/os-volumes_boot/{server_id}": {"GET": volumes_boot.show, "PUT": volumes_boot.update,
                                     "DELETE": volumes_boot.delete},
    "/os-volumes_boot/{server_id}/action": {"POST": volumes_boot.ACTIONS},
    "/os-simple-tenant-usage": {"GET": simple_tenant_usage.index},
    "/os-simple-tenant-usage/{tenant_id}": {"GET": simple_tenant_usage.show},
    "/os-instance_usage_audit_log": {"GET": instance_usage_audit_log.index},
    "/os-server-external-events": {"POST": server_external_events.create},
    "/os-instance_usage_audit_log/{before_timestamp}": {"GET": instance_usage_audit_log.show},
    "/os-baremetal-nodes": {"GET": baremetal_nodes.index, "POST": baremetal_nodes.create},
    "/os-baremetal-nodes/{node_id}": {"GET": baremetal_nodes.show, "DELETE": baremetal_nodes.delete},
    "/os-baremetal-nodes/{node_id}/action": {"POST": {"add_interface": baremetal_nodes.add_interface,
                                                      "remove_interface": baremetal_nodes.remove_interface}},
    "/servers/{server_id}/action": {
        "POST": {
            "os-start": server_actions.start,
            "os-stop": server_actions.stop,
            "reboot": server_actions.reboot,
            "pause": server_actions.pause,
            "unpause": server_actions.unpause,
            "lock": server_actions.lock,
            "unlock": server_actions.unlock,
            "os-getConsoleOutput": server_actions.get_console_output,
            "suspend": server_actions.suspend,
            "resume": server_actions.resume,
            "addSecurityGroup": server_security_groups.add,
            "removeSecurityGroup": server_security_groups.remove,
            "rebuild": server_rebuild.rebuild,
            "os-resetState": server_admin_actions.reset_state,
            "injectNetworkInfo": server_admin_actions.inject_network_info,
            "resetNetwork": removed.gone,
            "os-getRDPConsole": removed.rdp_console,
            "restore": server_admin_actions.restore,
            "forceDelete": server_admin_actions.force_delete,
            "shelve": server_actions_unsupported.shelve,
            "shelveOffload": server_actions_unsupported.shelve_offload,
            "unshelve": server_actions_unsupported.unshelve,
            "rescue": server_actions_unsupported.rescue,
            "unrescue": server_actions_unsupported.unrescue,
            "createImage": server_actions_unsupported.create_image,
            "createBackup": server_actions_unsupported.create_backup,
            "changePassword": server_actions_unsupported.change_password,
            "trigger_crash_dump": server_actions_unsupported.trigger_crash_dump,
            "resize": server_resize.resize_server,
            "confirmResize": server_resize.confirm_resize,
            "revertResize": server_resize.revert_resize,
            "migrate": server_actions_unsupported.migrate,
            "os-migrateLive": server_actions_unsupported.migrate_live,
        }
    },
}

# Operations Nova 34.0.0 has removed but still routes: 410 at every microversion (api/handlers/removed.py).
_GONE = {"GET": removed.gone, "POST": removed.gone, "PUT": removed.gone, "DELETE": removed.gone}
REMOVED = {
    "/os-agents": ("GET", "POST"),
    "/os-agents/{agent_id}": ("PUT", "DELETE"),
    "/os-cells": ("GET", "POST"),
    "/os-cells/capacities": ("GET",),
    "/os-cells/detail": ("GET",),
    "/os-cells/info": ("GET",),
    "/os-cells/sync_instances": ("POST",),
    "/os-cells/{cell_id}": ("GET", "PUT", "DELETE"),
    "/os-cells/{cell_id}/capacities": ("GET",),
    "/os-certificates": ("POST",),
    "/os-certificates/{certificate_id}": ("GET",),
    "/os-cloudpipe": ("GET", "POST"),
    "/os-cloudpipe/{cloudpipe_id}": ("PUT",),
    "/os-fixed-ips/{fixed_ip}": ("GET",),
    "/os-floating-ip-dns": ("GET",),
    "/os-floating-ip-dns/{domain}": ("PUT", "DELETE"),
    "/os-floating-ip-dns/{domain}/entries/{entry}": ("GET", "PUT", "DELETE"),
    "/os-floating-ips-bulk": ("GET", "POST"),
    "/os-floating-ips-bulk/{range_id}": ("GET", "PUT"),
    "/os-fping": ("GET",),
    "/os-fping/{server_id}": ("GET",),
    "/os-networks/add": ("POST",),
    "/os-security-group-default-rules": ("GET", "POST"),
    "/os-security-group-default-rules/{rule_id}": ("GET", "DELETE"),
    "/servers/{server_id}/consoles": ("GET", "POST"),
    "/servers/{server_id}/consoles/{console_id}": ("GET", "DELETE"),
    "/servers/{server_id}/os-virtual-interfaces": ("GET",),
}
for _template, _methods in REMOVED.items():
    ROUTES.setdefault(_template, {}).update({m: _GONE[m] for m in _methods})
# Removed methods beside live ones (their live siblings come with the network issues), and removed actions.
ROUTES.setdefault("/os-networks", {})["POST"] = removed.gone
ROUTES.setdefault("/os-networks/{network_id}", {})["DELETE"] = removed.gone
ROUTES.setdefault("/os-tenant-networks", {})["POST"] = removed.gone
ROUTES.setdefault("/os-tenant-networks/{network_id}", {})["DELETE"] = removed.gone
ROUTES["/os-fixed-ips/{fixed_ip}/action"] = {"POST": {"reserve": removed.gone, "unreserve": removed.gone}}
ROUTES["/os-networks/{network_id}/action"] = {"POST": {
    name: removed.gone for name in ("associate_host", "disassociate", "disassociate_host", "disassociate_project")}}


def endpoints():
    for template, methods in ROUTES.items():
        yield template, Endpoint(methods)
