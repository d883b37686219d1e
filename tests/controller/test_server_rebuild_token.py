"""A rebuild's new root disk is imported as the first one: from the image service's URL, with the
service token Secret (create and rebuild compose the server's objects through one path)."""

from __future__ import annotations

import base64

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.server_world import DEMO, IMAGE, IMAGE_ALT, image_service, server_world, until


@pytest.fixture
def world(tmp_path):
    policies.reset()
    with image_service(tmp_path) as glance_url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url},
                         service_user={"auth_type": "admin_token", "token": "svc-token", "endpoint": glance_url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            yield client, controller, cluster, glance_url


def _until(client, controller, uuid, status):
    return until(client, controller, uuid, lambda got: got.json["server"]["status"] == status
                 and got.json["server"]["OS-EXT-STS:task_state"] is None).json["server"]


def test_rebuild_imports_with_the_service_token_from_the_image_service(world):
    client, controller, cluster, glance_url = world
    assert client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.tok", "ram": 512, "vcpus": 1, "disk": 1, "id": "tok"}}).status_code == 200
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "tok", "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert _until(client, controller, uuid, "ACTIVE")["status"] == "ACTIVE"
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"rebuild": {"imageRef": IMAGE_ALT}})
    assert got.status_code == 202, got.text
    assert _until(client, controller, uuid, "ACTIVE")["image"]["id"] == IMAGE_ALT
    ((namespace, _name), vm), = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    (template,) = vm["spec"]["dataVolumeTemplates"]
    assert template["spec"]["source"]["http"] == {"url": f"{glance_url}/v2/images/{IMAGE_ALT}/file",
                                                  "secretExtraHeaders": [f"{uuid}-image-token"]}
    secret = cluster.get("Secret", f"{uuid}-image-token", namespace)
    assert base64.b64decode(secret["data"]["header"]) == b"X-Auth-Token:svc-token"
