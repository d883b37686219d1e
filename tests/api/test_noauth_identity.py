"""The identity answer of noauth2 (/identity/v3): what the openstack CLI reads before flavor create/set.

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
