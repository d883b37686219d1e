"""Server notifications on OpenKeel alone: which format goes out, when updates are sent, and that a write
rolled back notifies nothing. (The payloads themselves are compared with Nova's in
test_server_notifications_against_nova.py.)"""

from __future__ import annotations

import pytest

from openkeel_compute.compute.instances import cas, instance_actions
from openkeel_compute.db import api as db_api
from openkeel_compute.notifications import server_events
from tests.conftest import admin
from tests.databases import ENGINES
from tests.notifications.server_world import notifying_world
from tests.server_world import DEMO, IMAGE, until

FLAVOR = {"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1, "id": "1"}


def _settled(status):
    return lambda got: (got.status_code == 200 and got.json["server"]["status"] == status
                        and got.json["server"]["OS-EXT-STS:task_state"] is None)


def _boot_and_stop(client, controller) -> str:
    assert client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": FLAVOR}).status_code == 200
    got = client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
        "name": "web-1", "imageRef": IMAGE, "flavorRef": "1", "networks": "none"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    until(client, controller, uuid, _settled("ACTIVE"))
    assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-stop": None}).status_code == 202
    until(client, controller, uuid, _settled("SHUTOFF"))
    return uuid


@pytest.mark.parametrize(("form", "versioned", "legacy"), [
    ("unversioned", False, True), ("versioned", True, False), ("both", True, True)])
def test_the_format_decides_which_notifications_go_out(tmp_path, form, versioned, legacy) -> None:
    with notifying_world(tmp_path, notification_format=form, state_change=None) as (client, controller, messages):
        _boot_and_stop(client, controller)
        types = [m["event_type"] for m in messages.all()]
    server_types = [t for t in types if "instance." in t]
    assert ("instance.power_off.end" in server_types) is versioned
    assert ("compute.instance.power_off.end" in server_types) is legacy
    assert not [t for t in server_types if t.endswith("instance.update")]  # notify_on_state_change unset
    assert ("flavor.create" in types) is versioned  # flavors: versioned only


def _stop_updates(messages) -> list[dict]:
    return [m["payload"]["nova_object.data"]["state_update"]["nova_object.data"] for m in messages.versioned()
            if m["event_type"] == "instance.update"
            and m["payload"]["nova_object.data"]["task_state"] in ("powering-off", None)
            and m["payload"]["nova_object.data"]["state"] in ("active", "stopped")]


@pytest.mark.parametrize("database", ENGINES)
def test_vm_state_reports_state_changes_only(tmp_path, database) -> None:
    with notifying_world(tmp_path, notification_format="versioned", state_change="vm_state",
                         database=database) as (
            client, controller, messages):
        _boot_and_stop(client, controller)
        updates = _stop_updates(messages)
    assert {"old_state": "active", "state": "active", "old_task_state": "powering-off",
            "new_task_state": "powering-off"} in updates  # a task change: the current task in both fields
    assert {"old_state": "active", "state": "stopped", "old_task_state": "powering-off",
            "new_task_state": None} in updates


@pytest.mark.parametrize("database", ENGINES)
def test_a_write_rolled_back_notifies_nothing(tmp_path, database) -> None:
    with notifying_world(tmp_path, notification_format="both", database=database) as (client, controller, messages):
        uuid = _boot_and_stop(client, controller)
        messages.clear()
        engine = server_events.installed().engine
        with pytest.raises(RuntimeError), db_api.transaction(engine) as conn:
            cas.save_state(conn, uuid, vm_state="error")
            raise RuntimeError("rolled back")
        assert messages.all() == []
        with db_api.transaction(engine) as conn:
            cas.save_state(conn, uuid, vm_state="error")
        assert sorted(m["event_type"] for m in messages.all()) == ["compute.instance.update", "instance.update"]


@pytest.mark.parametrize("database", ENGINES)
def test_a_step_ending_in_a_fault_sends_its_error_with_the_fault(tmp_path, database) -> None:
    """A build whose compute step ends in error: instance.create.error (priority ERROR, the fault as an
    ExceptionPayload 1.1) and compute.instance.create.error (message and code), as Nova's compute sends them;
    a power-off has no error notification in Nova and sends none."""
    from openkeel_compute.model import events

    with notifying_world(tmp_path, notification_format="both", state_change=None, database=database) as (
            client, _controller, messages):
        assert client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": FLAVOR}).status_code == 200
        got = client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
            "name": "web-1", "imageRef": IMAGE, "flavorRef": "1", "networks": "none"}})
        uuid = got.json["server"]["id"]
        engine = server_events.installed().engine
        messages.clear()
        with db_api.transaction(engine) as conn:
            action = instance_actions.action_for_request(conn, uuid, instance_actions.actions_of(conn, uuid)[0]["request_id"])
            build = instance_actions.start_event(conn, action, events.BUILD)
            stop = instance_actions.start_event(conn, action, events.STOP)
            instance_actions.finish_event(conn, build, "Error", details="No valid host was found. There are not enough "
                                          "hosts available.", traceback="Traceback (most recent call last): ...")
            instance_actions.finish_event(conn, stop, "Error", details="the cluster refused")
        sent = {m["event_type"]: m for m in messages.all()}
    # the build's event starting sends no create.start: the build step sends it once the node is chosen
    assert set(sent) == {"instance.power_off.start", "compute.instance.power_off.start", "instance.create.error",
                         "compute.instance.create.error"}
    error = sent["instance.create.error"]
    assert error["priority"] == "ERROR"
    assert error["payload"]["nova_object.name"] == "InstanceCreatePayload"
    fault = error["payload"]["nova_object.data"]["fault"]
    assert (fault["nova_object.name"], fault["nova_object.version"]) == ("ExceptionPayload", "1.1")
    assert fault["nova_object.data"]["exception"] == "NoValidHost"
    assert fault["nova_object.data"]["exception_message"].startswith("No valid host was found.")
    assert set(fault["nova_object.data"]) == {"module_name", "function_name", "exception", "exception_message",
                                              "traceback"}
    legacy = sent["compute.instance.create.error"]
    assert legacy["priority"] == "ERROR"
    assert (legacy["payload"]["code"], legacy["payload"]["message"][:22]) == (500, "No valid host was foun")


