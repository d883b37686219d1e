"""A build the controller cannot carry out ends in Nova's fault, in bounded time, logged once (issue 27.2).

A zero-disk flavor's root disk is the image's size as the image service reports it (Nova sizes it from the
image, the server's record does not keep it): a 3 GiB image gives a 3 GiB disk. An image of no known size
ends the build at once in ERROR with "Build of instance <uuid> aborted: …", one WARNING line."""

from __future__ import annotations

import json
import logging
import time

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.databases import ENGINES, throwaway_database
from tests.server_world import IMAGE, image_service, server_world
from tests.server_world import out_of_build as _until_settled

ADMIN = admin("2.96")
GiB = 1024**3


@pytest.fixture(params=ENGINES)
def world(request, tmp_path):
    """The API, the controller and the built-in cluster, on each supported database."""
    policies.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            yield client, controller, cluster, tmp_path / "images"


def _image_reports(images, **fields):
    """The local image service reports ``fields`` for IMAGE from now on (what Glance would say)."""
    path = images / f"{IMAGE}.json"
    record = json.loads(path.read_text())
    record.update(fields)
    path.write_text(json.dumps(record))


def _zero_disk_boot(client):
    got = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "zero", "ram": 512, "vcpus": 1, "disk": 0, "id": "zero"}})
    assert got.status_code == 200, got.text
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "zero", "networks": "auto"}})
    assert got.status_code == 202, got.text
    return got.json["server"]["id"]


def _root_request(cluster, uuid):
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    return vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["resources"]["requests"]["storage"]


@pytest.mark.parametrize(("fields", "disk"), [({"size": 3 * GiB, "virtual_size": None}, "3Gi"),
                                              ({"size": 4096, "virtual_size": 5 * GiB + 1}, "6Gi")])
def test_a_zero_disk_flavor_takes_the_size_the_image_service_reports(world, fields, disk):
    client, controller, cluster, images = world
    _image_reports(images, **fields)
    uuid = _zero_disk_boot(client)
    server = _until_settled(client, controller, uuid)
    assert server["status"] == "ACTIVE", server
    assert _root_request(cluster, uuid) == disk


def test_an_image_of_no_known_size_ends_the_build_at_once_logged_once(world, caplog):
    client, controller, cluster, images = world
    _image_reports(images, size=None, virtual_size=None, min_disk=0)
    uuid = _zero_disk_boot(client)
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="openkeel_compute.controller"):
        server = _until_settled(client, controller, uuid)
        for _ in range(5):
            controller.run_once()
    assert time.monotonic() - started < 10  # not instance_build_timeout
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ERROR", None)
    assert server["fault"]["code"] == 500
    assert server["fault"]["message"].startswith(f"Build of instance {uuid} aborted: image {IMAGE} has no size")
    assert not [k for k in cluster.objects("VirtualMachine") if k[1] == uuid]  # nothing was made
    said = [r for r in caplog.records if "has no size" in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(said) == 1, [r.getMessage() for r in said]
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=ADMIN).json["instanceActions"]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{actions[0]['request_id']}", headers=ADMIN)
    assert [(e["event"], e["result"]) for e in got.json["instanceAction"]["events"]] == [
        ("compute__do_build_and_run_instance", "Error")]
