"""auth_strategy = keystone: keystonemiddleware's auth_token in front, and Keystone project checks.

Tokens are served by keystonemiddleware's own AuthTokenFixture, each with a service catalog as
Keystone issues it; the project check talks HTTP to a small local stand-in for Keystone's
version discovery and GET /v3/projects/{id} (tests/api/keystone_stub.py; a real Keystone runs
in the conformance tier). No [keystone] endpoint_override unless a test says so: the identity
endpoint comes from the token's catalog, as in a standard deployment. The expected answers
were read from Nova 34.0.0's own project check, run against the same stand-in, on 2026-12-01.
"""

from __future__ import annotations

import json
import types

import pytest
from keystoneauth1 import fixture as ksa_fixture
from keystonemiddleware import fixture as ks_fixture

from openkeel_compute import policies
from openkeel_compute.api import faults, identity
from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.api.keystone_stub import KeystoneStub
from tests.conftest import make_conf
from tests.wsgi_client import Client

CLOSED = "http://127.0.0.1:9/identity"   # nothing listens on the discard port
NOT_FOUND_MESSAGE = "Nova was unable to find Keystone service endpoint."


@pytest.fixture
def keystone_stub():
    with KeystoneStub() as stub:
        yield stub


@pytest.fixture
def other_stub():
    with KeystoneStub(root="/other") as stub:
        yield stub


def _keystone_client(tmp_path, **keystone):
    policies.reset()
    conf = make_conf(
        tmp_path,
        auth_strategy="keystone",
        keystone_authtoken={
            "www_authenticate_uri": "http://127.0.0.1:9/identity",
            # The service's own token (sent as X-Service-Token beside the caller's) without a
            # password login: the fixture validates user tokens, nothing logs the service in.
            "auth_type": "admin_token",
            "endpoint": "http://127.0.0.1:9/identity",
            "token": "service-token",
        },
        **({"keystone": keystone} if keystone else {}),
    )
    migration.sync(db_api.get_engine(conf))
    return Client(deploy(conf))


def _v3_token(user_id, project_id, roles, catalog=None, region="RegionOne"):
    token = ksa_fixture.V3Token(user_id=user_id, project_id=project_id)
    for role in roles:
        token.add_role(name=role)
    for service_type, endpoints in (catalog or {}).items():
        service = token.add_service(service_type)
        for interface, url in endpoints.items():
            service.add_endpoint(interface, url, region=region)
    return token


@pytest.fixture
def tokens(keystone_stub):
    fx = ks_fixture.AuthTokenFixture()
    fx.setUp()
    catalog = {"identity": {"public": keystone_stub.url, "internal": keystone_stub.url,
                            "admin": keystone_stub.url},
               "compute": {"public": "http://127.0.0.1:18774/v2.1"}}
    fx.add_token(_v3_token("admin-user", "admin-proj", ["admin", "member", "reader"], catalog),
                 token_id="admin-token")
    fx.add_token(_v3_token("alice", "proj-a", ["member", "reader"], catalog), token_id="member-token")
    fx.add_token(_v3_token("carol", "proj-a", ["other"], catalog), token_id="noroles-token")
    yield fx
    fx.cleanUp()
    policies.reset()
    db_api.dispose_all()


def _admin_token(fx, token_id, catalog=None, region="RegionOne"):
    fx.add_token(_v3_token("admin-user", "admin-proj", ["admin", "member", "reader"], catalog, region),
                 token_id=token_id)
    return {"X-Auth-Token": token_id}


def _flavor(client, token, flavor_id, public=True):
    body = {"flavor": {"name": flavor_id, "ram": 512, "vcpus": 1, "disk": 1, "id": flavor_id,
                       "os-flavor-access:is_public": public}}
    return client.post("/v2.1/flavors", headers={"X-Auth-Token": token}, json_body=body)


def test_a_request_without_a_token_is_refused_by_auth_token(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path)
    got = client.get("/v2.1/flavors")
    assert got.status_code == 401
    assert got.header("WWW-Authenticate", ) is not None


def test_version_documents_need_no_token_in_keystone_mode(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path)
    assert client.get("/").status_code == 200
    assert client.get("/v2.1/").status_code == 200


def test_roles_come_from_the_token(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path)
    assert _flavor(client, "admin-token", "f1").status_code == 200
    assert _flavor(client, "member-token", "f2").status_code == 403
    assert client.get("/v2.1/flavors", headers={"X-Auth-Token": "member-token"}).status_code == 200
    no_reader = client.get("/v2.1/flavors/f1/os-extra_specs", headers={"X-Auth-Token": "noroles-token"})
    assert no_reader.status_code == 403


def test_spoofed_identity_headers_are_ignored(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path)
    spoof = {"X-Auth-Token": "member-token", "X-Roles": "admin", "X-User-Id": "admin-user",
             "X-Identity-Status": "Confirmed"}
    assert _flavor(client, spoof["X-Auth-Token"], "f3").status_code == 403
    got = client.post("/v2.1/flavors", headers=spoof, json_body={
        "flavor": {"name": "spoof", "ram": 1, "vcpus": 1, "disk": 1}})
    assert got.status_code == 403


