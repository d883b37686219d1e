"""The shelve events' notifications, as Nova's compute sends them: instance.shelve / shelve_offload /
unshelve .start and .end (versioned, InstanceActionPayload) and compute.instance.<same>.start/.end."""

from __future__ import annotations

from openkeel_compute.compute.instances import instance_actions
from openkeel_compute.db import api as db_api
from openkeel_compute.model import events
from openkeel_compute.notifications import server_events
from tests.conftest import admin
from tests.notifications.server_world import notifying_world
from tests.server_world import DEMO, IMAGE

FLAVOR = {"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1, "id": "1"}


def test_the_shelve_events_send_novas_notifications(tmp_path) -> None:
    with notifying_world(tmp_path, notification_format="both", state_change=None) as (client, _controller, messages):
        assert client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": FLAVOR}).status_code == 200
        got = client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
            "name": "web-1", "imageRef": IMAGE, "flavorRef": "1", "networks": "none"}})
        uuid = got.json["server"]["id"]
        engine = server_events.installed().engine
        messages.clear()
        with db_api.transaction(engine) as conn:
            action = instance_actions.action_for_request(conn, uuid, instance_actions.actions_of(conn, uuid)[0]["request_id"])
            for event in (events.SHELVE, events.SHELVE_OFFLOAD, events.UNSHELVE):
                instance_actions.finish_event(conn, instance_actions.start_event(conn, action, event), "Success")
        sent = {m["event_type"]: m for m in messages.all()}
    expected = {f"{prefix}{name}.{phase}" for prefix in ("instance.", "compute.instance.")
                for name in ("shelve", "shelve_offload", "unshelve") for phase in ("start", "end")}
    assert set(sent) == expected
    assert sent["instance.shelve.end"]["payload"]["nova_object.name"] == "InstanceActionPayload"
    assert sent["instance.unshelve.start"]["payload"]["nova_object.data"]["uuid"] == uuid
