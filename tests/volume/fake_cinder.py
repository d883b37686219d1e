"""An in-memory Cinder v3 for tests: volumes, snapshots, volume types and the attachments API
(3.44: create reserved or with a connector, update with the connector, os-complete, delete), os-reimage
(3.68) with the volume-reimaged event posted back to Nova's API as Cinder's volume manager does once the
image is written (``nova``: a callable given the event; ``reimage_result``: its status, None: never), with
Cinder's status changes (available → reserved → attaching → in-use → available), its error bodies
(``{"badRequest": {"message", "code"}}``, ``itemNotFound``) and the NFS backend's connection_info
as measured on Cinder 29.0.0. Every request is recorded (method, path, tokens, microversion header)
so that tests can check who called and how.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import uuid
from wsgiref.simple_server import WSGIRequestHandler, make_server


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class FakeCinder:
    def __init__(self) -> None:
        self.volumes: dict[str, dict] = {}
        self.snapshots: dict[str, dict] = {}
        self.types = [{"id": str(uuid.uuid4()), "name": "okc-nfs"}, {"id": str(uuid.uuid4()), "name": "okc-fake"}]
        self.attachments: dict[str, dict] = {}
        self.requests: list[dict] = []
        self.fail_with: int | None = None
        self.max_snapshots = -1  # Cinder's snapshot quota of the project (-1: unlimited)
        self.page_size = 1000  # Cinder's osapi_max_limit
        self.created_status = "available"  # what a volume created through the API starts as
        self.settles_to = "available"  # ... and, when that is "creating", ends as after ``creating_reads`` reads
        self.creating_reads = 0
        self._settling: dict[str, int] = {}
        self.nova = None  # called with each event Cinder tells Nova (POST /os-server-external-events)
        self.reimage_result: str | None = "completed"  # the status of the volume-reimaged event (None: never)
        self.reimage_delay = 0.2  # seconds Cinder takes to write the image

    # -- data --------------------------------------------------------------------------------
    def volume(self, size=1, status="available", zone="nova", bootable=False, multiattach=False,
               image_metadata=None, **extra) -> dict:
        vol = {"id": str(uuid.uuid4()), "name": extra.pop("name", "vol"), "size": size, "status": status,
               "availability_zone": zone, "bootable": "true" if bootable else "false", "multiattach": multiattach,
               "attachments": [], "volume_type": "okc-nfs", "created_at": "2026-12-05T00:00:00.000000",
               "shared_targets": False, "encrypted": False, "metadata": {}, "snapshot_id": None, **extra}
        vol.setdefault("description", None)
        if image_metadata is not None:
            vol["volume_image_metadata"] = image_metadata
        self.volumes[vol["id"]] = vol
        return vol

    def snapshot(self, volume: dict, size=None, status="available") -> dict:
        snap = {"id": str(uuid.uuid4()), "volume_id": volume["id"], "size": size or volume["size"], "status": status,
                "name": "snap", "description": None, "created_at": "2026-12-05T00:00:00.000000"}
        self.snapshots[snap["id"]] = snap
        return snap

    def connection_info(self, volume_id: str) -> dict:
        kind = self.volumes.get(volume_id, {}).get("driver_volume_type", "nfs")  # a test may name another
        # flat, as Cinder's 3.44 attachments answer it (Nova nests the data under "data" itself)
        return {"driver_volume_type": kind, "export": "127.0.0.1:/srv/okc-nfs", "name": f"volume-{volume_id}",
                "format": "raw", "options": None, "access_mode": "rw", "mount_point_base": "/var/lib/cinder/mnt",
                "attachment_id": None}

    # -- HTTP --------------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        path = environ["PATH_INFO"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        body = json.loads(raw) if raw else None
        self.requests.append({"method": environ["REQUEST_METHOD"], "path": path, "body": body,
                              "query": environ.get("QUERY_STRING", ""),
                              "token": environ.get("HTTP_X_AUTH_TOKEN"),
                              "service_token": environ.get("HTTP_X_SERVICE_TOKEN"),
                              "version": environ.get("HTTP_OPENSTACK_API_VERSION")})
        status, answer = self._answer(environ["REQUEST_METHOD"], path, body)
        data = json.dumps(answer).encode() if answer is not None else b""
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                   ("x-openstack-request-id", "req-fake")]
        start_response(f"{status} X", headers)
        return [data]

    @staticmethod
    def _error(status, kind, message):
        return status, {kind: {"message": message, "code": status}}

    def _answer(self, method, path, body):
        if self.fail_with:
            return self._error(self.fail_with, "computeFault", "The server has either erred or is incapable.")
        parts = path.strip("/").split("/")
        if parts[:1] != ["v3"]:
            return 404, {"error": "not found"}
        collections = ("types", "volumes", "snapshots", "attachments", "limits")
        parts = parts[2:] if len(parts) > 1 and parts[1] not in collections else parts[1:]  # /v3/<project>/...
        if parts == ["limits"] and method == "GET":
            return 200, {"limits": {"rate": [], "absolute": {
                "maxTotalSnapshots": self.max_snapshots, "totalSnapshotsUsed": len(self.snapshots)}}}
        if parts == ["types"] and method == "GET":
            return 200, {"volume_types": self.types}
        if parts[:1] == ["volumes"] and len(parts) == 2 and parts[1] != "detail":
            vol = self.volumes.get(parts[1])
            if vol is None:
                return self._error(404, "itemNotFound", f"Volume {parts[1]} could not be found.")
            if method == "GET":
                if parts[1] in self._settling:
                    self._settling[parts[1]] -= 1
                    if self._settling[parts[1]] < 0:
                        vol["status"] = self.settles_to
                        del self._settling[parts[1]]
                return 200, {"volume": vol}
            if method == "DELETE":
                if vol["status"] not in ("available", "error"):
                    return self._error(400, "badRequest", "Invalid volume: Volume status must be available or "
                                                          "error or error_restoring or error_extending or "
                                                          "error_managing and must not be migrating, attached, "
                                                          "belong to a group, have snapshots, awaiting a transfer, "
                                                          "or be disassociated from snapshots after volume "
                                                          "transfer.")
                del self.volumes[parts[1]]
                return 202, None
        if parts[:1] == ["volumes"] and parts[2:] == ["action"] and method == "POST":
            return self._volume_action(parts[1], body or {})
        if parts == ["volumes"] and method == "POST":
            spec = body["volume"]
            if spec.get("volume_type") and spec["volume_type"] not in [t["name"] for t in self.types]:
                return self._error(404, "itemNotFound",
                                   f"Volume type with name {spec['volume_type']} could not be found.")
            if spec.get("snapshot_id") and spec["snapshot_id"] not in self.snapshots:
                return self._error(404, "itemNotFound", f"Snapshot {spec['snapshot_id']} could not be found.")
            vol = self.volume(size=spec["size"], zone=spec.get("availability_zone") or "nova",
                              bootable=bool(spec.get("imageRef")), name=spec.get("name"),
                              status=self.created_status, description=spec.get("description"),
                              metadata=spec.get("metadata") or {}, snapshot_id=spec.get("snapshot_id"),
                              image_metadata={"image_id": spec["imageRef"]} if spec.get("imageRef") else None)
            vol.update(volume_type=spec.get("volume_type") or "okc-nfs")
            if vol["status"] == "creating":
                self._settling[vol["id"]] = self.creating_reads
            return 202, {"volume": vol}
        if parts in (["volumes", "detail"], ["snapshots", "detail"]) and method == "GET":
            return 200, self._page(parts[0], list((self.volumes if parts[0] == "volumes" else self.snapshots).values()))
        if parts == ["snapshots"] and method == "POST":
            spec = body["snapshot"]
            vol = self.volumes.get(spec["volume_id"])
            if vol is None:
                return self._error(404, "itemNotFound", f"Volume {spec['volume_id']} could not be found.")
            if vol["status"] != "available" and not (spec.get("force") and vol["status"] == "in-use"):
                return self._error(400, "badRequest", f"Invalid volume: Volume {vol['id']} status must be "
                                                      f"available, but current status is: {vol['status']}.")
            snap = self.snapshot(vol, status="creating")
            snap.update(name=spec.get("name"), description=spec.get("description"))
            return 202, {"snapshot": snap}
        if parts[:1] == ["snapshots"] and len(parts) == 2 and method in ("GET", "DELETE"):
            snap = self.snapshots.get(parts[1])
            if snap is None:
                return self._error(404, "itemNotFound", f"Snapshot {parts[1]} could not be found.")
            if method == "DELETE":
                del self.snapshots[parts[1]]
                return 202, None
            return 200, {"snapshot": snap}
        if parts == ["attachments"] and method == "POST":
            return self._attachment_create(body["attachment"])
        if parts[:1] == ["attachments"] and len(parts) >= 2:
            att = self.attachments.get(parts[1])
            if att is None:
                return self._error(404, "itemNotFound", f"Volume attachment {parts[1]} could not be found.")
            if method == "GET" and len(parts) == 2:
                return 200, {"attachment": att}
            if method == "PUT" and len(parts) == 2:
                att.update(connector=body["attachment"]["connector"], status="attaching",
                           connection_info=self.connection_info(att["volume_id"]))
                self.volumes[att["volume_id"]]["status"] = "attaching"
                return 200, {"attachment": att}
            if method == "POST" and parts[2:] == ["action"] and "os-complete" in (body or {}):
                att["status"] = "attached"
                vol = self.volumes[att["volume_id"]]
                vol["status"] = "in-use"
                vol["attachments"] = [{"server_id": att["instance"], "attachment_id": att["id"],
                                       "volume_id": vol["id"], "device": att["connector"].get("mountpoint")}]
                return 204, None
            if method == "DELETE" and len(parts) == 2:
                del self.attachments[parts[1]]
                vol = self.volumes.get(att["volume_id"])
                left = [a for a in self.attachments.values() if vol is not None and a["volume_id"] == vol["id"]]
                if vol is not None and not left:
                    vol.update(status="available", attachments=[])
                elif vol is not None and all(a["status"] == "reserved" for a in left):
                    vol.update(status="reserved", attachments=[])
                return 200, {"attachments": []}
        return 404, {"error": "not found"}

    def _volume_action(self, volume_id, body):
        vol = self.volumes.get(volume_id)
        if vol is None:
            return self._error(404, "itemNotFound", f"Volume {volume_id} could not be found.")
        if "os-begin_detaching" in body:
            if vol["status"] != "in-use":
                return self._error(400, "badRequest", "Invalid volume: Unable to detach volume. Volume status must "
                                                      "be 'in-use' and attach_status must be 'attached' to detach.")
            vol["status"] = "detaching"
            return 202, None
        if "os-roll_detaching" in body:
            if vol["status"] == "detaching":
                vol["status"] = "in-use"
            return 202, None
        if "os-reimage" in body:
            spec = body["os-reimage"]
            allowed = ("available", "error") + (("reserved",) if spec.get("reimage_reserved") else ())
            if vol["status"] not in allowed:
                return self._error(400, "badRequest", f"Invalid volume: Volume {volume_id} status must be "
                                                      f"{' or '.join(allowed)}, but current status is: "
                                                      f"{vol['status']}.")
            before = vol["status"]
            vol["status"] = "downloading"
            timer = threading.Timer(self.reimage_delay, self._reimaged, (vol, before, spec["image_id"]))
            timer.daemon = True
            timer.start()
            return 202, None
        if "os-extend" in body:
            vol["size"] = body["os-extend"]["new_size"]
            return 202, None
        return self._error(400, "badRequest", "Invalid request.")

    def _reimaged(self, vol: dict, before: str, image_id: str) -> None:
        """The image written (or not): the volume back to what it was (``error`` on failure), its image
        metadata the new image's, and Nova told with volume-reimaged (the server: the volume's attachment's)."""
        result = self.reimage_result
        if result is None:
            return
        vol["status"] = before if result == "completed" else "error"
        if result == "completed":
            vol["volume_image_metadata"] = {"image_id": image_id}
            vol["bootable"] = "true"
        servers = {a["instance"] for a in self.attachments.values() if a["volume_id"] == vol["id"]}
        for server in sorted(servers):
            if self.nova is not None:
                self.nova({"name": "volume-reimaged", "server_uuid": server, "tag": vol["id"], "status": result})

    def _attachment_create(self, spec):
        vol = self.volumes.get(spec["volume_uuid"])
        if vol is None:
            return self._error(404, "itemNotFound", f"Volume {spec['volume_uuid']} could not be found.")
        same = vol["status"] == "in-use" and any(a["volume_id"] == vol["id"] and a["instance"] == spec["instance_uuid"]
                                                 for a in self.attachments.values())  # Cinder lets the same server
        if vol["status"] not in ("available", "downloading") and not same and \
                not (vol["multiattach"] and vol["status"] == "in-use"):
            return self._error(400, "badRequest", f"Invalid volume: Volume {vol['id']} status must be available or "
                                                  f"downloading to reserve, but the current status is "
                                                  f"{vol['status']}.")
        att = {"id": str(uuid.uuid4()), "volume_id": vol["id"], "instance": spec["instance_uuid"],
               "status": "reserved", "attach_mode": "rw", "connector": None, "connection_info": {},
               "attached_at": None, "detached_at": None}
        self.attachments[att["id"]] = att
        if not same:
            vol["status"] = "reserved"
        if spec.get("connector"):
            att.update(connector=spec["connector"], status="attaching",
                       connection_info=self.connection_info(vol["id"]))
            vol["status"] = "attaching"
        return 200, {"attachment": att}

    def _page(self, kind: str, items: list[dict]):
        """Cinder's pages: at most ``page_size`` items and a ``<kind>_links`` next link with the marker."""
        query = urllib.parse.parse_qs(self.requests[-1]["query"])
        start = 0
        if "marker" in query:
            start = next(i for i, item in enumerate(items) if item["id"] == query["marker"][-1]) + 1
        page = items[start:start + self.page_size]
        answer: dict = {kind: page}
        if start + self.page_size < len(items):
            answer[f"{kind}_links"] = [{"rel": "next", "href": f"http://cinder/v3/p/{kind}/detail?"
                                                               f"marker={page[-1]['id']}&limit={self.page_size}"}]
        return answer

    # -- serving -----------------------------------------------------------------------------
    def serve(self):
        server = make_server("127.0.0.1", 0, self, handler_class=_Quiet)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        return server, f"http://127.0.0.1:{server.server_port}"
