"""Flavor operations through the API publish Nova's versioned notifications on the real RabbitMQ."""

from __future__ import annotations

import json

from tests.conftest import admin
from tests.notifications.rabbitmq import (
    api_publishing,
    broker,  # noqa: F401 - fixtures
    receive,
)


def test_each_flavor_change_publishes_one_notification_in_order(tmp_path, broker):  # noqa: F811
    v = admin("2.86")
    body = {"flavor": {"name": "notified", "ram": 2048, "vcpus": 2, "disk": 20, "id": "notified",
                       "os-flavor-access:is_public": False, "description": "first"}}
    with api_publishing(tmp_path, broker, "api-test") as (client, queue):
        assert client.post("/v2.1/flavors", headers=v, json_body=body).status_code == 200
        assert client.post("/v2.1/flavors", headers=v, json_body=body).status_code == 409, "no notification"
        assert client.post("/v2.1/flavors/notified/os-extra_specs", headers=v,
                           json_body={"extra_specs": {"hw:cpu_policy": "dedicated"}}).status_code == 200
        assert client.post("/v2.1/flavors/notified/action", headers=v,
                           json_body={"addTenantAccess": {"tenant": "proj-x"}}).status_code == 200
        assert client.put("/v2.1/flavors/notified", headers=v,
                          json_body={"flavor": {"description": "second"}}).status_code == 200
        assert client.delete("/v2.1/flavors/notified", headers=v).status_code == 202
        messages = receive(broker, queue, 5)
        assert broker.default_channel.basic_get(queue) is None, "one notification per change"

    bodies = [json.loads(json.loads(m.body)["oslo.message"]) for m in messages]
    assert [b["event_type"] for b in bodies] == [
        "flavor.create", "flavor.update", "flavor.update", "flavor.update", "flavor.delete"]
    assert {b["publisher_id"] for b in bodies} == {"nova-api:api-test"}
    data = [b["payload"]["nova_object.data"] for b in bodies]
    assert all(b["payload"]["nova_object.version"] == "1.4" for b in bodies)
    assert data[0]["flavorid"] == "notified" and data[0]["memory_mb"] == 2048 and data[0]["is_public"] is False
    assert data[0]["description"] == "first"
    assert data[1]["extra_specs"] == {"hw:cpu_policy": "dedicated"}
    assert data[2]["projects"] == ["proj-x"]
    assert data[3]["description"] == "second"
    assert data[4]["extra_specs"] is None and data[4]["projects"] is None