def test_flavor_access_checks_the_project_in_keystone(tmp_path, keystone_stub, tokens):
    client = _keystone_client(tmp_path)
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
    keystone_stub.projects.discard("proj-b")
    gone = client.post("/v2.1/flavors/priv/action", headers=admin,
                       json_body={"removeTenantAccess": {"tenant": "proj-b"}})
    assert gone.status_code == 200, gone.text
    # The check went to the catalog's identity endpoint, v3 found by discovery, with the caller's token.
    assert ("/identity/v3/projects/proj-a", "admin-token") in keystone_stub.project_requests()


def test_unreachable_keystone_accepts_the_project_as_nova_does(tmp_path, tokens):
    client = _keystone_client(tmp_path)
    admin = _admin_token(tokens, "unreachable-token", {"identity": {"public": CLOSED, "internal": CLOSED}})
    assert _flavor(client, "admin-token", "priv2", public=False).status_code == 200
    got = client.post("/v2.1/flavors/priv2/action", headers=admin, json_body={"addTenantAccess": {"tenant": "any"}})
    assert got.status_code == 200, got.text


# --- where the identity endpoint comes from (no [keystone] endpoint_override) -----------------

def _add_access(client, headers, tenant, flavor="cat"):
    if client.get(f"/v2.1/flavors/{flavor}", headers={"X-Auth-Token": "admin-token"}).status_code == 404:
        assert _flavor(client, "admin-token", flavor, public=False).status_code == 200
    return client.post(f"/v2.1/flavors/{flavor}/action", headers=headers,
                       json_body={"addTenantAccess": {"tenant": tenant}})


@pytest.mark.parametrize("url", ["root", "v3"])
def test_the_identity_endpoint_comes_from_the_tokens_catalog(tmp_path, keystone_stub, tokens, url):
    # keystonemiddleware hands the catalog on in the v2 format (publicURL, no "interface"):
    # the check must still find Keystone, on an unversioned or a /v3 catalog URL.
    base = keystone_stub.url if url == "root" else keystone_stub.v3_url
    admin = _admin_token(tokens, f"cat-{url}", {"identity": {"public": base, "internal": base}})
    client = _keystone_client(tmp_path)
    ok = _add_access(client, admin, "proj-a")
    assert ok.status_code == 200, ok.text
    unknown = _add_access(client, admin, "no-such-project")
    assert unknown.status_code == 400
    assert unknown.json == {"badRequest": {"code": 400, "message": "Project ID no-such-project is not a valid project."}}
    assert ("/identity/v3/projects/proj-a", f"cat-{url}") in keystone_stub.project_requests()


def test_internal_interface_is_tried_first_by_default(tmp_path, keystone_stub, other_stub, tokens):
    admin = _admin_token(tokens, "two-interfaces",
                         {"identity": {"public": keystone_stub.url, "internal": other_stub.url}})
    client = _keystone_client(tmp_path)
    assert _add_access(client, admin, "proj-a").status_code == 200
    assert other_stub.project_requests() == [("/other/v3/projects/proj-a", "two-interfaces")]
    assert keystone_stub.project_requests() == []


def test_valid_interfaces_choose_the_catalog_entry(tmp_path, keystone_stub, other_stub, tokens):
    admin = _admin_token(tokens, "two-interfaces",
                         {"identity": {"public": keystone_stub.url, "internal": other_stub.url}})
    client = _keystone_client(tmp_path, valid_interfaces="public")
    assert _add_access(client, admin, "proj-a").status_code == 200
    assert keystone_stub.project_requests() == [("/identity/v3/projects/proj-a", "two-interfaces")]
    assert other_stub.project_requests() == []


@pytest.mark.parametrize("catalog", [
    pytest.param({"compute": {"public": "http://127.0.0.1:18774/v2.1"}}, id="no-identity-entry"),
    pytest.param(None, id="no-catalog"),
    pytest.param({"identity": {"admin": CLOSED}}, id="admin-interface-only"),
])
def test_no_identity_endpoint_is_novas_400(tmp_path, tokens, catalog):
    admin = _admin_token(tokens, "no-identity", catalog)
    got = _add_access(_keystone_client(tmp_path), admin, "proj-a")
    assert got.status_code == 400
    assert got.json == {"badRequest": {"code": 400, "message": NOT_FOUND_MESSAGE}}


def test_region_name_filters_the_catalog(tmp_path, keystone_stub, tokens):
    admin = _admin_token(tokens, "region-one", {"identity": {"public": keystone_stub.url}}, region="RegionOne")
    assert _add_access(_keystone_client(tmp_path, region_name="RegionOne"), admin, "proj-a").status_code == 200
    other = _add_access(_keystone_client(tmp_path, region_name="RegionTwo"), admin, "proj-a", flavor="cat2")
    assert other.status_code == 400
    assert other.json["badRequest"]["message"] == NOT_FOUND_MESSAGE


