"""createImage and createBackup end to end: the API, the controller's snapshot step, the built-in cluster's
VirtualMachineSnapshot and VirtualMachineExport, and the development image service (on each engine).

The image goes queued → active with the root disk's bytes; the server's task goes image_snapshot_pending →
image_snapshot → image_pending_upload → image_uploading → None; nothing of the capture stays in the
cluster; a server boots from the snapshot; a backup's rotation keeps the newest; an image deleted during
the capture ends the task without a fault, as Nova's compute does."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from openkeel_compute.controller.images import ImageAccess
from openkeel_compute.controller.servers import make_loop
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.images import glance
from tests.conftest import admin, conf_on
from tests.server_world import DEMO, image_service, server_world, until
from tests.server_world import boot as _boot
from tests.server_world import settled as _settled

ORDER = ["image_snapshot_pending", "image_snapshot", "image_pending_upload", "image_uploading", None]
CAPTURE_KINDS = ("VirtualMachineSnapshot", "VirtualMachineSnapshotContent", "VirtualMachineExport")


@pytest.fixture
def world(tmp_path, db_engine):
    with conf_on(db_engine, tmp_path, controller={"poll_interval": "0.05", "workers": "4"}) as conf:
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with image_service(tmp_path) as url:
            glance.register_opts(conf)
            conf.set_override("api_servers", [url], group="glance")
            make = lambda kube: make_loop(kube, engine, images=ImageAccess.from_conf(conf))
            with server_world(conf, make) as (client, controller, cluster):
                yield client, controller, cluster, url, tmp_path


def _image(url, image_id):
    try:
        with urllib.request.urlopen(f"{url}/v2/images/{image_id}") as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        return None


def _data(url, image_id):
    with urllib.request.urlopen(f"{url}/v2/images/{image_id}/file") as resp:
        return resp.read()


def _tasks_until_done(client, controller, uuid):
    """The task states the server showed, pass after pass, until it had none."""
    seen = []
    for _ in range(600):
        task = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]["OS-EXT-STS:task_state"]
        if not seen or seen[-1] != task:
            seen.append(task)
        if task is None:
            return seen
        controller.run_once()
    raise AssertionError(f"the task did not end: {seen}")


def _events(client, uuid):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=DEMO).json["instanceActions"]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{actions[0]['request_id']}", headers=DEMO)
    return actions[0]["action"], [(e["event"], e["result"]) for e in got.json["instanceAction"]["events"]]


def _leftovers(cluster, wait: float = 5.0):
    """The capture's objects still in the cluster once its garbage collector had ``wait`` seconds (the
    export, its Secret and the content go with the snapshot, asynchronously as on a real cluster)."""
    deadline = time.monotonic() + wait
    while True:
        left = {kind: list(cluster.objects(kind)) for kind in CAPTURE_KINDS}
        left["Secret"] = [k for k in cluster.objects("Secret") if k[1].startswith("export-token-")]
        left = {k: v for k, v in left.items() if v}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_a_snapshot_uploads_the_root_disk_and_a_server_boots_from_it(world):
    client, controller, cluster, url, tmp_path = world
    uuid = _boot(client, controller)
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO | {"OpenStack-API-Version": "compute 2.45"},
                      json_body={"createImage": {"name": "snap-1", "metadata": {"purpose": "e2e"}}})
    assert got.status_code == 202, got.text
    image_id = got.json["image_id"]
    assert _image(url, image_id)["status"] == "queued"
    seen = _tasks_until_done(client, controller, uuid)
    assert seen[0] == "image_snapshot_pending" and seen[-1] is None
    assert [ORDER.index(t) for t in seen] == sorted(ORDER.index(t) for t in seen), seen
    image = _image(url, image_id)
    assert (image["status"], image["disk_format"], image["container_format"]) == ("active", "raw", "bare")
    assert (image["instance_uuid"], image["image_type"], image["purpose"]) == (uuid, "snapshot", "e2e")
    assert _data(url, image_id) == (tmp_path / "disk.raw").read_bytes()  # the root disk's bytes
    assert image["size"] == 4096
    assert _events(client, uuid) == ("createImage", [("compute_snapshot_instance", "Success")])
    shown = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)
    assert _leftovers(cluster) == {}
    # a server boots from the snapshot
    second = _boot(client, controller, image=image_id, name="from-snap")
    assert client.get(f"/v2.1/servers/{second}", headers=DEMO).json["server"]["image"]["id"] == image_id


def test_a_stopped_server_is_captured_as_it_is(world):
    client, controller, _cluster, url, _tmp = world
    uuid = _boot(client, controller)
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-stop": None}).status_code == 202
    until(client, controller, uuid, _settled("SHUTOFF"))
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"createImage": {"name": "off"}})
    assert got.status_code == 202
    assert _tasks_until_done(client, controller, uuid)[-1] is None
    assert _image(url, got.json["image_id"])["status"] == "active"
    assert client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]["status"] == "SHUTOFF"


def test_backups_rotate_the_oldest_out(world):
    client, controller, cluster, url, _tmp = world
    uuid = _boot(client, controller)
    made = []
    for n in range(3):
        got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={
            "createBackup": {"name": f"daily-{n}", "backup_type": "daily", "rotation": 2}})
        assert got.status_code == 202, got.text
        made.append(got.json["image_id"])
        assert _tasks_until_done(client, controller, uuid)[-1] is None
    assert _image(url, made[0]) is None  # the oldest rotated out
    assert [_image(url, i)["status"] for i in made[1:]] == ["active", "active"]
    assert _events(client, uuid) == ("createBackup", [("compute_backup_instance", "Success")])
    # another type is a rotation of its own; rotation 0 keeps none of its type
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={
        "createBackup": {"name": "weekly", "backup_type": "weekly", "rotation": 0}})
    assert _tasks_until_done(client, controller, uuid)[-1] is None
    assert _image(url, got.json["image_id"]) is None
    assert [_image(url, i)["status"] for i in made[1:]] == ["active", "active"]
    assert _leftovers(cluster) == {}


def test_an_image_deleted_during_the_capture_ends_the_task_without_a_fault(world):
    client, controller, cluster, url, _tmp = world
    uuid = _boot(client, controller)
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"createImage": {"name": "gone"}})
    image_id = got.json["image_id"]
    req = urllib.request.Request(f"{url}/v2/images/{image_id}", method="DELETE")
    urllib.request.urlopen(req).close()
    assert _tasks_until_done(client, controller, uuid)[-1] is None
    shown = client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]
    assert shown["status"] == "ACTIVE" and "fault" not in shown
    assert _image(url, image_id) is None and _leftovers(cluster) == {}


def _without_agent(cluster, uuid):
    """The server's guest as one without the guest agent (as an image without qemu-guest-agent runs)."""
    store = cluster.store
    with store.lock:
        ((_key, vmi),) = [(k, v) for k, v in store.objects.of_kind("virtualmachineinstances").items() if k[2] == uuid]
        new = dict(vmi, metadata=dict(vmi["metadata"], annotations={
            **(vmi["metadata"].get("annotations") or {}), "emulator.openkeel.io/guest-agent": "false"}))
        new["status"] = dict(vmi["status"], conditions=[c for c in vmi["status"].get("conditions") or ()
                                                         if c.get("type") != "AgentConnected"])
        store.put(new)


