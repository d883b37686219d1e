"""GET /servers/{server_id}/diagnostics (admin; the 2.48 standard format from 2.48) and
GET /servers/{server_id}/topology (2.78+; host NUMA ids and pinning for admins), from what the database keeps
of the server's VMI (compute/diagnostics.py)."""

from __future__ import annotations

from openkeel_compute.api import common
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import SUBRESOURCE_QUERY, read_server
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import diagnostics
from openkeel_compute.policies import consoles as rules


@operation(query=SUBRESOURCE_QUERY, expected=(400, 404, 409, 501))
@wsgi_path_params
def index(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        common.can(req, rules.DIAGNOSTICS, {"project_id": row["project_id"]})
        diagnostics.check(row)
    if req.version >= (2, 48):
        return diagnostics.standard(row)
    return diagnostics.legacy(row)


@operation(versions="2.78-", query=SUBRESOURCE_QUERY, expected=(404,))
@wsgi_path_params
def topology(req, server_id):
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
    target = {"project_id": row["project_id"]}
    common.can(req, rules.TOPOLOGY % "index", target)
    show_host = common.can(req, rules.TOPOLOGY % "host:index", target, fatal=False)
    return diagnostics.topology(row, show_host=bool(show_host))
