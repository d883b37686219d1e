"""A small HTTP stand-in for the Keystone reads a project check makes (a real Keystone runs in the
conformance tier): version discovery on the unversioned root (300, the list of versions) and on
``/v3`` (the v3 document), and ``GET /v3/projects/{id}``: 200 for known projects, 403 for
``forbidden-to-look``, 401 for ``token-rejected``, 404 otherwise. It records each request's path and X-Auth-Token (and X-Service-Token).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class KeystoneStub:
    def __init__(self, projects=("proj-a", "proj-b"), root: str = "/identity"):
        self.projects = set(projects)
        self.root = root
        self.requests: list[tuple[str, str | None]] = []
        self.service_tokens: list[str | None] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                stub.requests.append((self.path, self.headers.get("X-Auth-Token")))
                stub.service_tokens.append(self.headers.get("X-Service-Token"))
                status, body = stub.answer(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The unversioned root, as many catalogs hold it (http://host/identity)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.root}"

    @property
    def v3_url(self) -> str:
        return self.url + "/v3"

    def _v3(self) -> dict:
        return {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": self.v3_url + "/"}],
                "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]}

    def answer(self, path: str) -> tuple[int, dict]:
        path = path.split("?", 1)[0]
        if path.rstrip("/") == self.root:
            return 300, {"versions": {"values": [self._v3()]}}
        if path.rstrip("/") == self.root + "/v3":
            return 200, {"version": self._v3()}
        prefix = self.root + "/v3/projects/"
        if path.startswith(prefix):
            project = path[len(prefix):]
            if project in self.projects:
                return 200, {"project": {"id": project, "name": project, "domain_id": "default"}}
            if project == "forbidden-to-look":
                return 403, {"error": {"code": 403, "title": "Forbidden", "message": "You are not authorized."}}
            if project == "token-rejected":
                return 401, {"error": {"code": 401, "title": "Unauthorized", "message": "The request you have "
                                       "made requires authentication."}}
        return 404, {"error": {"code": 404, "title": "Not Found", "message": "Could not find it."}}

    def project_requests(self) -> list[tuple[str, str | None]]:
        return [r for r in self.requests if "/projects/" in r[0]]

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
