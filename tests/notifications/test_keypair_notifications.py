"""Key pair notifications: the KeypairPayload 1.0 and which API call sends which event, when.

The payload checks follow Nova 34.0.0's own notification samples (keypair-create-start/end,
keypair-import-start/end, keypair-delete-start/end); the API checks use oslo.messaging's in-memory
driver behind the real pipeline, and one run goes through the real RabbitMQ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from oslo_messaging.notify import _impl_test as in_memory_driver

from openkeel_compute import policies
from openkeel_compute.api.deploy import deploy
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from openkeel_compute.notifications import KeypairAction, Phase, build_keypair_payload, sender
from tests.api.keypairs_quotas.helpers import ED25519
from tests.conftest import admin, make_conf
from tests.notifications.rabbitmq import (
    api_publishing,
    receive,
)
from tests.wsgi_client import Client

FINGERPRINT_LEN = len("1e:2c:9b:56:79:4b:45:77:f9:ca:7a:98:2c:b0:d5:3c")


def test_payload_is_nova_s_keypair_payload_1_0() -> None:
    keypair = {"user_id": "fake", "name": "my-key", "type": "ssh", "public_key": ED25519,
               "fingerprint": "aa:bb", "id": 7, "created_at": None}
    assert build_keypair_payload(keypair) == {
        "nova_object.name": "KeypairPayload",
        "nova_object.namespace": "nova",
        "nova_object.version": "1.0",
        "nova_object.data": {"user_id": "fake", "name": "my-key", "fingerprint": "aa:bb",
                             "public_key": ED25519, "type": "ssh"},
    }


def test_a_start_payload_carries_nulls_for_what_is_not_known_yet() -> None:
    data = build_keypair_payload({"user_id": "fake", "name": "k", "type": "x509"})["nova_object.data"]
    assert data == {"user_id": "fake", "name": "k", "fingerprint": None, "public_key": None, "type": "x509"}


@pytest.mark.parametrize(("action", "phase", "expected"), [
    (KeypairAction.CREATE, Phase.START, "keypair.create.start"),
    (KeypairAction.IMPORT, Phase.END, "keypair.import.end"),
    (KeypairAction.DELETE, Phase.END, "keypair.delete.end"),
])
def test_event_types(action, phase, expected) -> None:
    from openkeel_compute.notifications.keypair import event_type

    assert event_type(action, phase) == expected


@pytest.fixture
def api(tmp_path) -> Iterator[tuple[Client, list]]:
    """The real pipeline with oslo.messaging's in-memory driver; yields the client and the messages."""
    policies.reset()
    conf = make_conf(
        tmp_path,
        DEFAULT={"host": "fake-mini"},
        notifications={"notification_format": "versioned"},
        oslo_messaging_notifications={"driver": "test", "transport_url": "fake:/"},
    )
    migration.sync(db_api.get_engine(conf))
    in_memory_driver.reset()
    client = Client(deploy(conf))
    yield client, Delivered(in_memory_driver.NOTIFICATIONS)
    sender.close_all(0)
    in_memory_driver.reset()
    policies.reset()
    db_api.dispose_all()


class Delivered:
    """The in-memory driver's messages, read once the background sender has handed over what it holds."""

    def __init__(self, box: list) -> None:
        self.box = box

    def _now(self) -> list:
        assert sender.drain_all(30), "the notification sender did not become idle"
        return self.box

    def __iter__(self):
        return iter(self._now())

    def __eq__(self, other) -> bool:
        return self._now() == other

    def clear(self) -> None:
        self._now().clear()


def _sent(messages: list) -> list[tuple[str, dict]]:
    return [(message["event_type"], message["payload"]["nova_object.data"]) for _, message, _, _ in messages]


def _create(client: Client, body: dict, version: str = "2.2", token: str = "demo:demo"):
    return client.post("/v2.1/os-keypairs", json_body={"keypair": body},
                       headers={"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}"})


def test_a_generated_key_pair_sends_create_start_then_end(api) -> None:
    client, messages = api
    made = _create(client, {"name": "gen"})
    assert made.status_code == 201, made.text
    sent = _sent(messages)
    assert [event for event, _ in sent] == ["keypair.create.start", "keypair.create.end"]
    assert sent[0][1] == {"user_id": "demo", "name": "gen", "fingerprint": None, "public_key": None, "type": "ssh"}
    key = made.json["keypair"]
    assert sent[1][1] == {"user_id": "demo", "name": "gen", "fingerprint": key["fingerprint"],
                          "public_key": key["public_key"], "type": "ssh"}
    assert len(key["fingerprint"]) == FINGERPRINT_LEN
    for _, message, priority, _ in messages:
        assert (priority, message["publisher_id"]) == ("INFO", "nova-api:fake-mini")
        assert "nova_object.changes" not in message["payload"]


def test_an_imported_key_sends_import_start_with_the_key_then_end_with_its_fingerprint(api) -> None:
    client, messages = api
    made = _create(client, {"name": "imp", "public_key": ED25519}, version="2.92")
    assert made.status_code == 201, made.text
    sent = _sent(messages)
    assert [event for event, _ in sent] == ["keypair.import.start", "keypair.import.end"]
    assert sent[0][1] == {"user_id": "demo", "name": "imp", "fingerprint": None, "public_key": ED25519,
                          "type": "ssh"}
    assert sent[1][1] == dict(sent[0][1], fingerprint=made.json["keypair"]["fingerprint"])


