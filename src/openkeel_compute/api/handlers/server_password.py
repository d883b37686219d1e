"""GET and DELETE /servers/{server_id}/os-server-password: the encrypted password a server's
guest posted to the metadata service (openstack/<version>/password, docs/metadata.md), kept in system
metadata in Nova's four chunks (compute/networks.py); "" until the guest posts one. Clearing it works as
in Nova (and never changes the guest's own password)."""

from __future__ import annotations

from openkeel_compute.api import common
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import SUBRESOURCE_QUERY, read_server
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import networks
from openkeel_compute.policies import server_subresources as rules


@operation(query=SUBRESOURCE_QUERY, expected=(404,))
@wsgi_path_params
def index(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.PASSWORD % "show", {"project_id": row["project_id"]})
        return {"password": networks.password_of(conn, row["uuid"])}


@operation(success=204, expected=(404,))
@wsgi_path_params
def clear(req, server_id):
    with common.write(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.PASSWORD % "clear", {"project_id": row["project_id"]})
        networks.set_password(conn, row["uuid"], "")
    return Response(None)
