"""GET /servers/{server_id}/os-volume_attachments and /os-volume_attachments/{volume_id}: the server's
volumes, as Nova 34.0.0 answers them, from the server's block devices (block_device_mapping) alone:
Cinder is not asked.

Each attachment shows the volume's id (as ``id`` too before 2.89), the server's, and the device name
when there is one; ``tag`` from 2.70, ``delete_on_termination`` from 2.79, ``attachment_id`` and
``bdm_uuid`` from 2.89 (which then leaves out a mapping without a Cinder attachment, as Nova does).
The list takes ``limit`` and ``offset`` (unknown query parameters are refused from 2.75); a volume the
server does not have is "Instance <server> is not attached to volume <volume>" (404).
"""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import read_server
from openkeel_compute.api.wsgi import operation
from openkeel_compute.compute import block_device_rows
from openkeel_compute.policies import server_subresources as rules

_NON_NEGATIVE = {"type": "string", "pattern": "^[0-9]*$"}  # Nova's non_negative_integer
_PAGES = {"limit": {"type": "array", "items": _NON_NEGATIVE}, "offset": {"type": "array", "items": _NON_NEGATIVE}}
INDEX_QUERY = {"2.0-2.74": {"type": "object", "properties": _PAGES, "additionalProperties": True},
               "2.75-": {"type": "object", "properties": _PAGES, "additionalProperties": False}}
SHOW_QUERY = {"2.0-2.101": {"type": "object", "properties": {}, "additionalProperties": True},
              "2.102-": {"type": "object", "properties": {}, "additionalProperties": False}}


def view(req, bdm: dict) -> dict:
    """One attachment as Nova's _translate_attachment_detail_view shows it at the request's version."""
    ids = req.version >= (2, 89)
    out: dict = {} if ids else {"id": bdm["volume_id"]}
    out.update(volumeId=bdm["volume_id"], serverId=bdm["instance_uuid"])
    if bdm.get("device_name"):
        out["device"] = bdm["device_name"]
    if req.version >= (2, 70):
        out["tag"] = bdm.get("tag")
    if req.version >= (2, 79):
        out["delete_on_termination"] = bool(bdm.get("delete_on_termination"))
    if ids:
        out.update(attachment_id=bdm.get("attachment_id"), bdm_uuid=bdm["uuid"])
    return out


def _last_int(req, name: str) -> int:
    return common.query_int(req, name) or 0  # Nova's 400 for what int() refuses (a lone newline passes the schema)


def _volumes(req, server_id: str, rule: str) -> tuple[dict, list[dict]]:
    with common.read(req) as conn:
        row = read_server(conn, req, server_id)
        bdms = [b for b in block_device_rows.of(conn, row["uuid"]) if b["volume_id"]]
    common.can(req, rules.VOLUME_ATTACHMENTS % rule, {"project_id": row["project_id"]})
    if req.version >= (2, 89):
        bdms = [b for b in bdms if b["attachment_id"]]
    return row, bdms


@operation(query=INDEX_QUERY, expected=(404,))
@wsgi_path_params
def index(req, server_id):
    _row, bdms = _volumes(req, server_id, "index")
    max_limit = common.services(req).conf.api.max_limit
    limit = min(_last_int(req, "limit") or max_limit, max_limit)
    offset = _last_int(req, "offset")  # read after limit, as Nova's pagination reads them
    return {"volumeAttachments": [view(req, b) for b in bdms[offset:offset + limit]]}


@operation(query=SHOW_QUERY, expected=(404,))
@wsgi_path_params
def show(req, server_id, volume_id):
    _row, bdms = _volumes(req, server_id, "show")
    found = next((b for b in bdms if b["volume_id"] == volume_id), None)
    if found is None:
        raise faults.NotFound(f"Instance {server_id} is not attached to volume {volume_id}")
    return {"volumeAttachment": view(req, found)}