def test_an_admin_importing_for_another_user_names_that_user(api) -> None:
    client, messages = api
    made = _create(client, {"name": "theirs", "public_key": ED25519, "user_id": "alice"}, version="2.10",
                   token="admin:admin")
    assert made.status_code == 201, made.text
    assert {data["user_id"] for _, data in _sent(messages)} == {"alice"}


def test_failures_after_the_start_leave_a_start_without_an_end_as_nova_does(api) -> None:
    client, messages = api
    assert _create(client, {"name": "dup", "public_key": ED25519}).status_code == 201
    messages.clear()
    assert _create(client, {"name": "dup", "public_key": ED25519}).status_code == 409
    assert [event for event, _ in _sent(messages)] == ["keypair.import.start"]
    messages.clear()
    bad = _create(client, {"name": "bad", "public_key": "ssh-rsa not-a-key"})
    assert bad.status_code == 400, bad.text
    assert [event for event, _ in _sent(messages)] == ["keypair.import.start"]


def test_requests_refused_before_the_work_send_nothing(api) -> None:
    client, messages = api
    assert _create(client, {"name": "bad name!"}, version="2.2").status_code == 400
    assert _create(client, {"name": "k", "public_key": ED25519, "user_id": "alice"},
                   version="2.10").status_code == 403
    assert client.delete("/v2.1/os-keypairs/missing", headers=admin("2.2")).status_code == 404
    assert client.get("/v2.1/os-keypairs", headers=admin("2.2")).status_code == 200
    assert messages == []


def test_delete_sends_start_and_end_with_the_pair_as_it_was(api) -> None:
    client, messages = api
    made = _create(client, {"name": "gone", "public_key": ED25519})
    messages.clear()
    deleted = client.delete("/v2.1/os-keypairs/gone", headers={"X-Auth-Token": "demo:demo",
                                                                "OpenStack-API-Version": "compute 2.2"})
    assert deleted.status_code == 204
    sent = _sent(messages)
    assert [event for event, _ in sent] == ["keypair.delete.start", "keypair.delete.end"]
    expected = {"user_id": "demo", "name": "gone", "fingerprint": made.json["keypair"]["fingerprint"],
                "public_key": ED25519, "type": "ssh"}
    assert [data for _, data in sent] == [expected, expected]


def test_key_pair_notifications_reach_a_rabbitmq_consumer(tmp_path, broker) -> None:
    with api_publishing(tmp_path, broker, "keypair-test") as (client, queue):
        assert _create(client, {"name": "rabbit", "public_key": ED25519}).status_code == 201
        assert client.delete("/v2.1/os-keypairs/rabbit", headers={"X-Auth-Token": "demo:demo"}).status_code == 202
        messages = receive(broker, queue, 4)
    bodies = [json.loads(json.loads(m.body)["oslo.message"]) for m in messages]
    assert [b["event_type"] for b in bodies] == [
        "keypair.import.start", "keypair.import.end", "keypair.delete.start", "keypair.delete.end"]
    assert {(b["publisher_id"], b["priority"]) for b in bodies} == {("nova-api:api-test", "INFO")}
    assert {b["payload"]["nova_object.name"] for b in bodies} == {"KeypairPayload"}


@pytest.mark.oracle
def test_messages_match_what_nova_sends_for_the_same_key_pairs(make_conf) -> None:
    """Differential: Nova 34.0.0's own notify_about_keypair_action against ours, message for message."""
    import pathlib
    import subprocess

    from openkeel_compute.notifications import ApiNotifier
    from tests.api.oracles import oracle_python

    nova_python = oracle_python("run-oracle.sh")
    start = {"user_id": "fake", "name": "my-key", "type": "ssh", "fingerprint": None, "public_key": None}
    stored = dict(start, fingerprint="1e:2c:9b:56:79:4b:45:77:f9:ca:7a:98:2c:b0:d5:3c", public_key=ED25519)
    x509 = dict(stored, name="cert é", type="x509", user_id=None)
    cases = [("create", "start", start), ("create", "end", stored), ("import", "start", dict(start, public_key=ED25519)),
             ("import", "end", stored), ("delete", "start", x509), ("delete", "end", x509)]
    script = pathlib.Path(__file__).with_name("nova_oracle_keypairs.py")
    done = subprocess.run([str(nova_python), "-W", "ignore", str(script)], capture_output=True, text=True,
                          timeout=120, check=False, input=json.dumps(
                              [{"action": a, "phase": p, "keypair": k} for a, p, k in cases]))
    assert done.returncode == 0, f"oracle script failed:\n{done.stderr[-3000:]}"
    nova = json.loads(done.stdout)

    in_memory_driver.reset()
    conf = make_conf(oslo_messaging_notifications__driver=["test"], oslo_messaging_notifications__transport_url="fake:/",
                     notifications__notification_format="versioned")
    notifier = ApiNotifier(conf, host="fake-mini")
    for action, phase, keypair in cases:
        notifier.keypair(KeypairAction(action), Phase(phase), keypair)
    notifier.close()
    ours = [{"event_type": m["event_type"], "publisher_id": m["publisher_id"], "priority": priority,
             "payload": m["payload"]} for _, m, priority, _ in in_memory_driver.NOTIFICATIONS]
    in_memory_driver.reset()
    assert ours == nova
