"""The development image service as a fault test needs it: taken down and brought back on the same port, or
cutting an upload off part way (its connection breaking in the middle of the disk's bytes), and the world of
an end-to-end server test around it (the API, the controller with few quick attempts, the built-in cluster,
Placement)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import make_server

from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.images import glance, local
from openkeel_compute.placement import embedded
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import admin, conf_on
from tests.server_world import DEMO, IMAGE, IMAGE_ALT, server_world

ATTEMPTS = 3  # the controller's step_attempts in these worlds: a failure is given up quickly
CAPTURE_KINDS = ("VirtualMachineSnapshot", "VirtualMachineSnapshotContent", "VirtualMachineExport")


class _CutInput:
    """A request body that breaks after ``after`` bytes, as a connection dropped mid-upload."""

    def __init__(self, stream: Any, after: int) -> None:
        self.stream, self.left = stream, after

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            raise OSError("connection reset by peer")
        data = self.stream.read(min(size, self.left) if size and size > 0 else self.left)
        self.left -= len(data)
        return data

    def readline(self, *args: Any) -> bytes:
        if self.left <= 0:
            raise OSError("connection reset by peer")
        line = self.stream.readline(*args)
        self.left -= len(line)
        return line


class ImageService:
    """The local image service of ``directory`` on a port of its own; ``down()``/``up()`` stop and start it
    there; ``cuts`` uploads are broken off after ``cut_after`` bytes."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.cuts, self.cut_after, self.port = 0, 1000, 0
        self._server: Any = None
        self.up()

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "PUT" and environ.get("PATH_INFO", "").endswith("/file") and self.cuts:
            self.cuts -= 1
            environ["wsgi.input"] = _CutInput(environ["wsgi.input"], self.cut_after)
        return self._inner(environ, start_response)

    def up(self) -> None:
        self._inner = local.make_app(str(self.directory))
        self._server = make_server("127.0.0.1", self.port, self._app,
                                   server_class=local._ThreadingServer, handler_class=local._QuietHandler)
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def image(self, image_id: str) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.url}/v2/images/{image_id}") as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
            return None

    def data(self, image_id: str) -> bytes:
        with urllib.request.urlopen(f"{self.url}/v2/images/{image_id}/file") as resp:
            return resp.read()

    def delete(self, image_id: str) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/v2/images/{image_id}", method="DELETE")).close()

    def images(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/v2/images") as resp:
            return [i for i in json.loads(resp.read())["images"] if i["id"] not in (IMAGE, IMAGE_ALT)]


@contextlib.contextmanager
def fault_world(tmp_path: Path, db_engine: Any, placement_url: str, *, offload_time: int = 0, nodes: int = 1,
                read_images: bool = False) -> Iterator[tuple[Any, Any, Any, ImageService, Path, PlacementClient]]:
    """(client, controller, cluster, image service, tmp_path, Placement): the controller gives a failing
    step up after ATTEMPTS attempts, without waiting between them; the image service is not retried.
    ``nodes``: the cluster's; ``read_images``: its imports read their images from the image service."""
    with conf_on(db_engine, tmp_path, controller={"poll_interval": "0.05", "workers": "4"}) as conf:
        conf.set_override("shelved_offload_time", offload_time)
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        directory = tmp_path / "images"
        directory.mkdir()
        disk = tmp_path / "disk.raw"
        disk.write_bytes(bytes(range(256)) * 16)
        local.register(directory, disk, name="cirros", image_id=IMAGE, copy=True)
        service = ImageService(directory)
        try:
            glance.register_opts(conf)
            conf.set_override("api_servers", [service.url], group="glance")
            conf.set_override("num_retries", 0, group="glance")
            make = lambda kube: make_loop(kube, engine, images=ImageAccess.from_conf(conf), step_attempts=ATTEMPTS,
                                          retry_delay=0.0, retry_max_delay=0.0,
                                          shelved_offload_time=float(offload_time))
            with server_world(conf, make, placement_url, nodes=nodes, read_images=read_images) as (
                    client, controller, cluster):
                yield client, controller, cluster, service, tmp_path, PlacementClient.for_endpoint(
                    placement_url, embedded.TOKEN)
        finally:
            with contextlib.suppress(Exception):
                service.down()


def task_of(client: Any, uuid: str) -> str | None:
    return client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]["OS-EXT-STS:task_state"]


def run_until_task(client: Any, controller: Any, uuid: str, wanted: str | None, passes: int = 600) -> list[Any]:
    """Controller passes until the server's task is ``wanted``; the tasks seen on the way."""
    seen: list[Any] = []
    for _ in range(passes):
        task = task_of(client, uuid)
        if not seen or seen[-1] != task:
            seen.append(task)
        if task == wanted:
            return seen
        controller.run_once()
    raise AssertionError(f"the task did not become {wanted}: {seen}")


def events(client: Any, uuid: str, action: str) -> list[tuple[str, str]]:
    found = [a for a in client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=DEMO).json[
        "instanceActions"] if a["action"] == action]
    assert found, action
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{found[0]['request_id']}", headers=admin("2.51"))
    return [(e["event"], e["result"]) for e in got.json["instanceAction"]["events"]]


def of_server(cluster: Any, uuid: str, kinds: tuple[str, ...] = (
        "VirtualMachine", "VirtualMachineInstance", "DataVolume", "PersistentVolumeClaim", "Secret",
        *CAPTURE_KINDS)) -> dict[str, list[Any]]:
    """The server's objects still in the cluster, by kind (those left empty dropped)."""
    found = {kind: [k for k, o in cluster.objects(kind).items()
                    if uuid in json.dumps(o.get("metadata", {}).get("labels") or {}) or uuid in k[1]]
             for kind in kinds}
    return {k: v for k, v in found.items() if v}


def capture_left(cluster: Any, wait: float = 5.0) -> dict[str, list[Any]]:
    """Any capture's objects in the cluster (snapshots, their contents and exports, the export tokens) once
    its garbage collector had ``wait`` seconds (what a snapshot owns goes after it, as on a real cluster)."""
    deadline = time.monotonic() + wait
    while True:
        left = {kind: list(cluster.objects(kind)) for kind in CAPTURE_KINDS}
        left["Secret"] = [k for k in cluster.objects("Secret") if k[1].startswith("export-token-")]
        left = {k: v for k, v in left.items() if v}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
