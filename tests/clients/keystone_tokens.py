"""A stand-in for the part of Keystone a service's client uses to find and call the compute API: version
discovery, and ``POST /v3/auth/tokens`` answering any password with a token whose id is a noauth2 token
(``admin:admin``) and whose catalog lists ``compute`` (name ``nova``) at the URL given. A client that
authenticates (keystoneauth's password plugin) then calls OpenKeel's noauth2 API as its admin, through
the catalog, as it would behind a real Keystone. It records the authentications."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

from keystoneauth1 import fixture


class KeystoneTokens:
    def __init__(self, compute_url: str, token: str = "admin:admin") -> None:
        self.compute_url, self.token = compute_url, token
        self.authentications: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") in ("", "/v3"):
                    return self._send(200, {"version": stub._v3()})
                return self._send(404, {"error": {"code": 404, "title": "Not Found", "message": "Could not find it."}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.split("?")[0].rstrip("/") != "/v3/auth/tokens":
                    return self._send(404, {"error": {"code": 404, "title": "Not Found", "message": "no"}})
                stub.authentications.append(body)
                return self._send(201, stub._token(), {"X-Subject-Token": stub.token})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v3"

    def _v3(self) -> dict:
        return {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": self.url + "/"}],
                "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]}

    def _token(self) -> dict:
        token = fixture.V3Token(user_id="admin", user_name="admin", project_id="admin", project_name="admin",
                                user_domain_id="default", project_domain_id="default")
        token.add_role(name="admin")
        service = token.add_service("compute", name="nova")
        service.add_standard_endpoints(public=self.compute_url, admin=self.compute_url, internal=self.compute_url,
                                       region="RegionOne")
        return dict(token)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
