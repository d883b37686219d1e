"""The identity answer of noauth2 (/identity/v3): tokens with a catalog, and what the openstack CLI reads
before flavor create/set.

Under noauth2 every project exists (a token ``user:project`` is trusted), named as its id. With
Keystone authentication the path is not answered at all: it is an unknown path like any other.
"""

from __future__ import annotations

from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import make_conf
from tests.wsgi_client import Client


def test_version_documents_point_at_v3(client):
    listed = client.request("GET", "/identity")
    assert listed.status_code == 300
    [version] = listed.json["versions"]["values"]
    assert version["id"].startswith("v3.") and version["links"][0]["href"] == "http://127.0.0.1:18774/identity/v3/"
    v3 = client.request("GET", "/identity/v3")
    assert v3.status_code == 200 and v3.json["version"]["id"] == version["id"]


def test_every_project_exists_named_as_its_id(client):
    by_id = client.request("GET", "/identity/v3/projects/demo")
    assert by_id.status_code == 200
    assert {k: by_id.json["project"][k] for k in ("id", "name", "domain_id", "enabled")} == {
        "id": "demo", "name": "demo", "domain_id": "default", "enabled": True}
    by_name = client.request("GET", "/identity/v3/projects?name=alt")
    assert [p["id"] for p in by_name.json["projects"]] == ["alt"]
    assert client.request("GET", "/identity/v3/projects").json["projects"] == []


def test_anything_else_is_404_or_405(client):
    assert client.request("GET", "/identity/v3/users").status_code == 404
    assert client.request("POST", "/identity/v3/projects", json_body={"project": {"name": "x"}}).status_code == 405


def test_not_answered_with_keystone_authentication(tmp_path):
    conf = make_conf(tmp_path, auth_strategy="keystone",
                     keystone_authtoken={"www_authenticate_uri": "http://127.0.0.1:9", "auth_url": "http://127.0.0.1:9",
                                         "delay_auth_decision": "false"})
    migration.sync(db_api.get_engine(conf))
    try:
        got = Client(deploy(conf)).request("GET", "/identity/v3/projects/demo")
        # Nova's answer to a path outside the API: 300 with the version choices.
        assert got.status_code == 300 and "choices" in got.json
    finally:
        db_api.dispose_all()


def _token_request(client, identity: dict, scope: dict | None = None):
    auth = {"identity": identity}
    if scope is not None:
        auth["scope"] = scope
    return client.request("POST", "/identity/v3/auth/tokens", json_body={"auth": auth})


def test_a_token_gives_the_token_back_with_a_catalog(client):
    got = _token_request(client, {"methods": ["token"], "token": {"id": "demo:demo"}},
                         {"project": {"id": "demo"}})
    assert got.status_code == 201, got.text
    assert got.header("X-Subject-Token") == "demo:demo"
    token = got.json["token"]
    assert (token["user"]["id"], token["project"]["id"]) == ("demo", "demo")
    assert [r["name"] for r in token["roles"]] == ["member", "reader"]
    catalog = {entry["type"]: {e["interface"]: e["url"] for e in entry["endpoints"]} for entry in token["catalog"]}
    assert catalog["compute"]["public"] == "http://127.0.0.1:18774/v2.1"
    assert catalog["identity"]["public"] == "http://127.0.0.1:18774/identity"
    assert "image" not in catalog  # no [glance] api_servers: no image service to name


def test_the_scope_chooses_the_project_and_admin_is_an_administrator(client):
    got = _token_request(client, {"methods": ["token"], "token": {"id": "admin:admin"}},
                         {"project": {"name": "other", "domain": {"id": "default"}}})
    assert got.header("X-Subject-Token") == "admin:other"
    assert "admin" in [r["name"] for r in got.json["token"]["roles"]]
    # the subject token is what the API then trusts
    listed = client.request("GET", "/v2.1/flavors", headers={"X-Auth-Token": got.header("X-Subject-Token")})
    assert listed.status_code == 200


def test_a_password_names_the_user(client):
    got = _token_request(client, {"methods": ["password"],
                                  "password": {"user": {"name": "alice", "domain": {"id": "default"},
                                                        "password": "anything"}}},
                         {"project": {"id": "p1"}})
    assert (got.status_code, got.header("X-Subject-Token")) == (201, "alice:p1")


def test_a_token_request_without_identity_is_refused(client):
    assert client.request("POST", "/identity/v3/auth/tokens", json_body={"auth": {}}).status_code == 400
    assert client.request("POST", "/identity/v3/auth/tokens", body=b"not json").status_code == 400
    got = _token_request(client, {"methods": ["token"], "token": {"id": ""}})
    assert got.status_code == 401 and got.header("X-Subject-Token") is None


def test_the_catalog_names_the_configured_image_service(tmp_path):
    conf = make_conf(tmp_path, glance={"api_servers": "http://127.0.0.1:9393"})
    migration.sync(db_api.get_engine(conf))
    try:
        got = _token_request(Client(deploy(conf)), {"methods": ["token"], "token": {"id": "admin:admin"}})
        [image] = [entry for entry in got.json["token"]["catalog"] if entry["type"] == "image"]
        assert {e["url"] for e in image["endpoints"]} == {"http://127.0.0.1:9393"}
        assert got.header("X-Subject-Token") == "admin:admin"
    finally:
        db_api.dispose_all()


def test_the_catalog_names_cinder_for_the_project(tmp_path):
    conf = make_conf(tmp_path, cinder={"endpoint_template": "http://127.0.0.1:8776/v3/%(project_id)s"})
    migration.sync(db_api.get_engine(conf))
    try:
        client = Client(deploy(conf))
        token = _token_request(client, {"methods": ["token"], "token": {"id": "demo:demo"}},
                               {"project": {"id": "p1"}}).json["token"]
        catalog = {entry["type"]: {e["interface"]: e["url"] for e in entry["endpoints"]} for entry in token["catalog"]}
        # as Cinder registers itself (types block-storage and volumev3), the project filled in
        assert catalog["block-storage"]["public"] == catalog["volumev3"]["public"] == "http://127.0.0.1:8776/v3/p1"
    finally:
        db_api.dispose_all()


def test_no_cinder_no_volume_service(client):
    token = _token_request(client, {"methods": ["token"], "token": {"id": "demo:demo"}}).json["token"]
    assert not {"block-storage", "volumev3"} & {entry["type"] for entry in token["catalog"]}
