"""auth_strategy = keystone: keystonemiddleware's auth_token in front, and Keystone project checks.

Tokens are served by keystonemiddleware's own AuthTokenFixture; the project check talks HTTP to a
small local stand-in for Keystone's GET /v3/projects/{id} (a real Keystone runs in the
conformance tier).
"""

from __future__ import annotations

import http.server
import threading

import pytest
from keystonemiddleware import fixture as ks_fixture

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import make_conf
from tests.wsgi_client import Client

KNOWN_PROJECTS = {"proj-a", "proj-b"}


class _ProjectsHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        project = self.path.rsplit("/", 1)[-1]
        if self.path.startswith("/identity/v3/projects/") and project in KNOWN_PROJECTS:
            body = b'{"project": {"id": "%s"}}' % project.encode()
            self.send_response(200)
        elif project == "forbidden-to-look":
            body = b"{}"
            self.send_response(403)
        else:
            body = b'{"error": {"code": 404}}'
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def keystone_stub():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ProjectsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/identity"
    server.shutdown()
    server.server_close()


def _keystone_client(tmp_path, identity_url):
    policies.reset()
    conf = make_conf(
        tmp_path,
        auth_strategy="keystone",
        keystone_authtoken={
            "www_authenticate_uri": "http://127.0.0.1:9/identity",
            "auth_url": "http://127.0.0.1:9/identity",
            "auth_type": "password",
            "username": "nova",
            "password": "secret",
            "project_name": "service",
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        },
        keystone={"endpoint_override": identity_url},
    )
    migration.sync(db_api.get_engine(conf))
    return Client(deploy(conf))


@pytest.fixture
def tokens():
    fx = ks_fixture.AuthTokenFixture()
    fx.setUp()
    fx.add_token_data(token_id="admin-token", user_id="admin-user", project_id="admin-proj",
                      role_list=["admin", "member", "reader"])
    fx.add_token_data(token_id="member-token", user_id="alice", project_id="proj-a", role_list=["member", "reader"])
    fx.add_token_data(token_id="noroles-token", user_id="carol", project_id="proj-a", role_list=["other"])
    yield fx
    fx.cleanUp()
    policies.reset()
    db_api.dispose_all()


def _flavor(client, token, flavor_id, public=True):
    body = {"flavor": {"name": flavor_id, "ram": 512, "vcpus": 1, "disk": 1, "id": flavor_id,
                       "os-flavor-access:is_public": public}}
    return client.post("/v2.1/flavors", headers={"X-Auth-Token": token}, json_body=body)


def test_a_request_without_a_token_is_refused_by_auth_token(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path, keystone_stub)
    got = client.get("/v2.1/flavors")
    assert got.status_code == 401
    assert got.header("WWW-Authenticate", ) is not None


def test_version_documents_need_no_token_in_keystone_mode(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path, keystone_stub)
    assert client.get("/").status_code == 200
    assert client.get("/v2.1/").status_code == 200


def test_roles_come_from_the_token(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path, keystone_stub)
    assert _flavor(client, "admin-token", "f1").status_code == 200
    assert _flavor(client, "member-token", "f2").status_code == 403
    assert client.get("/v2.1/flavors", headers={"X-Auth-Token": "member-token"}).status_code == 200
    no_reader = client.get("/v2.1/flavors/f1/os-extra_specs", headers={"X-Auth-Token": "noroles-token"})
    assert no_reader.status_code == 403


def test_spoofed_identity_headers_are_ignored(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path, keystone_stub)
    spoof = {"X-Auth-Token": "member-token", "X-Roles": "admin", "X-User-Id": "admin-user",
             "X-Identity-Status": "Confirmed"}
    assert _flavor(client, spoof["X-Auth-Token"], "f3").status_code == 403
    got = client.post("/v2.1/flavors", headers=spoof, json_body={
        "flavor": {"name": "spoof", "ram": 1, "vcpus": 1, "disk": 1}})
    assert got.status_code == 403


def test_flavor_access_checks_the_project_in_keystone(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path, keystone_stub)
    admin = {"X-Auth-Token": "admin-token"}
    assert _flavor(client, "admin-token", "priv", public=False).status_code == 200
    ok = client.post("/v2.1/flavors/priv/action", headers=admin, json_body={"addTenantAccess": {"tenant": "proj-a"}})
    assert ok.status_code == 200, ok.text
    unknown = client.post("/v2.1/flavors/priv/action", headers=admin,
                          json_body={"addTenantAccess": {"tenant": "no-such-project"}})
    assert unknown.status_code == 400
    assert unknown.json["badRequest"]["message"] == "Project ID no-such-project is not a valid project."
    hidden = client.post("/v2.1/flavors/priv/action", headers=admin,
                         json_body={"addTenantAccess": {"tenant": "forbidden-to-look"}})
    assert hidden.status_code == 200, "Nova accepts when Keystone will not say"
    # Removing a project Keystone no longer knows still works: it is how stale access is cleaned.
    assert client.post("/v2.1/flavors/priv/action", headers=admin,
                       json_body={"addTenantAccess": {"tenant": "proj-b"}}).status_code == 200
    KNOWN_PROJECTS.discard("proj-b")
    try:
        gone = client.post("/v2.1/flavors/priv/action", headers=admin,
                           json_body={"removeTenantAccess": {"tenant": "proj-b"}})
        assert gone.status_code == 200, gone.text
    finally:
        KNOWN_PROJECTS.add("proj-b")


def test_unreachable_keystone_accepts_the_project_as_nova_does(tmp_path, tokens):
    client = _keystone_client(tmp_path, "http://127.0.0.1:9/identity")
    admin = {"X-Auth-Token": "admin-token"}
    assert _flavor(client, "admin-token", "priv2", public=False).status_code == 200
    got = client.post("/v2.1/flavors/priv2/action", headers=admin, json_body={"addTenantAccess": {"tenant": "any"}})
    assert got.status_code == 200, got.text
