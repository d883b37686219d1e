"""/os-volumes and /os-snapshots: Nova's proxies to Cinder, up to 2.35 (404 after, as Nova's
MAX_PROXY_API_SUPPORT_VERSION), answered as Nova 34.0.0 answers them.

Each call goes to Cinder as the caller (volume_common.calls). Cinder's volume is shown under Nova's
names (``displayName``, ``availabilityZone``, ``createdAt``, ``volumeType``, ``snapshotId``, one entry
in ``attachments`` for the first server the volume is attached to, ``[{}]`` when none), a snapshot
likewise (``volumeId``, ``size``). Lists are Cinder's whole list cut by ``offset`` and ``limit`` (at
most ``[api] max_limit``), as Nova's ``common.limited``. A volume create with ``snapshot_id`` reads the
snapshot first (its size when none is given); ``Location`` names the new volume.

Where Nova 34.0.0 answers its generic 500 because a Cinder error is not among the handler's expected
ones (a snapshot of a volume Cinder does not know, a snapshot Cinder refuses, a volume type Cinder
does not know), OpenKeel answers what the error means: 404 "Volume … could not be found.", 400
"Invalid input received: …", 404 with Cinder's words (docs/volumes.md).

Without Cinder ([cinder] not configured) there are no volumes and no snapshots: the lists are empty,
a show or delete is Nova's 404, a create is refused (400).
"""

from __future__ import annotations

from oslo_utils import strutils

from openkeel_compute.api import common, faults
from openkeel_compute.api.handlers import volume_common, wsgi_path_params
from openkeel_compute.api.wsgi import Response, operation
from openkeel_compute.policies import volumes as rules
from openkeel_compute.volume import errors as volume_errors

VERSIONS = "-2.35"  # Nova's MAX_PROXY_API_SUPPORT_VERSION
_NON_NEGATIVE = {"type": "array", "items": {"type": "string", "pattern": "^[0-9]*$"}}
LIST_QUERY = {"2.0-2.35": {"type": "object", "properties": {"limit": _NON_NEGATIVE, "offset": _NON_NEGATIVE},
                           "additionalProperties": True}}
SHOW_QUERY = {"2.0-2.35": {"type": "object", "properties": {}, "additionalProperties": True}}
VOLUME_BODY = {"2.0-2.35": {
    "type": "object",
    "properties": {"volume": {
        "type": "object",
        "properties": {
            "volume_type": {"type": "string"},
            "metadata": {"type": "object", "properties": {}, "additionalProperties": True},
            "snapshot_id": {"type": "string"},
            "size": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1},
            "availability_zone": {"type": "string"},
            "display_name": {"type": "string"},
            "display_description": {"type": "string"},
        },
        "required": ["size"],
        "additionalProperties": False,
    }},
    "required": ["volume"],
    "additionalProperties": False,
}}
_BOOLEAN = {"type": ["boolean", "string"], "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES",
                                                    "Yes", "yes", False, "False", "FALSE", "false", "0", "OFF",
                                                    "Off", "off", "NO", "No", "no"]}
SNAPSHOT_BODY = {"2.0-2.35": {
    "type": "object",
    "properties": {"snapshot": {
        "type": "object",
        "properties": {"volume_id": {"type": "string"}, "force": _BOOLEAN, "display_name": {"type": "string"},
                       "display_description": {"type": "string"}},
        "required": ["volume_id"],
        "additionalProperties": False,
    }},
    "required": ["snapshot"],
    "additionalProperties": False,
}}
NO_CINDER = ("Invalid input received: this cloud has no block storage service ([cinder] is not configured).")


def volume_view(vol: dict) -> dict:
    """Cinder's volume as Nova's _translate_volume_detail_view shows it."""
    out = {"id": vol["id"], "status": vol.get("status"), "size": vol.get("size"),
           "availabilityZone": vol.get("availability_zone"), "createdAt": vol.get("created_at")}
    servers: dict[str, dict] = {}
    for attachment in vol.get("attachments") or []:
        servers[attachment.get("server_id")] = attachment  # Nova's OrderedDict: first server, its last entry
    if servers:
        server_id, attachment = next(iter(servers.items()))
        shown = {"id": vol["id"], "volumeId": vol["id"], "serverId": server_id}
        if attachment.get("device"):
            shown["device"] = attachment["device"]
        out["attachments"] = [shown]
    else:
        out["attachments"] = [{}]
    out.update(displayName=vol.get("name"), displayDescription=vol.get("description"),
               volumeType=vol.get("volume_type"), snapshotId=vol.get("snapshot_id"),
               metadata=vol.get("metadata") or {})
    return out


def snapshot_view(snap: dict) -> dict:
    """Cinder's snapshot as Nova's _translate_snapshot_detail_view shows it."""
    return {"id": snap["id"], "volumeId": snap.get("volume_id"), "status": snap.get("status"),
            "size": snap.get("size"), "createdAt": snap.get("created_at"), "displayName": snap.get("name"),
            "displayDescription": snap.get("description")}


