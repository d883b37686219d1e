"""A stand-in for the few Keystone v3 reads the ``openstack`` CLI makes before a flavor command.

Why it exists: ``openstack flavor create`` and ``flavor set``/``unset`` build an identity v3 proxy
before sending anything to compute (to resolve ``--project`` names), and without Keystone the
``admin_token`` endpoint override is taken for identity as well, so the CLI stops with "Service
requires API version '3' but the configured version is '2'" (../shared/reference/clients.md).
OpenKeel under noauth2 has no Keystone, so the client tests give the CLI an
``identity_endpoint_override`` pointing here. It answers only the version document and project
look-ups (``GET /v3/projects/{id}``, ``GET /v3/projects?name=``) for the projects it is told about;
everything else is 404. No compute request goes through it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, urlsplit


class IdentityStub:
    def __init__(self, projects: list[str]):
        self.projects = list(projects)
        self.requests: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                stub.requests.append(self.path)
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
        return f"http://127.0.0.1:{self.server.server_address[1]}/v3"

    def _project(self, project_id: str) -> dict:
        return {"id": project_id, "name": project_id, "domain_id": "default", "enabled": True,
                "links": {"self": f"{self.url}/projects/{project_id}"}}

    def answer(self, raw_path: str) -> tuple[int, dict]:
        parts = urlsplit(raw_path)
        path = parts.path.rstrip("/")
        if path == "/v3":
            return 200, {"version": {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                                     "links": [{"rel": "self", "href": self.url + "/"}],
                                     "media-types": [{"base": "application/json",
                                                      "type": "application/vnd.openstack.identity-v3+json"}]}}
        if path == "/v3/projects":
            names = parse_qs(parts.query).get("name")
            found = [self._project(p) for p in self.projects if not names or p in names]
            return 200, {"projects": found, "links": {"self": self.url + "/projects", "next": None}}
        if path.startswith("/v3/projects/"):
            project_id = path.rsplit("/", 1)[1]
            if project_id in self.projects:
                return 200, {"project": self._project(project_id)}
        return 404, {"error": {"code": 404, "title": "Not Found", "message": "Could not find it."}}

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
