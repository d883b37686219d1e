"""Who sees which flavor, and how lists filter, sort and page (Nova 34.0.0's rules)."""

from __future__ import annotations

import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin, user


def _create(client, flavor_id, *, public=True, ram=512, disk=1, version="2.55", **extra):
    body = {"flavor": {"name": f"name-{flavor_id}", "ram": ram, "vcpus": 1, "disk": disk, "id": flavor_id,
                       "os-flavor-access:is_public": public, **extra}}
    got = client.post("/v2.1/flavors", headers=admin(version), json_body=body)
    assert got.status_code == 200, got.text
    return got.json["flavor"]


def _ids(result):
    assert result.status_code == 200, result.text
    return [f["id"] for f in result.json["flavors"]]


def _disable(conf, flavor_id):
    # Nova has no API to disable a flavor either: operators do it in the database.
    with db_api.transaction(db_api.get_engine(conf)) as conn:
        conn.execute(sa.update(models.FLAVORS).where(models.FLAVORS.c.flavorid == flavor_id)
                     .values(disabled=True))


def test_disabled_flavors_are_hidden_from_lists_of_non_admins_but_still_shown(client, conf):
    _create(client, "on")
    _create(client, "off")
    _disable(conf, "off")
    assert _ids(client.get("/v2.1/flavors", headers=user())) == ["on"]
    assert _ids(client.get("/v2.1/flavors/detail", headers=user())) == ["on"]
    assert sorted(_ids(client.get("/v2.1/flavors", headers=admin()))) == ["off", "on"]
    shown = client.get("/v2.1/flavors/off", headers=user())
    assert shown.status_code == 200 and shown.json["flavor"]["OS-FLV-DISABLED:disabled"] is True


def test_private_flavors_are_seen_by_their_projects_only(client):
    _create(client, "pub")
    _create(client, "priv", public=False)
    client.post("/v2.1/flavors/priv/action", headers=admin(), json_body={"addTenantAccess": {"tenant": "pa"}})
    assert _ids(client.get("/v2.1/flavors", headers=user("pa"))) == ["priv", "pub"]
    assert _ids(client.get("/v2.1/flavors", headers=user("pb"))) == ["pub"]
    assert client.get("/v2.1/flavors/priv", headers=user("pb")).status_code == 404
    assert client.get("/v2.1/flavors/priv/os-extra_specs", headers=user("pb")).status_code == 404
    assert client.get("/v2.1/flavors/priv", headers=user("pa")).status_code == 200


def test_admin_is_public_filter(client):
    _create(client, "pub")
    _create(client, "priv", public=False)
    assert _ids(client.get("/v2.1/flavors", headers=admin())) == ["pub"]
    assert _ids(client.get("/v2.1/flavors?is_public=false", headers=admin())) == ["priv"]
    assert _ids(client.get("/v2.1/flavors?is_public=None", headers=admin())) == ["priv", "pub"]
    assert _ids(client.get("/v2.1/flavors?is_public=false", headers=user())) == ["pub"], "ignored for non-admins"
    bad = client.get("/v2.1/flavors?is_public=maybe", headers=admin())
    assert bad.status_code == 400 and bad.json["badRequest"]["message"] == "Invalid is_public filter [maybe]"


def test_min_ram_min_disk_sort_and_paging(client):
    for i, (ram, disk) in enumerate([(512, 1), (1024, 10), (2048, 20), (4096, 40)]):
        _create(client, f"f{i}", ram=ram, disk=disk)
    assert _ids(client.get("/v2.1/flavors?minRam=1024&minDisk=20", headers=admin())) == ["f2", "f3"]
    assert _ids(client.get("/v2.1/flavors?sort_key=memory_mb&sort_dir=desc", headers=admin())) == [
        "f3", "f2", "f1", "f0"]
    page = client.get("/v2.1/flavors?limit=2&sort_key=memory_mb", headers=admin())
    assert _ids(page) == ["f0", "f1"]
    next_href = page.json["flavors_links"][0]["href"]
    assert next_href == "http://127.0.0.1:18774/v2.1/flavors?limit=2&sort_key=memory_mb&marker=f1"
    path, query = next_href.split("18774", 1)[1].split("?")
    assert _ids(client.get(path + "?" + query, headers=admin())) == ["f2", "f3"]
    bad = client.get("/v2.1/flavors?minDisk=x", headers=admin())
    assert bad.json["badRequest"]["message"] == "Invalid minDisk filter [x]"