def test_endpoint_override_wins_over_the_catalog(tmp_path, keystone_stub, tokens):
    admin = _admin_token(tokens, "override", {"identity": {"public": CLOSED, "internal": CLOSED}})
    client = _keystone_client(tmp_path, endpoint_override=keystone_stub.v3_url)
    assert _add_access(client, admin, "no-such-project").status_code == 400
    assert keystone_stub.project_requests() == [("/identity/v3/projects/no-such-project", "override")]


def test_valid_interfaces_default_is_novas():
    opts = {o.dest: o for o in identity.list_opts()[0][1]}
    assert opts["valid_interfaces"].default == ["internal", "public"]
    assert opts["service_type"].default == "identity"


# --- the X-Service-Catalog header, when no keystonemiddleware plugin is in the environ ----------

def _v2_header(url, interfaces=("public", "internal", "admin"), service_type="identity"):
    endpoint = {"region": "RegionOne", "id": "e1"}
    endpoint.update({f"{i}URL": url for i in interfaces})
    return json.dumps([{"type": service_type, "name": "keystone", "endpoints": [endpoint]}])


def _v3_header(url, interfaces=("public", "internal", "admin"), service_type="identity"):
    endpoints = [{"id": f"e-{i}", "interface": i, "region": "RegionOne", "region_id": "RegionOne", "url": url}
                 for i in interfaces]
    return json.dumps([{"type": service_type, "name": "keystone", "id": "s1", "endpoints": endpoints}])


@pytest.fixture
def verifier(tmp_path):
    policies.reset()
    return identity.ProjectVerifier(make_conf(tmp_path, auth_strategy="keystone"))


CALLER = types.SimpleNamespace(auth_token="caller-token", user_id="caller")


@pytest.mark.parametrize("header", [_v2_header, _v3_header], ids=["v2", "v3"])
def test_both_catalog_formats_are_read_from_the_header(verifier, keystone_stub, header):
    environ = {"HTTP_X_SERVICE_CATALOG": header(keystone_stub.url)}
    verifier(CALLER, "proj-a", environ)
    with pytest.raises(faults.Fault) as refused:
        verifier(CALLER, "no-such-project", environ)
    assert (refused.value.status, refused.value.message) == (400, "Project ID no-such-project is not a valid project.")
    assert keystone_stub.project_requests() == [("/identity/v3/projects/proj-a", "caller-token"),
                                                ("/identity/v3/projects/no-such-project", "caller-token")]


@pytest.mark.parametrize("header", [_v2_header, _v3_header], ids=["v2", "v3"])
def test_header_catalog_prefers_the_internal_interface(verifier, keystone_stub, other_stub, header):
    entries = json.loads(header(keystone_stub.url, ("public",))) + json.loads(header(other_stub.url, ("internal",)))
    verifier(CALLER, "proj-a", {"HTTP_X_SERVICE_CATALOG": json.dumps(entries)})
    assert other_stub.project_requests() == [("/other/v3/projects/proj-a", "caller-token")]
    assert keystone_stub.project_requests() == []


@pytest.mark.parametrize("environ", [
    pytest.param({}, id="no-header"),
    pytest.param({"HTTP_X_SERVICE_CATALOG": "not json"}, id="not-json"),
    pytest.param({"HTTP_X_SERVICE_CATALOG": "{}"}, id="not-a-list"),
    pytest.param({"HTTP_X_SERVICE_CATALOG": _v2_header(CLOSED, service_type="compute")}, id="v2-no-identity"),
    pytest.param({"HTTP_X_SERVICE_CATALOG": _v3_header(CLOSED, service_type="compute")}, id="v3-no-identity"),
    pytest.param({"HTTP_X_SERVICE_CATALOG": _v3_header(CLOSED, ("admin",))}, id="v3-admin-only"),
])
def test_header_without_an_identity_endpoint_is_novas_400(verifier, environ):
    with pytest.raises(faults.Fault) as refused:
        verifier(CALLER, "proj-a", environ)
    assert (refused.value.status, refused.value.message) == (400, NOT_FOUND_MESSAGE)


@pytest.mark.parametrize("header", [_v2_header, _v3_header], ids=["v2", "v3"])
def test_header_catalog_with_keystone_unreachable_accepts(verifier, header):
    verifier(CALLER, "anything", {"HTTP_X_SERVICE_CATALOG": header(CLOSED)})


def test_forbidden_lookup_is_accepted(verifier, keystone_stub):
    verifier(CALLER, "forbidden-to-look", {"HTTP_X_SERVICE_CATALOG": _v2_header(keystone_stub.url)})


def test_a_token_keystone_rejects_is_accepted_as_nova_does(verifier, keystone_stub):
    # The caller's token cannot be renewed: one request, then the answer is only logged.
    verifier(CALLER, "token-rejected", {"HTTP_X_SERVICE_CATALOG": _v2_header(keystone_stub.url)})
    assert keystone_stub.project_requests() == [("/identity/v3/projects/token-rejected", "caller-token")]
