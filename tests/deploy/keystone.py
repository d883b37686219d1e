"""A Keystone v3 stand-in on a loopback port, for starting the overlays' pods on this machine.

It does what keystoneauth and keystonemiddleware ask of Keystone when a service starts and checks
tokens: version discovery (``GET /`` answers 300 with v3, ``GET /v3`` the v3 document), password
logins scoped to a project (``POST /v3/auth/tokens``: 201 with the token in X-Subject-Token, 401 for
an unknown user or a wrong password) and token validation (``GET /v3/auth/tokens``: 200 with the
token, 404 for a token it never issued, 401 when the caller's own token is unknown). Every token
carries the catalog given with ``add_service``, in one region.

Token ids read ``user:project`` (``admin:…`` for a service login), so that the embedded Placement,
which runs with Placement's noauth2 strategy and reads the token's text as the caller, takes a
service as the privileged caller a real Placement takes it for (role ``service``, or admin).
A real Keystone runs in the conformance tier.
"""

from __future__ import annotations

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from keystoneauth1 import fixture


class Keystone:
    def __init__(self, region: str = "RegionOne") -> None:
        self.region = region
        self.users: dict[tuple[str, str], str] = {}  # (name, domain name) -> password
        self.services: dict[str, str] = {}  # service type -> URL (internal and public)
        self.tokens: dict[str, dict[str, Any]] = {}
        self.logins: list[tuple[str, str]] = []  # (user name, project name) of each successful login
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, body: dict, token: str | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if token is not None:
                    self.send_header("X-Subject-Token", token)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                path = self.path.split("?", 1)[0].rstrip("/")
                if path == "":
                    return self._answer(300, {"versions": {"values": [stand_in.version()]}})
                if path == "/v3":
                    return self._answer(200, {"version": stand_in.version()})
                if path == "/v3/auth/tokens":
                    if self.headers.get("X-Auth-Token") not in stand_in.tokens:
                        return self._answer(401, _error(401, "The request you have made requires authentication."))
                    subject = stand_in.tokens.get(self.headers.get("X-Subject-Token", ""))
                    if subject is None:
                        return self._answer(404, _error(404, "Could not find token."))
                    return self._answer(200, subject, self.headers["X-Subject-Token"])
                return self._answer(404, _error(404, "Could not find it."))

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path.split("?", 1)[0].rstrip("/") != "/v3/auth/tokens":
                    return self._answer(404, _error(404, "Could not find it."))
                token = stand_in.login(body)
                if token is None:
                    return self._answer(401, _error(401, "The request you have made requires authentication."))
                return self._answer(201, stand_in.tokens[token], token)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Keystone's address without a path: what replaces a configured Keystone's scheme and host."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def version(self) -> dict[str, Any]:
        return {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": self.url + "/v3/"}],
                "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]}

    def add_user(self, name: str, password: str, domain: str = "Default") -> None:
        self.users[(name, domain)] = password

    def add_service(self, service_type: str, url: str) -> None:
        self.services[service_type] = url

    def issue(self, user: str, project: str, roles: list[str], token_id: str | None = None) -> str:
        """A token of ``user`` in ``project`` (what a user's own login would have given); its id."""
        token = fixture.V3Token(user_id=user, user_name=user, user_domain_id="default", project_id=project,
                                project_name=project, project_domain_id="default")
        for role in roles:
            token.add_role(name=role)
        catalog = {"identity": self.url + "/v3", **self.services}
        for service_type, url in catalog.items():
            service = token.add_service(service_type)
            for interface in ("internal", "public"):
                service.add_endpoint(interface, url, region=self.region)
        token_id = token_id or f"{user}:{project}"
        self.tokens[token_id] = token
        return token_id

    def login(self, body: dict[str, Any]) -> str | None:
        """A password login's token id, or None when the name, domain or password is wrong."""
        auth = body.get("auth", {})
        user = auth.get("identity", {}).get("password", {}).get("user", {})
        key = (user.get("name"), user.get("domain", {}).get("name"))
        if key not in self.users or self.users[key] != user.get("password"):
            return None
        project = auth.get("scope", {}).get("project", {}).get("name", "")
        self.logins.append((key[0], project))
        return self.issue(key[0], project, ["service"], token_id=f"admin:{secrets.token_hex(8)}")

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "title": "Error", "message": message}}
