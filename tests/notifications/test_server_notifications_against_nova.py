"""Differential: the server notifications OpenKeel sends against those Nova 34.0.0 sends, operation by operation.

The same operations (create, os-stop, os-start, reboot, lock, unlock, pause, unpause, a rename, delete)
run on the Nova servers oracle (../shared/nova-oracle, its notifications captured in memory and read
through nova_servers_oracle_capture.py) and on OpenKeel (API and controller on the built-in cluster,
oslo.messaging's in-memory driver), both with ``notification_format = both`` and
``notify_on_state_change = vm_and_task_state``. For each operation:

- the legacy and the versioned events other than the updates come in the same order, with the same
  priority, publisher service and payload object name and version;
- each such event's payload is the same once what differs by nature is replaced (ids, times, hosts,
  the test images' properties);
- the update a request causes and the last update of the operation have the same payload too.

What OpenKeel knowingly does differently is listed in ``KNOWN`` with the reason, field by field.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests._shared import shared_path
from tests.api.oracles import free_port, oracle_python
from tests.conftest import admin
from tests.databases import ENGINES
from tests.notifications.server_world import notifying_world
from tests.server_world import DEMO, IMAGE, until

CAPTURE = pathlib.Path(__file__).with_name("nova_servers_oracle_capture.py")
NOVA_IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"  # the oracle's Glance fixture image
FLAVOR = {"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1, "id": "1"}  # the oracle's flavor "1"
RECLAIM = 3600  # [DEFAULT] reclaim_instance_interval on both: DELETE keeps the server (soft delete)
LARGER = {"name": "m1.small", "ram": 2048, "vcpus": 1, "disk": 20, "id": "2"}  # and "2"

#: (operation, its request, the status it settles in)
STEPS: list[tuple[str, tuple[str, str, Any], str]] = [
    ("stop", ("POST", "action", {"os-stop": None}), "SHUTOFF"),
    ("start", ("POST", "action", {"os-start": None}), "ACTIVE"),
    ("reboot", ("POST", "action", {"reboot": {"type": "SOFT"}}), "ACTIVE"),
    ("lock", ("POST", "action", {"lock": None}), "ACTIVE"),
    ("unlock", ("POST", "action", {"unlock": None}), "ACTIVE"),
    ("pause", ("POST", "action", {"pause": None}), "PAUSED"),
    ("unpause", ("POST", "action", {"unpause": None}), "ACTIVE"),
    ("rescue", ("POST", "action", {"rescue": {"adminPass": "r3scue"}}), "RESCUE"),
    ("unrescue", ("POST", "action", {"unrescue": None}), "ACTIVE"),
    ("rename", ("PUT", "", {"server": {"name": "web-2"}}), "ACTIVE"),
    ("rebuild", ("POST", "action", {"rebuild": {"imageRef": "<image>"}}), "ACTIVE"),
    ("resize", ("POST", "action", {"resize": {"flavorRef": "2"}}), "VERIFY_RESIZE"),
    ("revert", ("POST", "action", {"revertResize": None}), "ACTIVE"),
    ("resize again", ("POST", "action", {"resize": {"flavorRef": "2"}}), "VERIFY_RESIZE"),
    ("confirm", ("POST", "action", {"confirmResize": None}), "ACTIVE"),
    ("soft delete", ("DELETE", "", None), "SOFT_DELETED"),
    ("restore", ("POST", "action", {"restore": None}), "ACTIVE"),
    ("delete", ("POST", "action", {"forceDelete": None}), "GONE"),
]

#: (operation, event type, field) -> why OpenKeel's value differs from Nova's fake-driver cloud
KNOWN: dict[tuple[str, str, str], str] = {
    ("create", "instance.create.start", "updated_at"):
        "Nova's payload of the build's first compute stage carries no update time yet (its instance.update of "
        "that save neither); OpenKeel's is the time of the write that chose the node",
    # Nova's compute saves the server once more after these operations' end (the claim's migration context
    # dropped: rt.finish_evacuation, drop_migration_context), a save with no state change that is its last
    # update; OpenKeel keeps no migration context on the server's row, its last update is the one that ends
    # the task (compared: the same change, one save earlier)
    ("rebuild", "instance.update", "state_update"): "Nova's save after rebuild.end (see above)",
    ("rebuild", "compute.instance.update", "old_task_state"): "as above",
    ("revert", "instance.update", "state_update"): "Nova's save after resize_revert.end (see above)",
    ("revert", "compute.instance.update", "old_state"): "as above",
    ("revert", "compute.instance.update", "old_task_state"): "as above",
    ("confirm", "instance.update", "state_update"): "Nova's save after resize_confirm.end (see above)",
    ("confirm", "compute.instance.update", "old_state"): "as above",
    ("resize", "instance.resize.end", "power_state"):
        "Nova's fake driver's migrate_disk_and_power_off leaves the guest running; KubeVirt's VM is stopped for "
        "the resize, as libvirt's guest is powered off",
    ("resize", "instance.resize_finish.start", "power_state"): "as above: off until finish_resize starts it",
    ("resize again", "instance.resize.end", "power_state"): "as for resize",
    ("resize again", "instance.resize_finish.start", "power_state"): "as for resize",
    ("soft delete", "instance.soft_delete.end", "power_state"):
        "Nova's fake driver keeps a soft-deleted guest running; OpenKeel stops it, as Nova's libvirt driver does",
    ("restore", "instance.restore.start", "power_state"): "as above: stopped until the restore starts it",
    ("pause", "instance.pause.end", "power_state"): "Nova's fake driver leaves a paused guest running",
    ("pause", "instance.update", "power_state"): "as above",
    ("soft delete", "instance.update", "power_state"): "Nova's fake driver keeps a soft-deleted guest running; "
                                                       "OpenKeel stops it, as Nova's libvirt driver does",
    ("restore", "instance.update", "power_state"): "as above: stopped until the restore starts it",
    ("unpause", "instance.update", "power_state"): "as above",
    ("unpause", "instance.unpause.start", "power_state"): "as above",
    ("rescue", "instance.rescue.end", "power_state"):
        "Nova's fake driver reports a rescued guest shut down; KubeVirt's rescue guest runs, as libvirt's does",
    ("rescue", "instance.update", "power_state"): "as above",
    ("rescue", "instance.exists", "state"):
        "the usage is sent with the rescue's end, once the server is RESCUED (Nova: just before it saves that)",
    ("rescue", "instance.exists", "task_state"): "as above",
    ("rescue", "compute.instance.exists", "state"): "as above",
    ("rescue", "compute.instance.exists", "state_description"): "as above",
    ("unrescue", "instance.unrescue.start", "power_state"):
        "Nova's fake driver reports a rescued guest shut down; KubeVirt's rescue guest runs, as libvirt's does",
    ("unrescue", "instance.update", "power_state"): "as above",
}

_TIME_KEYS = {"created_at", "launched_at", "updated_at", "deleted_at", "terminated_at", "audit_period_beginning",
              "audit_period_ending"}
_ID_KEYS = {"uuid", "instance_id", "request_id", "reservation_id", "image_uuid"}
_HOST_KEYS = {"host", "node"}
# the test images differ (Nova's fixture image has other properties and another name and URL)
_IMAGE_KEYS = {"image_meta", "architecture", "image_ref_url"}
# each side's test image by its name: a name is compared as "the image booted", an empty or other one fails
NOVA_IMAGE_NAME = "fakeimage123456"
_IMAGE_NAMES = {NOVA_IMAGE_NAME: "<the image's name>", "cirros": "<the image's name>"}


def normal(value: Any, key: str = "") -> Any:
    if key in _IMAGE_KEYS:
        return "<image>"
    if isinstance(value, dict):
        return {k: normal(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v) for v in value]
    if key in _TIME_KEYS and value:
        return "<time>"
    if key in _ID_KEYS and value:
        return "<id>"
    if key in _HOST_KEYS and value:
        return "<host>"
    if key in ("image_name", "rescue_image_name"):
        return _IMAGE_NAMES.get(value, value)
    return value


def _data(payload: dict[str, Any]) -> dict[str, Any]:
    return payload.get("nova_object.data", payload)


def _shape(message: dict[str, Any]) -> tuple[str, str, str, str | None, str | None]:
    payload = message["payload"]
    source = re.split(r"[.:]", message["publisher_id"])[0]
    return (message["event_type"], message["priority"], source, payload.get("nova_object.name"),
            payload.get("nova_object.version"))


# -- the two clouds ---------------------------------------------------------------------------------

@contextlib.contextmanager
def nova_oracle() -> Iterator[str]:
    script = shared_path("nova-oracle/servers_oracle.py")
    python = oracle_python("run-servers-oracle.sh")  # its virtualenv made once, whichever test comes first
    port = free_port()
    tmp = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"nova-notifications-{port}"
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / "out.log"
    env = dict(os.environ, TMPDIR=str(tmp), OS_NOVA_DISABLE_EVENTLET_PATCHING="1")
    with out.open("w") as sink:
        process = subprocess.Popen(
            [str(python), str(CAPTURE), str(script), "--port", str(port), "--log", str(tmp / "nova.log"),
             "--flag", "notifications.notification_format=both",
             "--flag", "notifications.notify_on_state_change=vm_and_task_state",
             "--flag", f"DEFAULT.reclaim_instance_interval={RECLAIM}"],
            stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "READY" not in out.read_text():
            assert process.poll() is None and time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.25)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


class Nova:
    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, method=method, data=data, headers={
            "X-Auth-Token": "demo:demo-project", "OpenStack-API-Version": "compute 2.96",
            "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                text = resp.read()
                return resp.status, json.loads(text) if text else None
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def settle(self, uuid: str, status: str) -> None:
        for _ in range(300):
            code, body = self.call("GET", f"/v2.1/servers/{uuid}")
            if (code == 404 and status == "GONE") or (code == 200 and body["server"]["status"] == status
                                                      and body["server"]["OS-EXT-STS:task_state"] is None):
                time.sleep(0.3)  # the compute's last notifications follow its last save
                return
            time.sleep(0.1)
        raise AssertionError(f"Nova: server {uuid} never reached {status}")

    def notes(self) -> dict[str, list[dict[str, Any]]]:
        _, body = self.call("GET", "/__notifications")
        self.call("DELETE", "/__notifications")
        return body


class OpenKeel:
    def __init__(self, client: Any, controller: Any, messages: Any) -> None:
        self.client, self.controller, self.messages = client, controller, messages

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        got = self.client.request(method, path, headers=DEMO, json_body=body) if body is not None else \
            self.client.request(method, path, headers=DEMO)
        return got.status_code, (got.json if got.content else None)

    def settle(self, uuid: str, status: str) -> None:
        def done(got: Any) -> bool:
            if status == "GONE":
                return got.status_code == 404
            return (got.status_code == 200 and got.json["server"]["status"] == status
                    and got.json["server"]["OS-EXT-STS:task_state"] is None)

        assert done(until(self.client, self.controller, uuid, done)), f"OpenKeel: {uuid} never {status}"

    def notes(self) -> dict[str, list[dict[str, Any]]]:
        found = {"versioned": self.messages.versioned(), "legacy": self.messages.legacy()}
        self.messages.clear()
        return found


def drive(cloud: Any, image: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Run the operations; the notifications of each, by operation."""
    cloud.notes()
    code, body = cloud.call("POST", "/v2.1/servers", {"server": {
        "name": "web-1", "imageRef": image, "flavorRef": FLAVOR["id"], "networks": "none"}})
    assert code == 202, body
    uuid = body["server"]["id"]
    cloud.settle(uuid, "ACTIVE")
    seen = {"create": cloud.notes()}
    for name, (method, suffix, request), status in STEPS:
        path = f"/v2.1/servers/{uuid}" + (f"/{suffix}" if suffix else "")
        if request and "rebuild" in request:
            request = {"rebuild": {"imageRef": image}}
        code, body = cloud.call(method, path, request)
        assert code in (200, 202, 204), (name, code, body)
        cloud.settle(uuid, status)
        seen[name] = cloud.notes()
    return seen