def test_nova_s_default_format_with_a_driver_sends_legacy_ones_and_without_one_loads_nothing(tmp_path) -> None:
    import subprocess
    import sys

    probe = ("import sys\nfrom openkeel_compute.conf import build_conf\n"
             "from openkeel_compute.notifications.server import ServerNotifier\n"
             "n = ServerNotifier(build_conf(sys.argv[1:]), host='h')\n"
             "print(n.legacy_enabled, n.enabled, 'oslo_messaging' in sys.modules)\n")
    configured = tmp_path / "driver.conf"
    configured.write_text("[oslo_messaging_notifications]\ndriver = test\ntransport_url = fake:/\n")
    runs = [subprocess.run([sys.executable, "-W", "ignore", "-c", probe, *args], capture_output=True, text=True,
                           check=True, timeout=120).stdout.split() for args in ([], ["--config-file", str(configured)])]
    assert runs == [["False", "False", "False"], ["True", "False", "True"]]


def _with_a_volume(uuid: str) -> str:
    """A volume mapping of the server written as an attach writes it (the volume itself plays no part)."""
    from openkeel_compute.compute import block_device_rows

    volume = "3f1c9a36-0c36-4a3f-9d1e-7e0b5d0c2a11"
    with db_api.transaction(server_events.installed().engine) as conn:
        block_device_rows.record(conn, uuid, [{
            "source_type": "volume", "destination_type": "volume", "volume_id": volume, "device_name": "/dev/vdb",
            "boot_index": None, "delete_on_termination": False, "tag": "data"}])
    return volume


def _block_devices(messages, event_type: str):
    [payload] = [m["payload"]["nova_object.data"] for m in messages.versioned() if m["event_type"] == event_type]
    return payload["block_devices"]