def test_max_limit_caps_pages_and_adds_a_next_link(client, conf):
    conf.set_override("max_limit", 2, group="api")
    try:
        for i in range(3):
            _create(client, f"m{i}")
        page = client.get("/v2.1/flavors", headers=admin())
        assert _ids(page) == ["m0", "m1"]
        assert page.json["flavors_links"][0]["href"].endswith("/v2.1/flavors?marker=m1")
    finally:
        conf.clear_override("max_limit", group="api")


def test_extra_specs_in_flavor_bodies_follow_the_index_policy_from_261(client):
    _create(client, "es")
    client.post("/v2.1/flavors/es/os-extra_specs", headers=admin(), json_body={"extra_specs": {"a": "b"}})
    assert "extra_specs" not in client.get("/v2.1/flavors/es", headers=admin("2.60")).json["flavor"]
    assert client.get("/v2.1/flavors/es", headers=admin("2.61")).json["flavor"]["extra_specs"] == {"a": "b"}
    assert client.get("/v2.1/flavors/es", headers=user(version="2.61")).json["flavor"]["extra_specs"] == {"a": "b"}
    no_reader = user(version="2.61", **{"X-Roles": "other"})
    assert "extra_specs" not in client.get("/v2.1/flavors/es", headers=no_reader).json["flavor"]
    detail = client.get("/v2.1/flavors/detail", headers=admin("2.61")).json["flavors"][0]
    assert detail["extra_specs"] == {"a": "b"}
    brief = client.get("/v2.1/flavors", headers=admin("2.61")).json["flavors"][0]
    assert "extra_specs" not in brief


def test_extra_spec_values_are_validated_from_286_only(client):
    _create(client, "v")
    bad = {"extra_specs": {"hw:cpu_policy": "bogus"}}
    assert client.post("/v2.1/flavors/v/os-extra_specs", headers=admin("2.85"), json_body=bad).status_code == 200
    refused = client.post("/v2.1/flavors/v/os-extra_specs", headers=admin("2.86"), json_body=bad)
    assert refused.status_code == 400
    assert refused.json["badRequest"]["message"] == "Validation failed; 'bogus' is not one of: dedicated, shared, mixed."
    put = client.put("/v2.1/flavors/v/os-extra_specs/hw:numa_nodes", headers=admin("2.86"),
                     json_body={"hw:numa_nodes": 0})
    assert put.status_code == 400
    assert put.json["badRequest"]["message"] == "Validation failed; '0' is less than the min value of '1'."
    stored = client.get("/v2.1/flavors/v/os-extra_specs", headers=admin()).json["extra_specs"]
    assert stored == {"hw:cpu_policy": "bogus"}, "the refused writes left nothing behind"


def test_delete_removes_access_and_extra_specs_with_the_flavor(client, conf):
    _create(client, "gone", public=False)
    client.post("/v2.1/flavors/gone/action", headers=admin(), json_body={"addTenantAccess": {"tenant": "p"}})
    client.post("/v2.1/flavors/gone/os-extra_specs", headers=admin(), json_body={"extra_specs": {"k": "v"}})
    got = client.delete("/v2.1/flavors/gone", headers=admin())
    assert got.status_code == 202 and got.content == b"" and got.header("Content-Type") == "application/json"
    with db_api.reader(db_api.get_engine(conf)) as conn:
        for table in ("flavors", "flavor_projects", "flavor_extra_specs"):
            assert conn.execute(sa.text(f"select count(*) from {table}")).scalar() == 0, table


def test_integers_beyond_64_bits_are_read_as_integers_like_nova(client):
    _create(client, "big")
    raw = b'{"extra_specs": {"quota:cpu_shares": 100000000000000000000}}'
    got = client.post("/v2.1/flavors/big/os-extra_specs", headers=admin("2.86", **{"Content-Type": "application/json"}),
                      body=raw)
    assert got.status_code == 200, got.text
    assert got.content == b'{"extra_specs":{"quota:cpu_shares":100000000000000000000}}'
    stored = client.get("/v2.1/flavors/big/os-extra_specs/quota:cpu_shares", headers=admin()).json
    assert stored == {"quota:cpu_shares": "100000000000000000000"}
