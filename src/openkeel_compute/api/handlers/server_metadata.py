"""/servers/{server_id}/metadata (+ /{key}) as Nova 34.0.0 answers."""

from __future__ import annotations

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.handlers.server_common import read_server
from openkeel_compute.api.schemas.metadata import CREATE, UPDATE, UPDATE_ALL
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import errors, preconditions, quotas
from openkeel_compute.compute.instances import instance_metadata, store
from openkeel_compute.policies import servers as rules

QUERY = {"2.0-2.101": {"type": "object", "properties": {}, "additionalProperties": True},
         "2.102-": {"type": "object", "properties": {}, "additionalProperties": False}}


def _read(req, server_id: str, rule: str, *, lock: bool = False):
    def run(conn):
        row = read_server(conn, req, server_id, for_update=lock)
        common.can(req, rules.SERVER_METADATA % rule, {"project_id": row["project_id"]})
        return row
    return run


def _change(req, server_id: str, rule: str, metadata: dict[str, str], *, replace: bool, action: str) -> dict:
    with common.write(req) as conn:
        row = _read(req, server_id, rule, lock=True)(conn)
        try:
            preconditions.check(action, row, is_admin=bool(req.context.is_admin))
        except errors.InstanceInvalidState as exc:
            # Nova names every refused metadata change "update metadata"
            raise errors.InstanceInvalidState("update metadata", exc.instance_uuid, exc.attr, exc.state) from None
        merged = dict(metadata) if replace else {**store.metadata_of(conn, row["uuid"]), **metadata}
        # the caller's metadata_items quota, as Nova checks it on every change
        quotas.check_metadata_and_files(conn, common.services(req).conf, req.context.project_id,
                                        req.context.user_id, merged, None)
        instance_metadata.set_metadata(conn, row["uuid"], merged)
    return merged


@operation(query=QUERY, expected=(404,))
@wsgi_path_params
def index(req, server_id):
    with common.read(req) as conn:
        row = _read(req, server_id, "index")(conn)
        return {"metadata": store.metadata_of(conn, row["uuid"])}


@operation(query=QUERY, expected=(404,))
@wsgi_path_params
def show(req, server_id, key):
    with common.read(req) as conn:
        row = _read(req, server_id, "show")(conn)
        metadata = store.metadata_of(conn, row["uuid"])
    if key not in metadata:
        raise faults.NotFound("Metadata item was not found")
    return {"meta": {key: metadata[key]}}


@operation(body={"2.0-": CREATE}, expected=(400, 403, 404, 409))
@wsgi_path_params
def create(req, server_id):
    return {"metadata": _change(req, server_id, "create", req.body["metadata"], replace=False,
                                action="update metadata")}


@operation(body={"2.0-": UPDATE_ALL}, expected=(400, 403, 404, 409))
@wsgi_path_params
def update_all(req, server_id):
    return {"metadata": _change(req, server_id, "update_all", req.body["metadata"], replace=True,
                                action="update metadata")}


@operation(body={"2.0-": UPDATE}, expected=(400, 403, 404, 409))
@wsgi_path_params
def update(req, server_id, key):
    meta = req.body["meta"]
    with common.read(req) as conn:
        _read(req, server_id, "update")(conn)
    if key not in meta:
        raise faults.BadRequest("Request body and URI mismatch")
    _change(req, server_id, "update", meta, replace=False, action="update metadata")
    return {"meta": meta}


@operation(success=204, expected=(404, 409))
@wsgi_path_params
def delete(req, server_id, key):
    with common.write(req) as conn:
        row = _read(req, server_id, "delete", lock=True)(conn)
        metadata = store.metadata_of(conn, row["uuid"])
        if key not in metadata:
            raise faults.NotFound("Metadata item was not found")
        preconditions.check("delete metadata", row, is_admin=bool(req.context.is_admin))
        if not instance_metadata.delete_metadata_item(conn, row["uuid"], key):  # a parallel delete won
            raise faults.NotFound("Metadata item was not found")
    return Response(None)
