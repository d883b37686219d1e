"""/servers/{server_id}/tags (+ /{tag}), from 2.26, as Nova 34.0.0 answers.

Nova checks the rule against the server's project before it looks at the server itself, so
another project's server is a 403 here (not a 404), and a server that never existed "has no
mapping to a cell"."""

from __future__ import annotations

import re
from typing import Any

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import wsgi_path_params
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.compute import errors
from openkeel_compute.compute.instances import instance_tags, store
from openkeel_compute.policies import servers as rules

TAG: dict[str, Any] = {"type": "string", "pattern": "^[^,/]*$", "minLength": 1, "maxLength": 60}
UPDATE_ALL = {"title": "Server tags", "type": "object",
              "properties": {"tags": {"type": "array", "items": TAG, "maxItems": instance_tags.MAX_TAGS}},
              "required": ["tags"], "additionalProperties": False}
UPDATE = {"title": "Server tag", "type": "null"}
_TAG_PATTERN = re.compile(TAG["pattern"])
_TAG_STATES = frozenset({"active", "paused", "suspended", "stopped"})
_NO_BODY = "text/html; charset=UTF-8"


def _server(conn, req, server_id: str, rule: str, *, action: str | None = None) -> dict:
    """The rule on the server's project first (as Nova does with its mapping), then the server."""
    try:
        # a write (action given) locks the server's row: parallel tag writes take turns
        row = store.get(conn, server_id, read_deleted="yes", for_update=action is not None)
    except errors.InstanceNotFound:
        raise faults.NotFound(f"Instance {server_id} has no mapping to a cell.") from None
    common.can(req, rules.SERVER_TAGS % rule, {"project_id": row["project_id"]})
    if row["deleted"]:
        raise errors.InstanceNotFound(server_id)
    if action is not None and row["vm_state"] not in _TAG_STATES:
        raise errors.InstanceInvalidState(action, row["uuid"], "vm_state", row["vm_state"])
    return row


@operation(versions="2.26-", expected=(404,))
@wsgi_path_params
def index(req, server_id):
    with common.read(req) as conn:
        row = _server(conn, req, server_id, "index")
        return {"tags": store.tags_of(conn, row["uuid"])}


@operation(versions="2.26-", success=204, expected=(404,))
@wsgi_path_params
def show(req, server_id, tag):
    with common.read(req) as conn:
        row = _server(conn, req, server_id, "show")
        if tag not in store.tags_of(conn, row["uuid"]):
            raise faults.NotFound(f"Server {server_id} has no tag '{tag}'")
    return Response(None)


@operation(versions="2.26-", body={"2.26-": UPDATE}, success=201, expected=(400, 404, 409))
@wsgi_path_params
def update(req, server_id, tag):
    with common.write(req) as conn:
        row = _server(conn, req, server_id, "update", action="update tag")
        if not _TAG_PATTERN.search(tag) or not 1 <= len(tag) <= TAG["maxLength"]:
            raise faults.BadRequest(f"Tag '{tag}' is invalid. It must be a non empty string without characters "
                                    f"'/' and ','. Validation error message: {_tag_error(tag)}")
        if len(store.tags_of(conn, row["uuid"])) >= instance_tags.MAX_TAGS:
            raise faults.BadRequest(f"The number of tags exceeded the per-server limit {instance_tags.MAX_TAGS}")
        if not instance_tags.add_tag(conn, row["uuid"], tag):
            return Response(None, status=204, content_type=_NO_BODY)
    location = f"{common.links(req).self_prefix}servers/{server_id}/tags/{tag}"
    return Response(None, status=201, headers={"Location": location}, content_type=_NO_BODY)


def _tag_error(tag: str) -> str:
    if not tag:
        return "'' is too short"
    if len(tag) > TAG["maxLength"]:
        return f"{tag!r} is too long"
    return f"{tag!r} does not match '{TAG['pattern']}'"


@operation(versions="2.26-", body={"2.26-": UPDATE_ALL}, expected=(400, 404, 409))
@wsgi_path_params
def update_all(req, server_id):
    with common.write(req) as conn:
        row = _server(conn, req, server_id, "update_all", action="update tags")
        return {"tags": instance_tags.set_tags(conn, row["uuid"], req.body["tags"])}


@operation(versions="2.26-", success=204, expected=(404, 409))
@wsgi_path_params
def delete(req, server_id, tag):
    with common.write(req) as conn:
        row = _server(conn, req, server_id, "delete", action="delete tag")
        instance_tags.delete_tag(conn, row["uuid"], tag)
    return Response(None)


@operation(versions="2.26-", success=204, expected=(404, 409))
@wsgi_path_params
def delete_all(req, server_id):
    with common.write(req) as conn:
        row = _server(conn, req, server_id, "delete_all", action="delete tags")
        instance_tags.delete_tags(conn, row["uuid"])
    return Response(None)