def test_a_guest_without_agent_is_paused_for_the_copy_and_runs_again(world):
    client, controller, cluster, url, _tmp = world
    uuid = _boot(client, controller)
    _without_agent(cluster, uuid)
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"createImage": {"name": "cold"}})
    assert got.status_code == 202
    assert _tasks_until_done(client, controller, uuid)[-1] is None
    verbs = [path.rsplit("/", 1)[1] for method, path, _params in cluster.writes
             if method == "PUT" and path.endswith(("/pause", "/unpause")) and f"/{uuid}/" in path]
    assert verbs == ["pause", "unpause"]
    assert _image(url, got.json["image_id"])["status"] == "active"
    shown = until(client, controller, uuid, _settled("ACTIVE")).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)


def test_a_failed_capture_ends_as_novas_compute_ends_it(world):
    from openkeel_compute.emulator.faults import Fault

    client, controller, cluster, url, _tmp = world
    uuid = _boot(client, controller)
    cluster.inject(Fault(kind="snapshot-failure", name=uuid, message="VolumeSnapshot failed: no snapshot class"))
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"createImage": {"name": "broken"}})
    assert got.status_code == 202
    assert _tasks_until_done(client, controller, uuid)[-1] is None
    assert _image(url, got.json["image_id"]) is None  # Nova's delete_image_on_error
    shown = client.get(f"/v2.1/servers/{uuid}", headers=admin("2.96")).json["server"]
    assert shown["status"] == "ACTIVE" and "fault" not in shown  # Nova shows a fault in ERROR only
    assert _events(client, uuid) == ("createImage", [("compute_snapshot_instance", "Error")])
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=admin("2.51")).json
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{actions['instanceActions'][0]['request_id']}",
                     headers=admin("2.51")).json["instanceAction"]
    assert "no snapshot class" in got["events"][0]["traceback"]
    assert _leftovers(cluster) == {}


def test_a_server_deleted_during_the_capture_leaves_no_image(world):
    client, controller, cluster, url, _tmp = world
    uuid = _boot(client, controller)
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"createImage": {"name": "cut"}})
    image_id = got.json["image_id"]
    controller.run_once()  # the capture has begun
    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    assert until(client, controller, uuid, lambda g: g.status_code == 404).status_code == 404
    assert _image(url, image_id) is None and _leftovers(cluster) == {}
