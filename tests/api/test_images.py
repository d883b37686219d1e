"""The image proxy through a real image service over HTTP (the development one, images/local.py):
Glance's order and pages, Nova's filters as Nova passes them on, writes of properties and deletes.
tests/api/test_images_against_nova.py compares the bodies with Nova's own."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from openkeel_compute.images import glance, local
from tests.conftest import admin, user

OLD, MID, NEW = ("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
                 "33333333-3333-4333-8333-333333333333")
SERVER = "5d1b4c0e-8c4a-4f7e-9a39-1a2b3c4d5e6f"


@pytest.fixture
def image_service(conf, tmp_path):
    directory = tmp_path / "images"
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\0" * 1024)
    for image_id, name, created, properties in (
            (OLD, "old", "2026-01-01T00:00:00Z", {"os_distro": "debian", "hw_disk_bus": "virtio"}),
            (MID, "mid", "2026-06-01T00:00:00Z", {"instance_uuid": SERVER, "image_type": "snapshot",
                                                   "auto_disk_config": "true"}),
            (NEW, "new", "2026-11-01T00:00:00Z", {"kernel_id": "aki-1"})):
        local.register(directory, disk, name=name, image_id=image_id, properties=properties)
        record = json.loads((directory / f"{image_id}.json").read_text())
        record.update(created_at=created, updated_at=created)
        (directory / f"{image_id}.json").write_text(json.dumps(record))
    server = local.serve(str(directory), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    glance.register_opts(conf)
    conf.set_override("api_servers", [f"http://127.0.0.1:{server.server_port}"], group="glance")
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def _ids(got) -> list[str]:
    return [image["id"] for image in got.json["images"]]


def test_images_are_listed_newest_first_in_pages_with_a_next_link(client, image_service):
    first = client.get("/v2.1/images?limit=2", headers=user())
    assert _ids(first) == [NEW, MID]
    href = first.json["images_links"][0]["href"]
    assert href == f"http://127.0.0.1:18774/v2.1/images?limit=2&marker={MID}"
    second = client.get(href.split("18774", 1)[1], headers=user())
    assert _ids(second) == [OLD] and "images_links" not in second.json
    assert _ids(client.get("/v2.1/images/detail", headers=user())) == [NEW, MID, OLD]
    assert client.get("/v2.1/images?limit=0", headers=user()).json["badRequest"]["message"] == (
        "Invalid input for query parameters limit. Value: 0. 0 is less than the minimum of 1")


def test_novas_filters_reach_the_image_service_under_glances_names(client, image_service):
    def ids(query):
        return _ids(client.get(f"/v2.1/images/detail?{query}", headers=user()))

    assert ids("name=mid") == [MID]
    assert ids("status=ACTIVE") == [NEW, MID, OLD]
    assert ids(f"server=http://nova/servers/{SERVER}") == [MID]
    assert ids("type=snapshot") == [MID]
    assert ids("changes-since=2026-05-01T00:00:00Z") == [NEW, MID]
    assert ids("property-hw_disk_bus=virtio") == [OLD]
    # Nova strips "property-" as a set of characters: os_distro loses its "o" and matches nothing
    assert ids("property-os_distro=debian") == []


def test_an_image_shows_nova_s_fields_with_its_server_and_disk_config(client, image_service):
    image = client.get(f"/v2.1/images/{MID}", headers=user(version="2.35")).json["image"]
    assert (image["status"], image["progress"], image["created"], image["OS-DCF:diskConfig"]) == (
        "ACTIVE", 100, "2026-06-01T00:00:00Z", "AUTO")
    assert image["server"]["id"] == SERVER
    assert image["links"][2] == {"rel": "alternate", "type": "application/vnd.openstack.image",
                                 "href": f"{image_service}/images/{MID}"}
    assert client.get(f"/v2.1/images/{MID}", headers=user(version="2.36")).status_code == 404


def test_metadata_writes_change_the_image_in_the_image_service(client, image_service):
    url = f"/v2.1/images/{OLD}/metadata"
    assert client.post(url, headers=user(), json_body={"metadata": {"color": "blue"}}).json == {
        "metadata": {"os_distro": "debian", "hw_disk_bus": "virtio", "color": "blue"}}
    assert client.delete(f"{url}/os_distro", headers=user()).status_code == 204
    assert client.put(url, headers=user(version="2.38"), json_body={"metadata": {"only": "one"}}).status_code == 200
    with urllib.request.urlopen(f"{image_service}/v2/images/{OLD}") as resp:  # as Glance keeps it
        kept = json.load(resp)
    assert kept["only"] == "one" and "color" not in kept and "os_distro" not in kept
    assert client.get(url, headers=user()).json == {"metadata": {"only": "one"}}
    assert client.get(url, headers=user(version="2.39")).status_code == 404


def test_an_empty_kernel_id_leaves_the_images_own_as_nova_does(client, image_service):
    url = f"/v2.1/images/{NEW}/metadata"
    client.put(url, headers=user(), json_body={"metadata": {"kernel_id": "", "extra": "1"}})
    assert client.get(url, headers=user()).json == {"metadata": {"kernel_id": "aki-1", "extra": "1"}}


def test_more_properties_than_the_metadata_items_quota_are_refused(client, image_service):
    client.put("/v2.1/os-quota-sets/demo-project", headers=admin(), json_body={"quota_set": {"metadata_items": 2}})
    got = client.post(f"/v2.1/images/{OLD}/metadata", headers=user(), json_body={"metadata": {"three": "3"}})
    assert got.json == {"forbidden": {"code": 403, "message": "Image metadata limit exceeded"}}


def test_a_deleted_image_is_gone_from_the_image_service(client, image_service):
    assert client.delete(f"/v2.1/images/{NEW}", headers=user()).status_code == 204
    assert client.get(f"/v2.1/images/{NEW}", headers=user()).json == {
        "itemNotFound": {"code": 404, "message": "Image not found."}}
    assert client.delete(f"/v2.1/images/{NEW}", headers=user()).status_code == 404


def test_an_unreachable_image_service_is_a_503(client, conf):
    glance.register_opts(conf)
    conf.set_override("api_servers", ["http://127.0.0.1:9"], group="glance")
    conf.set_override("num_retries", 0, group="glance")
    got = client.get("/v2.1/images", headers=user())
    assert got.status_code == 503
    assert got.json["serviceUnavailable"]["message"].startswith("Connection to glance host http://127.0.0.1:9 failed")