def _limited(req, items: list) -> list:
    """Nova's common.limited: ``offset`` and ``limit`` (0 or absent: [api] max_limit)."""
    def last(name: str) -> int:
        return common.query_int(req, name) or 0

    max_limit = common.services(req).conf.api.max_limit
    limit = min(max_limit, last("limit") or max_limit)  # limit, page_size, offset: Nova's order
    last("page_size")
    offset = last("offset")
    return items[offset:offset + limit]


def _can(req, rule: str) -> None:
    common.can(req, rules.VOLUMES % rule, {"project_id": req.context.project_id})


def _cinder(req, call, *args, **kwargs):
    try:
        return call(volume_common.calls(req), *args, **kwargs)
    except volume_errors.VolumeError as exc:
        raise volume_common.answer(exc) from None


# -- os-volumes ----------------------------------------------------------------------------------
def _volumes(req, rule: str) -> dict:
    _can(req, rule)
    if not volume_common.enabled(req):
        return {"volumes": []}
    found = _cinder(req, lambda c: c.list_volumes())
    return {"volumes": [volume_view(v) for v in _limited(req, found)]}


@operation(versions=VERSIONS, query=LIST_QUERY)
def volumes_index(req):
    return _volumes(req, "list")


@operation(versions=VERSIONS, query=LIST_QUERY)
def volumes_detail(req):
    return _volumes(req, "detail")


@operation(versions=VERSIONS, query=SHOW_QUERY, expected=(404,))
@wsgi_path_params
def volumes_show(req, volume_id):
    _can(req, "show")
    if not volume_common.enabled(req):
        raise faults.NotFound(volume_errors.VolumeNotFound(volume_id).message)
    return {"volume": volume_view(_cinder(req, lambda c: c.get_volume(volume_id)))}


@operation(versions=VERSIONS, success=202, expected=(400, 404))
@wsgi_path_params
def volumes_delete(req, volume_id):
    _can(req, "delete")
    if not volume_common.enabled(req):
        raise faults.NotFound(volume_errors.VolumeNotFound(volume_id).message)
    _cinder(req, lambda c: c.delete_volume(volume_id))


@operation(versions=VERSIONS, body=VOLUME_BODY, expected=(400, 403, 404))
def volumes_create(req):
    _can(req, "create")
    asked = req.body["volume"]
    if not volume_common.enabled(req):
        raise faults.BadRequest(NO_CINDER)
    snapshot = None
    if asked.get("snapshot_id") is not None:
        snapshot = _cinder(req, lambda c: c.get_snapshot(asked["snapshot_id"]))
    size = asked.get("size")
    if size is None and snapshot is not None:  # the schema requires a size: kept as Nova keeps it
        size = snapshot.get("size")
    made = _cinder(req, lambda c: c.create_volume(
        int(size), asked.get("display_name"), description=asked.get("display_description"),
        snapshot_id=snapshot["id"] if snapshot else None, volume_type=asked.get("volume_type"),
        availability_zone=asked.get("availability_zone"), metadata=asked.get("metadata")))
    return Response({"volume": volume_view(made)}, headers={"Location": f"{req.url}/{made['id']}"})


# -- os-snapshots --------------------------------------------------------------------------------
def _snapshots(req, rule: str) -> dict:
    _can(req, rule)
    if not volume_common.enabled(req):
        return {"snapshots": []}
    found = _cinder(req, lambda c: c.list_snapshots())
    return {"snapshots": [snapshot_view(s) for s in _limited(req, found)]}


@operation(versions=VERSIONS, query=LIST_QUERY)
def snapshots_index(req):
    return _snapshots(req, "snapshots:list")


@operation(versions=VERSIONS, query=LIST_QUERY)
def snapshots_detail(req):
    return _snapshots(req, "snapshots:detail")


@operation(versions=VERSIONS, query=SHOW_QUERY, expected=(404,))
@wsgi_path_params
def snapshots_show(req, snapshot_id):
    _can(req, "snapshots:show")
    if not volume_common.enabled(req):
        raise faults.NotFound(volume_errors.SnapshotNotFound(snapshot_id).message)
    return {"snapshot": snapshot_view(_cinder(req, lambda c: c.get_snapshot(snapshot_id)))}


@operation(versions=VERSIONS, success=202, expected=(404,))
@wsgi_path_params
def snapshots_delete(req, snapshot_id):
    _can(req, "snapshots:delete")
    if not volume_common.enabled(req):
        raise faults.NotFound(volume_errors.SnapshotNotFound(snapshot_id).message)
    _cinder(req, lambda c: c.delete_snapshot(snapshot_id))


@operation(versions=VERSIONS, body=SNAPSHOT_BODY, expected=(400, 403, 404))
def snapshots_create(req):
    _can(req, "snapshots:create")
    asked = req.body["snapshot"]
    force = strutils.bool_from_string(asked.get("force", False), strict=True)
    if not volume_common.enabled(req):
        raise faults.NotFound(volume_errors.VolumeNotFound(asked["volume_id"]).message)
    made = _cinder(req, lambda c: c.create_snapshot(asked["volume_id"], force, asked.get("display_name"),
                                                   asked.get("display_description")))
    return {"snapshot": snapshot_view(made)}