@pytest.fixture(scope="module")
def nova_notifications() -> dict[str, dict[str, list[dict[str, Any]]]]:
    with nova_oracle() as base:
        return drive(Nova(base), NOVA_IMAGE)


@pytest.fixture(params=ENGINES)
def openkeel_notifications(request, tmp_path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """OpenKeel's notifications of the same operations, on each engine: the notifications are sent after the
    commit of what they report, which each engine's transactions must get right."""
    with notifying_world(tmp_path, reclaim=RECLAIM, database=request.param) as (client, controller, messages):
        for flavor in (FLAVOR, LARGER):
            got = client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": flavor})
            assert got.status_code == 200, got.text
        return drive(OpenKeel(client, controller, messages), IMAGE)


# -- the comparison ----------------------------------------------------------------------------------

def _not_updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if not m["event_type"].endswith("instance.update")
            and not m["event_type"].startswith("scheduler.")]


def _updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["event_type"].endswith("instance.update")]


def _compare(step: str, nova: dict[str, Any], ours: dict[str, Any], problems: list[str]) -> None:
    event = nova["event_type"]
    theirs, mine = _data(normal(nova["payload"])), _data(normal(ours["payload"]))
    for key in sorted(set(theirs) | set(mine)):
        if theirs.get(key, "<absent>") == mine.get(key, "<absent>") or (step, event, key) in KNOWN or (
                step, "*", key) in KNOWN:
            continue
        problems.append(f"{step} {event} {key}: Nova {theirs.get(key, '<absent>')!r}, "
                        f"OpenKeel {mine.get(key, '<absent>')!r}")


