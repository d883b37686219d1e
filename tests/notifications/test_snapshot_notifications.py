"""instance.snapshot.start/.end carry Nova's InstanceActionSnapshotPayload 1.10 with ``snapshot_image_id``,
the image the createImage (or createBackup) makes (nova/compute/utils.py notify_about_instance_snapshot)."""

from __future__ import annotations

from openkeel_compute.compute.instances import instance_actions, updates
from openkeel_compute.compute.instances.base import Actor
from openkeel_compute.db import api as db_api
from openkeel_compute.model import events
from openkeel_compute.model import operations as ops
from openkeel_compute.notifications import server_events
from tests.conftest import admin
from tests.notifications.server_world import notifying_world
from tests.server_world import DEMO, IMAGE

FLAVOR = {"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1, "id": "1"}
SNAPSHOT = "6f1c3b4e-0d7e-4e59-9a0b-2f8e8f6b1c11"


def test_the_snapshot_notifications_name_the_image(tmp_path) -> None:
    with notifying_world(tmp_path, notification_format="versioned", state_change=None) as (client, _ctl, messages):
        assert client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": FLAVOR}).status_code == 200
        got = client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
            "name": "web-1", "imageRef": IMAGE, "flavorRef": "1", "networks": "none"}})
        uuid = got.json["server"]["id"]
        engine = server_events.installed().engine
        messages.clear()
        with db_api.transaction(engine) as conn:
            request_id = instance_actions.actions_of(conn, uuid)[0]["request_id"]
            action = instance_actions.action_for_request(conn, uuid, request_id)
            updates.outbox(conn, uuid, ops.SNAPSHOT, Actor("demo", "demo", request_id=request_id),
                           image_id=SNAPSHOT)
            instance_actions.finish_event(conn, instance_actions.start_event(conn, action, events.SNAPSHOT),
                                          "Success")
        sent = {m["event_type"]: m for m in messages.all()}
    for phase in ("start", "end"):
        payload = sent[f"instance.snapshot.{phase}"]["payload"]
        assert (payload["nova_object.name"], payload["nova_object.version"]) == ("InstanceActionSnapshotPayload",
                                                                                 "1.10")
        assert payload["nova_object.data"]["snapshot_image_id"] == SNAPSHOT
        assert payload["nova_object.data"]["uuid"] == uuid
