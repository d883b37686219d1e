"""os-aggregates (CRUD, add_host/remove_host, set_metadata, 2.41 uuid, 2.81 images) with Nova's
availability-zone rules, and the controller's side: each aggregate a Placement aggregate on its hosts'
providers, an aggregate's zone the nodes' zone label; on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.controller import compute_services, providers
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from tests.conftest import admin, user

URL = "/v2.1/os-aggregates"


def _post(api, body, version="2.41", path=""):
    return api.post(URL + path, headers=admin(version), json_body=body)


def _action(api, aggregate_id, name, body, version="2.41"):
    return _post(api, {name: body}, version, f"/{aggregate_id}/action")


def test_create_show_update_list_delete(api):
    got = _post(api, {"aggregate": {"name": "rack-1", "availability_zone": "z1"}})
    assert got.status_code == 200, got.text
    created = got.json["aggregate"]
    assert set(created) == {"id", "uuid", "name", "created_at", "updated_at", "deleted_at", "deleted",
                            "availability_zone"}
    assert (created["name"], created["availability_zone"], created["deleted"]) == ("rack-1", "z1", False)
    assert "uuid" not in _post(api, {"aggregate": {"name": "rack-2"}}, "2.40").json["aggregate"]
    assert _post(api, {"aggregate": {"name": "rack-1"}}).json == {
        "conflictingRequest": {"code": 409, "message": "Aggregate rack-1 already exists."}}
    shown = api.get(f"{URL}/{created['id']}", headers=admin("2.41")).json["aggregate"]
    assert (shown["hosts"], shown["metadata"]) == ([], {"availability_zone": "z1"})
    got = api.put(f"{URL}/{created['id']}", headers=admin("2.41"), json_body={"aggregate": {"name": "rack-one"}})
    assert got.json["aggregate"]["name"] == "rack-one" and got.json["aggregate"]["updated_at"]
    assert [a["name"] for a in api.get(URL, headers=admin()).json["aggregates"]] == ["rack-one", "rack-2"]
    assert api.get(f"{URL}/x", headers=admin()).json["badRequest"]["message"] == (
        "Invalid input received: id must be an integer")
    assert api.get(f"{URL}/99", headers=admin()).json["itemNotFound"]["message"] == "Aggregate 99 could not be found."
    assert api.delete(f"{URL}/{created['id']}", headers=admin()).status_code == 200
    assert api.get(URL, headers=user()).status_code == 403


def test_hosts_metadata_and_novas_zone_rules(api, engine):
    first = _post(api, {"aggregate": {"name": "a1", "availability_zone": "z1"}}).json["aggregate"]["id"]
    second = _post(api, {"aggregate": {"name": "a2", "availability_zone": "z2"}}).json["aggregate"]["id"]
    got = _action(api, first, "add_host", {"host": "emulated-node-1"})
    assert got.json["aggregate"]["hosts"] == ["emulated-node-1"]
    assert _action(api, first, "add_host", {"host": "emulated-node-1"}).json["conflictingRequest"]["message"] == (
        f"Aggregate {first} already has host emulated-node-1.")
    assert _action(api, first, "add_host", {"host": "nohost"}).json["itemNotFound"]["message"] == (
        "Compute host nohost could not be found.")
    assert _action(api, second, "add_host", {"host": "emulated-node-1"}).json["conflictingRequest"]["message"] == (
        f"Cannot add host to aggregate {second}. Reason: One or more hosts already in availability zone(s) ['z1'].")
    got = _action(api, first, "set_metadata", {"metadata": {"availability_zone": None}})
    assert got.json["badRequest"]["message"] == (
        f"Cannot update metadata of aggregate {first}. Reason: Aggregate a1 does not support empty named "
        "availability zone.")
    got = _action(api, first, "set_metadata", {"metadata": {"ssd": "true"}})
    assert got.json["aggregate"]["metadata"] == {"availability_zone": "z1", "ssd": "true"}
    assert _action(api, first, "set_metadata", {"metadata": {"ssd": None}}).json["aggregate"]["metadata"] == {
        "availability_zone": "z1"}
    assert api.delete(f"{URL}/{first}", headers=admin()).json["badRequest"]["message"] == (
        f"Cannot remove host from aggregate {first}. Reason: Host aggregate is not empty.")
    with db_api.transaction(engine) as conn:  # a server on node 2: its zone may no longer change
        catalog.create(conn, name="t", memory_mb=512, vcpus=1, root_gb=1, flavorid="t")
        store.create(conn, actor=Actor("u", "p"), flavor=catalog.get(conn, "t"), extra_specs={}, display_name="s")
        conn.execute(sa.update(models.INSTANCES).values(host="emulated-node-2", node="emulated-node-2"))
    got = _action(api, second, "add_host", {"host": "emulated-node-2"})
    assert got.status_code == 409 and got.json["conflictingRequest"]["message"].startswith(
        f"Cannot add host to aggregate {second}. Reason: The host cannot be added to the aggregate as the "
        "availability zone of the host would change from 'None' to 'z2' but the host already has 1 instance(s).")
    plain = _post(api, {"aggregate": {"name": "plain"}}).json["aggregate"]["id"]
    assert _action(api, plain, "add_host", {"host": "emulated-node-2"}).status_code == 200
    got = api.put(f"{URL}/{plain}", headers=admin(), json_body={"aggregate": {"availability_zone": "z3"}})
    assert got.json["badRequest"]["message"] == (
        f"Cannot update aggregate {plain}. Reason: One or more hosts contain instances in this zone.")
    assert _action(api, plain, "remove_host", {"host": "emulated-node-3"}).json["itemNotFound"]["message"] == (
        f"Cannot remove host emulated-node-3 in aggregate {plain}")
    assert _action(api, plain, "remove_host", {"host": "emulated-node-2"}).json["aggregate"]["hosts"] == []
    assert _action(api, first, "remove_host", {"host": "emulated-node-1"}).json["aggregate"]["hosts"] == []


def test_image_precaching_is_accepted_as_by_a_driver_without_it(api):
    made = _post(api, {"aggregate": {"name": "a"}}).json["aggregate"]["id"]
    image = {"id": "155d900f-4e14-4e4c-a73d-069cbf4541e6"}
    got = _post(api, {"cache": [image]}, "2.81", f"/{made}/images")
    assert got.status_code == 202
    assert _post(api, {"cache": [image, image]}, "2.81", f"/{made}/images").json["badRequest"]["message"] == (
        "Duplicate images in request")
    assert _post(api, {"cache": [image]}, "2.81", "/77/images").status_code == 404
    assert _post(api, {"cache": [image]}, "2.80", f"/{made}/images").status_code == 404


def test_the_controller_gives_hosts_their_aggregates_zone_and_placement_aggregate(api, cluster, publish, engine):
    made = _post(api, {"aggregate": {"name": "a", "availability_zone": "z9"}}).json["aggregate"]
    _action(api, made["id"], "add_host", {"host": "emulated-node-3"})
    publish()
    node = cluster.get("Node", "emulated-node-3")
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z9"
    zones = api.get("/v2.1/os-availability-zone", headers=user()).json["availabilityZoneInfo"]
    assert sorted(z["zoneName"] for z in zones) == ["nova", "z9"]
    services = api.get("/v2.1/os-services?host=emulated-node-3", headers=admin()).json["services"]
    assert services[0]["zone"] == "z9"
    _down, member_of = compute_services.placement_view(engine)
    assert member_of == {"emulated-node-3": {made["uuid"]}}
    want = providers.desired(node, providers.Ratios(), providers.Labels(), host_aggregates=member_of["emulated-node-3"])
    assert made["uuid"] in want.aggregates and providers.zone_aggregate("z9") in want.aggregates
    _action(api, made["id"], "remove_host", {"host": "emulated-node-3"})
    publish()
    labels = cluster.get("Node", "emulated-node-3")["metadata"]["labels"]
    assert "topology.kubernetes.io/zone" not in labels, "back in the default zone"