@pytest.mark.oracle
def test_server_notifications_match_what_nova_sends(nova_notifications, openkeel_notifications) -> None:
    problems: list[str] = []
    if os.environ.get("OPENKEEL_NOTIFICATIONS_DUMP"):  # both clouds' notifications, to read a difference
        pathlib.Path(os.environ["OPENKEEL_NOTIFICATIONS_DUMP"]).write_text(json.dumps(
            {"nova": nova_notifications, "openkeel": openkeel_notifications}, indent=1, default=str))
    for step, formats in nova_notifications.items():
        for form in ("versioned", "legacy"):
            theirs, mine = formats[form], openkeel_notifications[step][form]
            nova_events, our_events = _not_updates(theirs), _not_updates(mine)
            if [_shape(m) for m in nova_events] != [_shape(m) for m in our_events]:
                problems.append(f"{step} {form}: Nova sent {[_shape(m) for m in nova_events]}, "
                                f"OpenKeel {[_shape(m) for m in our_events]}")
                continue
            for nova, ours in zip(nova_events, our_events, strict=True):
                _compare(step, nova, ours, problems)
            nova_updates, our_updates = _updates(theirs), _updates(mine)
            if bool(nova_updates) != bool(our_updates):
                problems.append(f"{step} {form}: Nova sent {len(nova_updates)} updates, OpenKeel {len(our_updates)}")
                continue
            pairs = [(nova_updates[-1], our_updates[-1])]
            if step != "create":  # the request's own update (a create's is the conductor's in Nova)
                pairs.append((nova_updates[0], our_updates[0]))
            for nova, ours in pairs:
                _compare(step, nova, ours, problems)
    assert not problems, "\n".join(problems)


def test_known_differences_name_events_that_exist() -> None:
    for step, event, _field in KNOWN:
        assert step == "create" or step in {name for name, _, _ in STEPS}, step
        assert event == "*" or event.startswith(("instance.", "compute.instance."))
