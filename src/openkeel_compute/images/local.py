"""A small image service for development: local image files served with Glance v2's API shape.

It answers the calls OpenKeel makes of Glance — ``GET /v2/images/{id}`` and its ``/file`` at boot;
``GET /v2/images`` (filters, newest first, ``limit``/``marker`` pages), ``DELETE /v2/images/{id}`` and
``PATCH /v2/images/{id}`` (JSON-patch of properties) for the compute API's image proxy — and the
version document, from a directory:
every image is ``<dir>/<id>.json`` (Glance's image body) beside the file it names. Images are added
with ``register``; it reads the file to fill in what Glance computes (size, checksum, os_hash_value,
disk_format from the file's header, virtual_size). Point ``[glance] api_servers`` at it and the
same client that talks to a real Glance reads from it::

    python -m openkeel_compute.images.local register --dir var/images cirros.qcow2 --name cirros
    python -m openkeel_compute.images.local serve --dir var/images --port 9292

There is no authentication (like a Glance deployed with ``flavor = `` in ``[paste_deploy]``): any
token, or none, sees every image. It is for development only; production uses a real Glance.
"""

from __future__ import annotations

import argparse
import datetime
import errno
import hashlib
import json
import operator
import os
import pathlib
import re
import shutil
import struct
import sys
import uuid
from collections.abc import Iterable
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs, urlencode
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from openkeel_compute.images import local_upload

_IMAGE_PATH = re.compile(r"^/v2/images/([0-9A-Za-z-]{1,64})(/file|/members)?/?$")
_CHUNK = 1 << 20


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sniff(path: pathlib.Path) -> tuple[str, int]:
    """(disk_format, virtual_size) from the file's header: qcow2 by its magic, iso by its signature, else raw."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(32)
        if head[:4] == b"QFI\xfb" and len(head) >= 32:
            return "qcow2", struct.unpack(">Q", head[24:32])[0]
        f.seek(0x8001)
        if f.read(5) == b"CD001":
            return "iso", size
    return "raw", size


# The image every development start has (scripts/serve): a small raw disk written here, no download.
DEFAULT_IMAGE_NAME = "openkeel-tiny"
DEFAULT_IMAGE_ID = "8a5f3d2e-7c41-4b6a-9e0d-2f1c6b7a9e30"
_TINY_SECTORS = 4096  # 2 MiB


def write_tiny_disk(path: pathlib.Path) -> None:
    """A 2 MiB raw disk: an MBR with one Linux partition (sectors 2048 to the end) and nothing in it.

    It is a valid disk image for every importer (raw needs no conversion) and small enough to write
    on every first start; it boots nothing. Real guests need a real image (register one).
    """
    mbr = bytearray(512)
    start, count = 2048, _TINY_SECTORS - 2048
    # status, CHS first (unused: 0xfe 0xff 0xff), type 0x83, CHS last, LBA first, sector count
    mbr[446:462] = bytes([0x00, 0xFE, 0xFF, 0xFF, 0x83, 0xFE, 0xFF, 0xFF]) + struct.pack("<II", start, count)
    mbr[440:444] = struct.pack("<I", 0x4F4B4545)  # disk signature
    mbr[510:512] = b"\x55\xaa"
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(mbr)
        f.truncate(_TINY_SECTORS * 512)
    os.replace(tmp, path)


def ensure_default_image(directory: pathlib.Path) -> dict[str, Any]:
    """Register the tiny image as ``openkeel-tiny`` unless it is there; its Glance body either way."""
    record = _load(directory, DEFAULT_IMAGE_ID)
    if record is not None and pathlib.Path(record.get("_path", "")).is_file():
        return _public(record)
    directory.mkdir(parents=True, exist_ok=True)
    disk = directory / f"{DEFAULT_IMAGE_NAME}.raw"
    write_tiny_disk(disk)
    return register(directory, disk, name=DEFAULT_IMAGE_NAME, image_id=DEFAULT_IMAGE_ID,
                    properties={"hw_disk_bus": "virtio", "description": "2 MiB empty raw disk for development"})


def register(directory: pathlib.Path, source: pathlib.Path, *, name: str | None = None, image_id: str | None = None,
             disk_format: str | None = None, container_format: str = "bare", min_ram: int = 0, min_disk: int = 0,
             visibility: str = "public", status: str = "active", properties: dict[str, str] | None = None,
             copy: bool = False) -> dict[str, Any]:
    """Add ``source`` to the image directory and return its Glance v2 body."""
    directory.mkdir(parents=True, exist_ok=True)
    image_id = image_id or str(uuid.uuid4())
    uuid.UUID(image_id)
    source = source.resolve()
    if copy:
        target = directory / f"{image_id}.img"
        shutil.copyfile(source, target)
        source = target
    sniffed, virtual_size = sniff(source)
    md5, sha512 = hashlib.md5(usedforsecurity=False), hashlib.sha512()
    with source.open("rb") as f:
        while chunk := f.read(_CHUNK):
            md5.update(chunk)
            sha512.update(chunk)
    now = _now()
    body: dict[str, Any] = {
        "id": image_id, "name": name if name is not None else source.name, "status": status,
        "visibility": visibility, "protected": False, "os_hidden": False, "owner": None,
        "checksum": md5.hexdigest(), "os_hash_algo": "sha512", "os_hash_value": sha512.hexdigest(),
        "size": source.stat().st_size, "virtual_size": virtual_size,
        "disk_format": disk_format or sniffed, "container_format": container_format,
        "min_ram": min_ram, "min_disk": min_disk, "tags": [], "created_at": now, "updated_at": now,
        "self": f"/v2/images/{image_id}", "file": f"/v2/images/{image_id}/file", "schema": "/v2/schemas/image",
    }
    for key, value in (properties or {}).items():
        body[key] = value
    record = dict(body, _path=str(source))
    tmp = directory / f".{image_id}.json.tmp"
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(tmp, directory / f"{image_id}.json")
    return body


def _load(directory: pathlib.Path, image_id: str) -> dict[str, Any] | None:
    path = directory / f"{image_id}.json"
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def _public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if not k.startswith("_")}


# Glance's list filters that compare a field with a value (``id`` and ``name`` also take ``in:a,b``);
# any other key but the paging ones is a custom property, compared with the image's property.
_FILTERS = ("id", "name", "status", "visibility", "disk_format", "container_format", "owner", "min_ram",
            "min_disk")
_PAGING = ("limit", "marker", "sort_key", "sort_dir", "sort", "page_size")
_OPERATORS = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le, "eq": operator.eq,
              "neq": operator.ne}
DEFAULT_LIMIT, MAX_LIMIT = 25, 1000  # Glance's limit_param_default and api_limit_max


def _filters(query: str) -> dict[str, set[str]]:
    wanted = {}
    for key, values in parse_qs(query).items():
        if key in _PAGING or key in ("created_at", "updated_at") or not values:
            continue
        value = values[-1]
        wanted[key] = set(value[3:].split(",")) if value.startswith("in:") and key in ("id", "name") else {value}
    return wanted


class _BadFilter(ValueError):
    """A list filter Glance would refuse (400)."""


def _moment(text: str) -> datetime.datetime:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise _BadFilter(f"Invalid date format: {text}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _time_filters(query: str) -> list[tuple[str, Any, datetime.datetime]]:
    """``created_at``/``updated_at`` filters: ``[op:]time`` with Glance's operators (gt, gte, lt, lte, eq, neq)."""
    found = []
    for field in ("created_at", "updated_at"):
        for value in parse_qs(query).get(field, []):
            name, sep, rest = value.partition(":")
            test = _OPERATORS.get(name) if sep else None
            found.append((field, test or operator.eq, _moment(rest if test else value)))
    return found


