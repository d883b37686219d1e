"""The controller and a server booted with volumes: until volumes are carried out on KubeVirt, the build
ends at once in ERROR with Nova's "Build of instance <uuid> aborted: <reason>", nothing made on the
cluster; an image boot without volumes is untouched."""

from __future__ import annotations

import time

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.databases import ENGINES, throwaway_database
from tests.server_world import image_service, server_world

ADMIN = admin("2.96")


@pytest.fixture(params=ENGINES)
def world(request, tmp_path, cinder):
    policies.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url},
                         cinder={"auth_type": "admin_token", "endpoint": cinder.url, "token": "cinder-admin",
                                 "endpoint_template": cinder.url + "/v3/%(project_id)s"})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            got = client.post("/v2.1/flavors", headers=admin(), json_body={
                "flavor": {"name": "small", "ram": 512, "vcpus": 1, "disk": 1, "id": "small"}})
            assert got.status_code == 200, got.text
            yield client, controller, cluster


def _until_settled(client, controller, uuid, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        server = client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"]
        if server["status"] != "BUILD" or time.monotonic() > deadline:
            return server
        time.sleep(0.05)


def test_a_boot_with_volumes_is_refused_by_the_build_at_once(world, cinder):
    client, controller, cluster = world
    volume = cinder.volume(bootable=True)
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": volume["id"], "boot_index": 0}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    server = _until_settled(client, controller, uuid)
    assert (server["status"], server["fault"]["code"]) == ("ERROR", 500)
    assert server["fault"]["message"].startswith(f"Build of instance {uuid} aborted: volumes cannot be attached")
    assert not [k for k in cluster.objects("VirtualMachine") if k[1].endswith(uuid)]
