"""A rebuild's new root disk is imported as the first one: from the image service's URL, with the
service token Secret (create and rebuild compose the server's objects through one path)."""

from __future__ import annotations

import base64
import threading
import time

import pytest

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator import Delays, Emulator
from openkeel_compute.images import local
from tests.conftest import admin, make_conf, user
from tests.controller.conftest import controller_for
from tests.wsgi_client import Client

IMAGE = "6e0a6c4e-3a69-4c5f-9f57-1f6b0d7c8a10"
IMAGE_ALT = "0b7c7f25-5a3e-4d0e-9a7e-2a8a54f4a111"
DEMO = user("demo-project", version="2.96")


@pytest.fixture
def world(tmp_path):
    policies.reset()
    directory = tmp_path / "images"
    directory.mkdir()
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    local.register(directory, disk, name="cirros", image_id=IMAGE, copy=True)
    local.register(directory, disk, name="cirros-alt", image_id=IMAGE_ALT, copy=True)
    images = local.serve(str(directory), "127.0.0.1", 0)
    threading.Thread(target=images.serve_forever, daemon=True).start()
    glance_url = f"http://127.0.0.1:{images.server_port}"
    conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                     glance={"api_servers": glance_url},
                     service_user={"auth_type": "admin_token", "token": "svc-token", "endpoint": glance_url})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    cluster = Emulator(delays=Delays.fast(), tick=0.01).start()
    kube = make_client(cluster.kubeconfig())
    controller = controller_for(conf, cluster, servers=server_loop_from(conf, engine, kube))
    try:
        yield Client(deploy(conf)), controller, cluster, glance_url
    finally:
        controller.backend.close()
        kube.close()
        cluster.stop()
        images.shutdown()
        images.server_close()
        db_api.dispose_all()
        policies.reset()


def _until(client, controller, uuid, status, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        got = client.get(f"/v2.1/servers/{uuid}", headers=DEMO)
        server = got.json["server"]
        if (server["status"] == status and server["OS-EXT-STS:task_state"] is None) or time.monotonic() > deadline:
            return server


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
