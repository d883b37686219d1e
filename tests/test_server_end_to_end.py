"""A server boots end to end: POST /servers through the API app, then the controller's loops against the
built-in cluster, until the servers API shows it ACTIVE; then stop, start and delete."""

from __future__ import annotations

import threading
import time

import pytest

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.controller.kube import make_client
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.emulator import Delays, Emulator
from openkeel_compute.images import glance, local
from tests.conftest import admin, make_conf, user
from tests.controller.conftest import controller_for
from tests.wsgi_client import Client

IMAGE = "6e0a6c4e-3a69-4c5f-9f57-1f6b0d7c8a10"
DEMO = user("demo-project", version="2.96")


@pytest.fixture
def world(tmp_path):
    policies.reset()
    conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"})
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    directory = tmp_path / "images"
    directory.mkdir()
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    local.register(directory, disk, name="cirros", image_id=IMAGE, copy=True)
    images = local.serve(str(directory), "127.0.0.1", 0)
    threading.Thread(target=images.serve_forever, daemon=True).start()
    glance.register_opts(conf)
    conf.set_override("api_servers", [f"http://127.0.0.1:{images.server_port}"], group="glance")
    cluster = Emulator(delays=Delays.fast(), tick=0.01).start()
    kube = make_client(cluster.kubeconfig())
    controller = controller_for(conf, cluster, servers=make_loop(kube, engine))
    try:
        yield Client(deploy(conf)), controller, cluster
    finally:
        controller.backend.close()
        kube.close()
        cluster.stop()
        images.shutdown()
        images.server_close()
        db_api.dispose_all()
        policies.reset()


def _until(client, controller, uuid, done, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        got = client.get(f"/v2.1/servers/{uuid}", headers=DEMO)
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def _status(status):
    return lambda got: got.status_code == 200 and got.json["server"]["status"] == status


def test_a_server_boots_stops_starts_and_is_deleted(world):
    client, controller, cluster = world
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.e2e", "ram": 512, "vcpus": 1, "disk": 1, "id": "e2e"}})
    assert flavor.status_code == 200, flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "e2e", "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]

    shown = _until(client, controller, uuid, _status("ACTIVE"))
    server = shown.json["server"]
    assert server["status"] == "ACTIVE", server
    (ips,) = server["addresses"].values()
    assert ips and ips[0]["addr"].startswith("10.244.")
    (namespace,) = {k[0] for k in cluster.objects("VirtualMachine") if k[1] == uuid}
    assert [k for k in cluster.objects("Secret") if k[0] == namespace]  # its user data, before the delete

    stop = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-stop": None})
    assert stop.status_code == 202, stop.text
    assert _until(client, controller, uuid, _status("SHUTOFF")).json["server"]["status"] == "SHUTOFF"

    start = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-start": None})
    assert start.status_code == 202, start.text
    assert _until(client, controller, uuid, _status("ACTIVE")).json["server"]["status"] == "ACTIVE"

    deleted = client.delete(f"/v2.1/servers/{uuid}", headers=DEMO)
    assert deleted.status_code == 204, deleted.text
    assert _until(client, controller, uuid, lambda g: g.status_code == 404).status_code == 404
    for kind in ("VirtualMachine", "VirtualMachineInstance", "DataVolume", "Secret", "VirtualMachinePreference"):
        assert [k for k in cluster.objects(kind) if k[0] == namespace] == [], kind
