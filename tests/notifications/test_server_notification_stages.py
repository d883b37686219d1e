"""The stages a server's notifications show, on OpenKeel alone and on each engine: Nova's compute's
(checked against the servers oracle in test_server_notifications_against_nova.py, which needs
../shared): the build's create.start once the node is chosen and its task stages, a reboot's pending and
started stages, and each action's start before its step's writes, its end after them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import admin
from tests.databases import ENGINES
from tests.notifications.server_world import notifying_world
from tests.server_world import DEMO, IMAGE, until

FLAVORS = [{"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1, "id": "1"},
           {"name": "m1.small", "ram": 2048, "vcpus": 1, "disk": 20, "id": "2"}]


def _settled(status: str) -> Any:
    return lambda got: (got.status_code == 200 and got.json["server"]["status"] == status
                        and got.json["server"]["OS-EXT-STS:task_state"] is None)


def _data(message: dict[str, Any]) -> dict[str, Any]:
    return message["payload"]["nova_object.data"]


def _tasks(messages: Any) -> list[tuple[str | None, str | None]]:
    """The (old, new) task of each instance.update, in order."""
    return [(_data(m)["state_update"]["nova_object.data"]["old_task_state"],
             _data(m)["state_update"]["nova_object.data"]["new_task_state"])
            for m in messages.versioned() if m["event_type"] == "instance.update"]


def _event(messages: Any, name: str) -> dict[str, Any]:
    found = [_data(m) for m in messages.versioned() if m["event_type"] == name]
    assert len(found) == 1, [m["event_type"] for m in messages.versioned()]
    return found[0]


def _act(client: Any, controller: Any, uuid: str, body: dict[str, Any], status: str) -> None:
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body=body)
    assert got.status_code == 202, got.text
    until(client, controller, uuid, _settled(status))


@pytest.mark.parametrize("database", ENGINES)
def test_each_event_shows_the_server_at_novas_stage(tmp_path, database) -> None:
    with notifying_world(tmp_path, database=database) as (client, controller, messages):
        for flavor in FLAVORS:
            assert client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": flavor}).status_code == 200
        got = client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
            "name": "web-1", "imageRef": IMAGE, "flavorRef": "1", "networks": "none"}})
        assert got.status_code == 202, got.text
        uuid = got.json["server"]["id"]
        until(client, controller, uuid, _settled("ACTIVE"))
        # the build: its node chosen (task cleared, zone set) when create.start goes, then Nova's stages
        start = _event(messages, "instance.create.start")
        assert (start["state"], start["task_state"], start["availability_zone"]) == ("building", None, "nova")
        stages = [new for _old, new in _tasks(messages)]
        assert [s for s in stages if s in (None, "networking", "block_device_mapping", "spawning")][:4] == [
            None, "networking", "block_device_mapping", "spawning"]
        assert _tasks(messages)[-1] == ("spawning", None)
        messages.clear()

        for kind, pending, started in (("SOFT", "reboot_pending", "reboot_started"),
                                       ("HARD", "reboot_pending_hard", "reboot_started_hard")):
            _act(client, controller, uuid, {"reboot": {"type": kind}}, "ACTIVE")
            assert _event(messages, "instance.reboot.start")["task_state"] == pending
            changes = [(old, new) for old, new in _tasks(messages) if old != new]  # a guest's power changes too
            assert changes == [(f"rebooting{'_hard' if kind == 'HARD' else ''}", pending), (pending, started),
                               (started, None)]
            messages.clear()

        _act(client, controller, uuid, {"resize": {"flavorRef": "2"}}, "VERIFY_RESIZE")
        assert _event(messages, "instance.resize_prep.start")["task_state"] == "resize_prep"
        assert _event(messages, "instance.resize_prep.end")["task_state"] == "resize_prep"
        finish = _event(messages, "instance.resize_finish.start")
        assert (finish["task_state"], finish["flavor"]["nova_object.data"]["name"]) == ("resize_finish", "m1.small")
        messages.clear()
        _act(client, controller, uuid, {"revertResize": None}, "ACTIVE")
        assert _event(messages, "instance.resize_revert.start")["task_state"] == "resize_reverting"
        end = _event(messages, "instance.resize_revert.end")
        assert (end["state"], end["flavor"]["nova_object.data"]["name"]) == ("active", "m1.tiny")
        messages.clear()

        _act(client, controller, uuid, {"rebuild": {"imageRef": IMAGE}}, "ACTIVE")
        assert _event(messages, "instance.rebuild.start")["task_state"] == "rebuilding"
        messages.clear()

        assert client.request("DELETE", f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
        until(client, controller, uuid, lambda got: got.status_code == 404)
        end = _event(messages, "instance.delete.end")
        assert (end["state"], end["task_state"]) == ("deleted", None)
