"""What the end-to-end server tests run against, built in one place: a local image service with two
test images, the built-in KubeVirt cluster, the API app and the controller (its flavor pass and a
server loop), and the wait for a server to reach a state through the API."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.controller import providers
from openkeel_compute.controller.claims import Claims
from openkeel_compute.controller.kube import make_client
from openkeel_compute.db import api as db_api
from openkeel_compute.emulator import Delays, Emulator
from openkeel_compute.images import local
from openkeel_compute.placement import embedded
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import admin, user
from tests.controller.helpers import controller_for
from tests.wsgi_client import Client

IMAGE = "6e0a6c4e-3a69-4c5f-9f57-1f6b0d7c8a10"
IMAGE_ALT = "0b7c7f25-5a3e-4d0e-9a7e-2a8a54f4a111"
DEMO = user("demo-project", version="2.96")


@contextlib.contextmanager
def image_service(tmp_path: Path) -> Iterator[str]:
    """The local image service with images ``cirros`` (IMAGE) and ``cirros-alt`` (IMAGE_ALT); yields its URL."""
    directory = tmp_path / "images"
    directory.mkdir()
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\0" * 4096)
    local.register(directory, disk, name="cirros", image_id=IMAGE, copy=True)
    local.register(directory, disk, name="cirros-alt", image_id=IMAGE_ALT, copy=True)
    images = local.serve(str(directory), "127.0.0.1", 0)
    threading.Thread(target=images.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{images.server_port}"
    finally:
        images.shutdown()
        images.server_close()


def reset_placement(placement: PlacementClient) -> None:
    """An empty Placement again: every allocation given back, every provider deleted (tests of one process
    share one embedded Placement)."""
    for provider in placement.providers():
        for consumer in placement.provider_allocations(provider["uuid"]):
            placement.delete_allocations(consumer, force=True)
        placement.delete_provider(provider["uuid"])


def with_placement(url: str, cluster: Emulator, servers: Any) -> PlacementClient:
    """The server loop claims in the (emptied) Placement at ``url``, whose providers are the cluster's nodes."""
    placement = PlacementClient.for_endpoint(url, embedded.TOKEN)
    reset_placement(placement)
    providers.sync(placement, [o for k, o in cluster.objects("Node").items()])
    servers.claims = Claims(placement)
    return placement


@contextlib.contextmanager
def server_world(conf: Any, make_servers: Callable[[Any], Any],
                 placement_url: str | None = None, *, nodes: int = 1, read_images: bool = False
                 ) -> Iterator[tuple[Client, Any, Emulator]]:
    """(API client, controller, cluster); ``make_servers(kube client)`` gives the controller's server loop,
    which claims in the Placement at ``placement_url`` when one is given (the ``placement_service`` fixture);
    the cluster has ``nodes`` Ready nodes. ``read_images``: the cluster's imports read the images (only for
    a world whose image endpoint is served; most tests' is not: 127.0.0.1:9292)."""
    cluster = Emulator(delays=Delays.fast(), tick=0.01, nodes=nodes, read_images=read_images).start()
    kube = make_client(cluster.kubeconfig())
    servers = make_servers(kube)
    if placement_url is not None:
        with_placement(placement_url, cluster, servers)
    controller = controller_for(conf, cluster, servers=servers)
    try:
        yield Client(deploy(conf)), controller, cluster
    finally:
        controller.backend.close()
        kube.close()
        cluster.stop()
        db_api.dispose_all()
        policies.reset()


#: how long a test lets the controller work towards a state (a wait that passes ends as soon as it is
#: reached): CI's two loaded cores have taken over 30 s for one in-process build
SETTLE_SECONDS = 120.0


def until(client: Client, controller: Any, uuid: str, done: Callable[[Any], bool],
          timeout: float = SETTLE_SECONDS) -> Any:
    """Run the controller until the API's answer for the server satisfies ``done`` (or the time is up)."""
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        got = client.get(f"/v2.1/servers/{uuid}", headers=DEMO)
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


@contextlib.contextmanager
def controller_running(controller: Any) -> Iterator[None]:
    """The controller's passes in a thread of their own, for requests that wait for the controller
    (os-getConsoleOutput) as they would with the controller process running beside the API."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.05):
            controller.run_once()

    thread = threading.Thread(target=run, name="controller-passes", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def settled(status: str) -> Callable[[Any], bool]:
    """For ``until``: the server in ``status`` with no task."""
    return lambda got: (got.status_code == 200 and got.json["server"]["status"] == status
                        and got.json["server"]["OS-EXT-STS:task_state"] is None)


def boot(client: Any, controller: Any, name: str = "web-1", image: str = IMAGE) -> str:
    """A server of the demo project (flavor ``e2e``, made when missing) driven to ACTIVE; its uuid."""
    flavor = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.e2e", "ram": 512, "vcpus": 1, "disk": 1, "id": "e2e"}})
    assert flavor.status_code in (200, 409), flavor.text
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": name, "imageRef": image, "flavorRef": "e2e", "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert until(client, controller, uuid, settled("ACTIVE")).json["server"]["status"] == "ACTIVE"
    return uuid


def out_of_build(client: Any, controller: Any, uuid: str, headers: dict | None = None,
                 timeout: float = SETTLE_SECONDS) -> dict:
    """Run the controller until the server has left BUILD (or the time is up); its body (as admin at 2.96
    unless ``headers`` says otherwise)."""
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        server = client.get(f"/v2.1/servers/{uuid}", headers=headers or admin("2.96")).json["server"]
        if server["status"] != "BUILD" or time.monotonic() > deadline:
            return server
        time.sleep(0.02)
