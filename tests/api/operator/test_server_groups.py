"""os-server-groups (create, list, show, delete across 2.13, 2.15, 2.64 and 2.75), the server_groups and
server_group_members quotas, the ``group`` hint at boot and 2.71's server_groups in server show, on
SQLite, PostgreSQL and MariaDB. Where members are placed: tests/controller/steps/test_placing.py."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.api.servers.helpers import IMAGE, local_image_service
from tests.conftest import admin, user

URL = "/v2.1/os-server-groups"


def _create(api, body, version="2.64", headers=None):
    return api.post(URL, headers=headers or user(version=version), json_body={"server_group": body})


def test_create_show_list_delete_at_264_and_before(api):
    got = _create(api, {"name": "g1", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}})
    assert got.status_code == 200, got.text
    group = got.json["server_group"]
    assert group == {"id": group["id"], "name": "g1", "policy": "anti-affinity", "rules": {"max_server_per_host": 2},
                     "members": [], "project_id": "demo-project", "user_id": "demo"}
    old = _create(api, {"name": "g2", "policies": ["affinity"]}, "2.1").json["server_group"]
    assert old == {"id": old["id"], "name": "g2", "policies": ["affinity"], "metadata": {}, "members": []}
    shown = api.get(f"{URL}/{old['id']}", headers=user(version="2.13")).json["server_group"]
    assert (shown["policies"], shown["project_id"]) == (["affinity"], "demo-project")
    assert api.get(f"{URL}/{old['id']}", headers=user(version="2.64")).json["server_group"]["rules"] == {}
    listed = api.get(URL, headers=user(version="2.64")).json["server_groups"]
    assert [g["name"] for g in listed] == ["g1", "g2"]
    assert api.get(URL + "?limit=1&offset=1", headers=user()).json["server_groups"][0]["name"] == "g2"
    assert api.get(URL, headers=user(project="other")).json["server_groups"] == []
    assert len(api.get(URL + "?all_projects=1", headers=admin()).json["server_groups"]) == 2
    assert api.get(URL + "?all_projects=1", headers=user(project="other")).json["server_groups"] == []
    assert api.delete(f"{URL}/{group['id']}", headers=user()).status_code == 204
    got = api.get(f"{URL}/{group['id']}", headers=user())
    assert got.json == {"itemNotFound": {"code": 404, "message": f"Instance group {group['id']} could not be found."}}
    assert api.delete(f"{URL}/{group['id']}", headers=user()).status_code == 404


def test_novas_400s(api):
    got = _create(api, {"name": "g", "policy": "affinity", "rules": {"max_server_per_host": 2}})
    assert got.json["badRequest"]["message"] == "Only anti-affinity policy supports rules."
    got = _create(api, {"name": "g", "policies": ["soft-affinity"]}, "2.14")
    assert got.json["badRequest"]["message"] == ("Invalid input for field/attribute 0. Value: soft-affinity. "
                                                 "'soft-affinity' is not one of ['anti-affinity', 'affinity']")
    assert _create(api, {"name": "g", "policies": ["soft-affinity"]}, "2.15").status_code == 200
    assert _create(api, {"name": "g", "policies": ["affinity"]}, "2.64").status_code == 400
    assert _create(api, {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 0}}).status_code == 400
    assert api.get(URL + "?foo=1", headers=user(version="2.75")).status_code == 400
    assert api.get(URL + "?foo=1", headers=user(version="2.74")).status_code == 200


def test_the_server_groups_quota(api):
    assert api.put("/v2.1/os-quota-sets/demo-project", headers=admin(),
                   json_body={"quota_set": {"server_groups": 1}}).status_code == 200
    assert _create(api, {"name": "g", "policy": "affinity"}).status_code == 200
    got = _create(api, {"name": "h", "policy": "affinity"})
    assert got.json == {"forbidden": {"code": 403, "message": "Quota exceeded, too many server groups."}}
    detail = api.get("/v2.1/os-quota-sets/demo-project/detail", headers=admin()).json["quota_set"]
    assert detail["server_groups"]["in_use"] == 1


@pytest.fixture
def booting(conf, tmp_path, engine):
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name="tiny", memory_mb=512, vcpus=1, root_gb=1, flavorid="tiny")
    with local_image_service(conf, tmp_path):
        yield


def _boot(api, group, count=1):
    body = {"server": {"name": "m", "imageRef": IMAGE, "flavorRef": "tiny", "networks": "none", "min_count": count},
            "os:scheduler_hints": {"group": group}}
    return api.post("/v2.1/servers", headers=user(version="2.71"), json_body=body)


def test_boot_with_the_group_hint_makes_members(api, booting, engine):
    group = _create(api, {"name": "g", "policy": "anti-affinity"}).json["server_group"]
    got = _boot(api, group["id"], 2)
    assert got.status_code == 202, got.text
    members = api.get(f"{URL}/{group['id']}", headers=user()).json["server_group"]["members"]
    assert len(members) == 2 and got.json["server"]["id"] in members
    shown = api.get(f"/v2.1/servers/{members[0]}", headers=user(version="2.71")).json["server"]
    assert shown["server_groups"] == [group["id"]]
    assert "server_groups" not in api.get(f"/v2.1/servers/{members[0]}", headers=user(version="2.70")).json["server"]
    missing = "857cd4dd-f4d8-4698-aedc-35634c0e6708"
    got = _boot(api, missing)
    assert got.json == {"badRequest": {"code": 400, "message": f"Instance group {missing} could not be found."}}
    with db_api.transaction(engine) as conn:  # a deleted member is no member any more
        conn.execute(sa.update(models.INSTANCES).where(models.INSTANCES.c.uuid == members[0]).values(
            deleted=models.INSTANCES.c.id))
    assert api.get(f"{URL}/{group['id']}", headers=user()).json["server_group"]["members"] == [members[1]]


def test_the_server_group_members_quota_leaves_nothing(api, booting, engine):
    api.put("/v2.1/os-quota-sets/demo-project", headers=admin(), json_body={"quota_set": {"server_group_members": 2}})
    group = _create(api, {"name": "g", "policy": "soft-anti-affinity"}, "2.64").json["server_group"]
    assert _boot(api, group["id"]).status_code == 202
    with db_api.reader(engine) as conn:
        before = conn.execute(sa.select(sa.func.count()).select_from(models.INSTANCES)).scalar()
    got = _boot(api, group["id"], 2)
    assert got.json == {"forbidden": {"code": 403, "message": "Quota exceeded, too many servers in group"}}
    with db_api.reader(engine) as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.INSTANCES)).scalar() == before
    assert _boot(api, group["id"]).status_code == 202
