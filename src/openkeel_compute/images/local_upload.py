"""Image creation and upload for the development image service (images/local.py), as Glance v2 takes them.

``POST /v2/images`` makes a ``queued`` image record (Glance's create: base properties and custom ones, no
data); ``PUT /v2/images/{id}/file`` streams the data into ``<dir>/<id>.img``: the image is ``saving`` while it
comes and ``active`` once it is all there, with what Glance computes (size, MD5 checksum, SHA-512 hash,
virtual_size from the header). An upload that breaks off puts the image back to ``queued`` with no data, as
Glance does. These are the calls Nova's snapshot makes, and those of ``openstack image create --file``.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import time
import uuid
from typing import Any

_CHUNK = 1 << 20
# Glance's base properties a create may set; the others are Glance's to compute.
_SETTABLE = ("name", "visibility", "protected", "os_hidden", "min_ram", "min_disk", "tags", "container_format",
             "disk_format", "id")
_COMPUTED = ("status", "checksum", "os_hash_algo", "os_hash_value", "size", "virtual_size", "created_at",
             "updated_at", "self", "file", "schema", "locations", "direct_url", "owner", "stores")
DISK_FORMATS = ("ami", "ari", "aki", "vhd", "vhdx", "vmdk", "raw", "qcow2", "vdi", "iso", "ploop")
CONTAINER_FORMATS = ("ami", "ari", "aki", "bare", "ovf", "ova", "docker", "compressed")


def _owner(environ) -> str | None:
    """The project of a noauth2 token (``user:project``), as the owner Glance gives the caller's image."""
    token = environ.get("HTTP_X_AUTH_TOKEN") or ""
    project = environ.get("HTTP_X_PROJECT_ID") or (token.split(":", 1)[1] if ":" in token else "")
    return project or None


def create(root: pathlib.Path, environ, start_response, *, json_answer, error, save, now) -> list[bytes]:
    try:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(size) or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return error(start_response, 400, "Bad Request", "Malformed JSON in request body.")
    for name in body:
        if name in _COMPUTED or name.startswith("_"):
            return error(start_response, 403, "Forbidden", f"Attribute '{name}' is read-only.")
    for name, allowed in (("disk_format", DISK_FORMATS), ("container_format", CONTAINER_FORMATS)):
        if body.get(name) is not None and body[name] not in allowed:
            return error(start_response, 400, "Bad Request",
                         f"Invalid value '{body[name]}' for parameter '{name}'")
    for name, value in body.items():
        if name not in _SETTABLE and value is not None and not isinstance(value, str):
            return error(start_response, 400, "Bad Request",
                         f"Provided object does not match schema 'image': {value!r} is not of type 'string'")
    image_id = str(body.get("id") or uuid.uuid4())
    try:
        uuid.UUID(image_id)
    except ValueError:
        return error(start_response, 400, "Bad Request", f"Invalid id: {image_id}")
    if (root / f"{image_id}.json").exists():
        return error(start_response, 409, "Conflict", f"Image with identifier {image_id} already exists!")
    stamp = now()
    record: dict[str, Any] = {
        "id": image_id, "name": None, "status": "queued", "visibility": "shared", "protected": False,
        "os_hidden": False, "owner": _owner(environ), "checksum": None, "os_hash_algo": None, "os_hash_value": None,
        "size": None, "virtual_size": None, "disk_format": None, "container_format": None, "min_ram": 0,
        "min_disk": 0, "tags": [], "created_at": stamp, "updated_at": stamp, "self": f"/v2/images/{image_id}",
        "file": f"/v2/images/{image_id}/file", "schema": "/v2/schemas/image"}
    record.update({k: v for k, v in body.items() if k != "id"})
    record["_made_ns"] = time.time_ns()
    root.mkdir(parents=True, exist_ok=True)
    save(root, record)
    return json_answer(start_response, "201 Created", {k: v for k, v in record.items() if not k.startswith("_")})


def upload(root: pathlib.Path, record: dict[str, Any], environ, start_response, *, error, save, now, sniff
           ) -> list[bytes]:
    if record.get("status") != "queued":
        return error(start_response, 409, "Conflict",
                     f"Image status transition from {record.get('status')} to saving is not allowed")
    if not record.get("disk_format") or not record.get("container_format"):
        return error(start_response, 400, "Bad Request",
                     "Properties disk_format, container_format must be set prior to saving data.")
    target = root / f"{record['id']}.img"
    save(root, dict(record, status="saving", updated_at=now()))
    md5, sha512, written = hashlib.md5(usedforsecurity=False), hashlib.sha512(), 0
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    chunked = (environ.get("HTTP_TRANSFER_ENCODING") or "").lower() == "chunked"
    try:
        with target.open("wb") as f:
            for chunk in _chunks(stream, int(length) if length and not chunked else None, chunked):
                f.write(chunk)
                md5.update(chunk)
                sha512.update(chunk)
                written += len(chunk)
    except (OSError, ValueError) as exc:
        target.unlink(missing_ok=True)
        save(root, dict(record, status="queued", updated_at=now()))
        return error(start_response, 400, "Bad Request", f"The upload was cut off: {exc}")
    if length and not chunked and written != int(length):
        target.unlink(missing_ok=True)
        save(root, dict(record, status="queued", updated_at=now()))
        return error(start_response, 400, "Bad Request", "The upload was cut off before its Content-Length.")
    current = json.loads((root / f"{record['id']}.json").read_text()) if (root / f"{record['id']}.json").exists() \
        else None
    if current is None:  # deleted while it was saving: the data goes too (Glance answers 410)
        target.unlink(missing_ok=True)
        return error(start_response, 410, "Gone", "Image was deleted while it was being saved.")
    _fmt, virtual_size = sniff(target)
    current.update(status="active", size=written, checksum=md5.hexdigest(), os_hash_algo="sha512",
                   os_hash_value=sha512.hexdigest(), virtual_size=virtual_size, updated_at=now(), _path=str(target))
    save(root, current)
    start_response("204 No Content", [])
    return []


def _chunks(stream, length: int | None, chunked: bool):
    if chunked:  # a WSGI server that leaves chunked bodies to the application (wsgiref does)
        while True:
            line = stream.readline()
            if not line:
                raise ValueError("the chunked body ended early")
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                stream.readline()
                return
            data = stream.read(size)
            if len(data) != size:
                raise ValueError("a chunk ended early")
            stream.readline()
            yield data
    elif length is not None:
        left = length
        while left > 0:
            data = stream.read(min(_CHUNK, left))
            if not data:
                return
            left -= len(data)
            yield data
    else:
        while data := stream.read(_CHUNK):
            yield data


def add_member(root: pathlib.Path, record: dict[str, Any], environ, start_response, *, json_answer, error, save,
               now) -> list[bytes]:
    """``POST /v2/images/{id}/members`` ``{"member": project}``: a shared image's member, ``pending``."""
    try:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(size) or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("member"), str):
        return error(start_response, 400, "Bad Request", "Member to be added not specified")
    if record.get("visibility") != "shared":
        return error(start_response, 403, "Forbidden", "Only shared images have members.")
    members = list(record.get("_members") or [])
    if any(m["member_id"] == body["member"] for m in members):
        return error(start_response, 409, "Conflict", f"Member {body['member']} already has membership on image "
                                                      f"{record['id']}")
    stamp = now()
    member = {"image_id": record["id"], "member_id": body["member"], "status": "pending", "created_at": stamp,
              "updated_at": stamp, "schema": "/v2/schemas/member"}
    save(root, dict(record, _members=[*members, member]))
    return json_answer(start_response, "200 OK", member)