def _matches(record: dict[str, Any], wanted: dict[str, set[str]], times) -> bool:
    if not all(str(record.get(key)) in values for key, values in wanted.items()):
        return False
    return all(test(_moment(record.get(field) or "1970-01-01T00:00:00Z"), moment) for field, test, moment in times)


def _json(start_response, status: str, body: Any) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def _error(start_response, code: int, title: str, message: str) -> list[bytes]:
    # Glance's error pages are webob's: a short HTML body whatever the Accept header says.
    data = (f"<html>\n <head>\n  <title>{code} {title}</title>\n </head>\n <body>\n  <h1>{code} {title}</h1>\n"
            f"  {message}<br /><br />\n\n\n\n </body>\n</html>").encode()
    start_response(f"{code} {title}", [("Content-Type", "text/html; charset=UTF-8"),
                                       ("Content-Length", str(len(data)))])
    return [data]


def _file(path: pathlib.Path) -> Iterable[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            yield chunk


def _list(root: pathlib.Path, query: str, start_response) -> list[bytes]:
    """Glance's list: newest first (created_at, then id, descending), ``limit`` (25 by default, 1000 at
    most) after ``marker``, a ``next`` link while more remain."""
    params = parse_qs(query)
    try:
        limit = int(params.get("limit", [DEFAULT_LIMIT])[-1])
        if limit < 0:
            raise _BadFilter("limit param must be positive")
        wanted, times = _filters(query), _time_filters(query)
    except ValueError as exc:
        reason = str(exc) if isinstance(exc, _BadFilter) else "limit param must be an integer"
        return _error(start_response, 400, "Bad Request", reason)
    records = [r for r in (_load(root, item.stem) for item in root.glob("*.json")) if r is not None]
    # newest first; images made in one second keep the order they were made in (Glance's database keeps
    # the fraction its answers do not show)
    records.sort(key=lambda r: (r.get("created_at") or "", r.get("_made_ns") or 0, r["id"]), reverse=True)
    marker = params.get("marker", [None])[-1]
    if marker is not None:
        ids = [r["id"] for r in records]
        if marker not in ids:
            return _error(start_response, 400, "Bad Request", f"No image found with ID {marker}")
        records = records[ids.index(marker) + 1:]
    matching = [r for r in records if _matches(r, wanted, times)]
    page = matching[:min(limit, MAX_LIMIT)]
    body: dict[str, Any] = {"images": [_public(r) for r in page], "schema": "/v2/schemas/images",
                            "first": "/v2/images"}
    if page and len(matching) > len(page):
        rest = [(k, v) for k, v in parse_qs(query).items() if k != "marker"]
        body["next"] = "/v2/images?" + urlencode([(k, v[-1]) for k, v in rest] + [("marker", page[-1]["id"])])
    return _json(start_response, "200 OK", body)


def _save(root: pathlib.Path, record: dict[str, Any]) -> None:
    tmp = root / f".{record['id']}.json.tmp"
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(tmp, root / f"{record['id']}.json")


def _delete(root: pathlib.Path, record: dict[str, Any], start_response) -> list[bytes]:
    if record.get("protected"):
        return _error(start_response, 403, "Forbidden", f"Image {record['id']} is protected and cannot be deleted.")
    (root / f"{record['id']}.json").unlink(missing_ok=True)
    data = pathlib.Path(record.get("_path", ""))
    if data.parent == root and data.name == f"{record['id']}.img":  # a copy registered with --copy
        data.unlink(missing_ok=True)
    start_response("204 No Content", [])
    return []


# What a PATCH may change besides custom properties; the rest of Glance's base properties are read-only.
_WRITABLE = ("name", "visibility", "protected", "os_hidden", "min_ram", "min_disk", "tags", "container_format",
             "disk_format")
_READ_ONLY = (set(_FILTERS) | {"status", "checksum", "os_hash_algo", "os_hash_value", "size", "virtual_size",
                               "created_at", "updated_at", "self", "file", "schema", "locations", "direct_url",
                               "owner", "stores"}) - set(_WRITABLE)


def _patch(root: pathlib.Path, record: dict[str, Any], environ, start_response) -> list[bytes]:
    """Glance's JSON-patch (application/openstack-images-v2.1-json-patch) of custom properties and the few
    base properties a user may change."""
    try:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        ops = json.loads(environ["wsgi.input"].read(size) or b"[]")
    except ValueError:
        ops = None
    if not isinstance(ops, list):
        return _error(start_response, 400, "Bad Request", "Malformed JSON in request body.")
    changed = dict(record)
    for op in ops:
        kind, name = (op.get("op"), str(op.get("path", "")).lstrip("/")) if isinstance(op, dict) else (None, "")
        if kind not in ("add", "replace", "remove") or not name or "/" in name:
            return _error(start_response, 400, "Bad Request", f"Unable to apply the patch: {op!r}")
        if name in _READ_ONLY or name.startswith("_"):
            return _error(start_response, 403, "Forbidden", f"Attribute '{name}' is read-only.")
        if kind == "remove":
            if name not in changed:
                return _error(start_response, 409, "Conflict", f"Property {name} does not exist.")
            del changed[name]
        elif kind == "replace" and name not in changed:
            return _error(start_response, 409, "Conflict", f"Property {name} does not exist.")
        else:
            changed[name] = op.get("value")
    changed["updated_at"] = _now()
    _save(root, changed)
    return _json(start_response, "200 OK", _public(changed))


def make_app(directory: str | os.PathLike):
    """The WSGI application serving ``directory``."""
    root = pathlib.Path(directory)

    def app(environ, start_response):
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO") or "/"
        if path in ("/", "/versions") and method in ("GET", "HEAD"):
            host = environ.get("HTTP_HOST") or "localhost"
            return _json(start_response, "300 Multiple Choices", {"versions": [
                {"id": "v2.16", "status": "CURRENT", "links": [{"rel": "self", "href": f"http://{host}/v2/"}]}]})
        if path.rstrip("/") == "/v2/images":
            if method == "POST":
                return local_upload.create(root, environ, start_response, json_answer=_json, error=_error,
                                           save=_save, now=_now)
            if method not in ("GET", "HEAD"):
                return _error(start_response, 405, "Method Not Allowed",
                              "The method is not allowed for this resource.")
            return _list(root, environ.get("QUERY_STRING", ""), start_response)
        match = _IMAGE_PATH.match(path)
        if not match:
            return _error(start_response, 404, "Not Found", "The resource could not be found.")
        image_id, want_file, members = match.group(1), match.group(2) == "/file", match.group(2) == "/members"
        if members:
            record = _load(root, image_id)
            if record is None:
                return _error(start_response, 404, "Not Found", f"No image found with ID {image_id}")
            if method == "POST":
                return local_upload.add_member(root, record, environ, start_response, json_answer=_json,
                                               error=_error, save=_save, now=_now)
            if method in ("GET", "HEAD"):
                return _json(start_response, "200 OK", {"members": record.get("_members") or [],
                                                        "schema": "/v2/schemas/members"})
            return _error(start_response, 405, "Method Not Allowed", "The method is not allowed for this resource.")
        allowed = ("GET", "HEAD", "PUT") if want_file else ("GET", "HEAD", "PATCH", "DELETE")
        if method not in allowed:
            return _error(start_response, 405, "Method Not Allowed", "The method is not allowed for this resource.")
        record = _load(root, image_id)
        if record is None:
            return _error(start_response, 404, "Not Found", f"No image found with ID {image_id}")
        if method == "PUT":
            return local_upload.upload(root, record, environ, start_response, error=_error, save=_save, now=_now,
                                       sniff=sniff)
        if method == "DELETE":
            return _delete(root, record, start_response)
        if method == "PATCH":
            return _patch(root, record, environ, start_response)
        if not want_file:
            return _json(start_response, "200 OK", _public(record))
        data = pathlib.Path(record.get("_path") or root / f"{image_id}.img")
        if record.get("status") == "deactivated":
            return _error(start_response, 403, "Forbidden",
                          "The requested image has been deactivated. Image data download is prohibited.")
        if record.get("status") != "active" or not data.exists():
            start_response("204 No Content", [])  # Glance's answer for an image without data
            return []
        headers = [("Content-Type", "application/octet-stream"), ("Content-Length", str(data.stat().st_size))]
        if record.get("checksum"):
            headers.append(("Content-MD5", record["checksum"]))
        start_response("200 OK", headers)
        return [] if method == "HEAD" else _file(data)

    return app


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def serve(directory: str, host: str = "127.0.0.1", port: int = 9292):
    """A threaded server for ``directory``; call ``serve_forever()`` on it."""
    return make_server(host, port, make_app(directory), server_class=_ThreadingServer, handler_class=_QuietHandler)


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openkeel_compute.images.local",
                                     description="Development image service with Glance v2's API shape.")
    sub = parser.add_subparsers(dest="command", required=True)
    reg = sub.add_parser("register", help="add a local image file; prints its id")
    reg.add_argument("--dir", required=True, help="image directory (created when missing)")
    reg.add_argument("file", type=pathlib.Path)
    reg.add_argument("--name")
    reg.add_argument("--id", dest="image_id")
    reg.add_argument("--disk-format", help="default: from the file's header (qcow2, iso, else raw)")
    reg.add_argument("--container-format", default="bare")
    reg.add_argument("--min-ram", type=int, default=0, help="MiB")
    reg.add_argument("--min-disk", type=int, default=0, help="GiB")
    reg.add_argument("--private", action="store_true")
    reg.add_argument("--property", action="append", type=_property, default=[], metavar="KEY=VALUE")
    reg.add_argument("--copy", action="store_true", help="copy the file into the directory instead of referring to it")
    srv = sub.add_parser("serve", help="serve the directory over HTTP")
    srv.add_argument("--dir", required=True)
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=9292, help="default: 9292 (Glance's); 0: any free port")
    args = parser.parse_args(argv)
    if args.command == "register":
        if not args.file.is_file():
            parser.error(f"{args.file}: no such file")
        body = register(pathlib.Path(args.dir), args.file, name=args.name, image_id=args.image_id,
                        disk_format=args.disk_format, container_format=args.container_format,
                        min_ram=args.min_ram, min_disk=args.min_disk,
                        visibility="private" if args.private else "public",
                        properties=dict(args.property), copy=args.copy)
        print(body["id"])
        return 0
    try:
        server = serve(args.dir, args.host, args.port)
    except OSError as exc:
        reason = "already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        print(f"error: cannot listen on {args.host} port {args.port}: {reason} (choose another with --port; 0 "
              "takes any free one)", file=sys.stderr)
        return 1
    print(f"serving {os.path.abspath(args.dir)} on http://{args.host}:{server.server_port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