@pytest.mark.parametrize("database", ENGINES)
def test_the_events_nova_sends_with_the_volumes_list_them_and_the_others_send_null(tmp_path, database) -> None:
    with notifying_world(tmp_path, notification_format="versioned", database=database) as (
            client, controller, messages):
        uuid = _boot_and_stop(client, controller)
        volume = _with_a_volume(uuid)
        messages.clear()
        assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-start": None}).status_code == 202
        until(client, controller, uuid, _settled("ACTIVE"))
        assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO,
                           json_body={"reboot": {"type": "HARD"}}).status_code == 202
        until(client, controller, uuid, _settled("ACTIVE"))
        assert _block_devices(messages, "instance.power_on.end") is None  # Nova's power_on has no bdms
        for event in ("instance.reboot.start", "instance.reboot.end"):
            assert _block_devices(messages, event) == [{
                "nova_object.name": "BlockDevicePayload", "nova_object.namespace": "nova",
                "nova_object.version": "1.0", "nova_object.data": {
                    "device_name": "/dev/vdb", "boot_index": None, "delete_on_termination": False,
                    "volume_id": volume, "tag": "data"}}]


def test_bdms_in_notifications_lists_the_volumes_in_every_event(tmp_path) -> None:
    with notifying_world(tmp_path, notification_format="versioned", bdms=True) as (client, controller, messages):
        uuid = _boot_and_stop(client, controller)
        volume = _with_a_volume(uuid)
        messages.clear()
        assert client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body={"os-start": None}).status_code == 202
        until(client, controller, uuid, _settled("ACTIVE"))
        [listed] = _block_devices(messages, "instance.power_on.end")
        assert listed["nova_object.data"]["volume_id"] == volume
        updates = [m["payload"]["nova_object.data"]["block_devices"] for m in messages.versioned()
                   if m["event_type"] == "instance.update"]
        assert updates and all(len(u) == 1 for u in updates)


@pytest.mark.parametrize("database", ENGINES)
def test_interface_attach_and_detach_notify_as_novas_compute(tmp_path, database) -> None:
    """instance.interface_attach.start/.end and instance.interface_detach.start/.end (versioned only, an
    InstanceActionPayload); .error only when the attach itself failed (InterfaceAttachFailed), not when
    Neutron refused the port (Nova's compute raises those after .start, without .error)."""
    from openkeel_compute.model import events

    with notifying_world(tmp_path, notification_format="both", state_change=None, database=database) as (
            client, _controller, messages):
        assert client.post("/v2.1/flavors", headers=admin(), json_body={"flavor": FLAVOR}).status_code == 200
        got = client.post("/v2.1/servers", headers=DEMO, json_body={"server": {
            "name": "web-1", "imageRef": IMAGE, "flavorRef": "1", "networks": "none"}})
        uuid = got.json["server"]["id"]
        engine = server_events.installed().engine
        messages.clear()
        with db_api.transaction(engine) as conn:
            action = instance_actions.action_for_request(conn, uuid, instance_actions.actions_of(conn, uuid)[0]["request_id"])
            refused = instance_actions.start_event(conn, action, events.ATTACH_INTERFACE)
            instance_actions.finish_event(conn, refused, "Error", details="Port p-1 is still in use.")
        types = [m["event_type"] for m in messages.all()]
        assert types == ["instance.interface_attach.start"]
        messages.clear()
        with db_api.transaction(engine) as conn:
            failed = instance_actions.start_event(conn, action, events.ATTACH_INTERFACE)
            instance_actions.finish_event(conn, failed, "Error",
                                          details=f"Failed to attach network adapter device to {uuid}")
            done = instance_actions.start_event(conn, action, events.ATTACH_INTERFACE)
            instance_actions.finish_event(conn, done, "Success")
            detach = instance_actions.start_event(conn, action, events.DETACH_INTERFACE)
            instance_actions.finish_event(conn, detach, "Success")
        sent = [(m["event_type"], m["payload"]["nova_object.name"]) for m in messages.all()]
        error = next(m for m in messages.all() if m["event_type"] == "instance.interface_attach.error")
    assert sorted(sent) == sorted([
        ("instance.interface_attach.start", "InstanceActionPayload"),
        ("instance.interface_attach.error", "InstanceActionPayload"),
        ("instance.interface_attach.start", "InstanceActionPayload"),
        ("instance.interface_attach.end", "InstanceActionPayload"),
        ("instance.interface_detach.start", "InstanceActionPayload"),
        ("instance.interface_detach.end", "InstanceActionPayload")])
    assert error["priority"] == "ERROR"
    assert error["payload"]["nova_object.data"]["fault"]["nova_object.data"]["exception"] == "InterfaceAttachFailed"
