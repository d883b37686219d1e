"""A server whose VirtualMachine is gone from the cluster (issues 27.1, 27.12).

Nova's power sync finds no guest: a server that ran is stopped (SHUTOFF, a "stop" action of no user, no
fault), and a start or a hard reboot defines the guest again from the server's record: here the VM is
made again (its own instancetype and preference, its Secrets, a root disk imported again from its image).
A rebuild makes it with the new image. A soft reboot of a guest that is gone falls back to a hard one, as
Nova's does; a pause of one ends at once in Nova's InstanceNotRunning fault. Nothing is retried for ever.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import admin, make_conf
from tests.databases import ENGINES, throwaway_database
from tests.server_world import DEMO, IMAGE, IMAGE_ALT, SETTLE_SECONDS, image_service, server_world


@pytest.fixture(params=ENGINES)
def world(request, tmp_path):
    """The API, the controller and the built-in cluster, on each supported database."""
    policies.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            got = client.post("/v2.1/flavors", headers=admin(), json_body={
                "flavor": {"name": "m1.small", "ram": 512, "vcpus": 1, "disk": 1, "id": "small"}})
            assert got.status_code == 200, got.text
            yield client, controller, cluster


def _server(client, uuid):
    return client.get(f"/v2.1/servers/{uuid}", headers=DEMO).json["server"]


def _until(client, controller, uuid, status, timeout=SETTLE_SECONDS):
    deadline = time.monotonic() + timeout
    while True:
        controller.run_once()
        server = _server(client, uuid)
        if (server["status"], server["OS-EXT-STS:task_state"]) == (status, None) or time.monotonic() > deadline:
            assert (server["status"], server["OS-EXT-STS:task_state"]) == (status, None), server
            return server
        time.sleep(0.05)


def _boot(client, controller):
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": "small", "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    _until(client, controller, uuid, "ACTIVE")
    return uuid


def _vm(cluster, uuid):
    found = [v for k, v in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    return found[0] if found else None


def _remove_vm(cluster, uuid):
    """The VM removed behind the controller's back, with what goes with it (its VMI, its disks)."""
    vm = _vm(cluster, uuid)
    namespace = vm["metadata"]["namespace"]
    for kind in ("VirtualMachineInstance", "VirtualMachine"):
        cluster.remove(kind, uuid, namespace)
    for (ns, name) in list(cluster.objects("DataVolume")):
        if ns == namespace and name.startswith(uuid):
            cluster.remove("DataVolume", name, ns)


def _action(client, uuid, body):
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body=body)
    assert got.status_code == 202, got.text


def _running(cluster, uuid):
    vmis = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    return bool(vmis) and vmis[0]["status"].get("phase") == "Running"


def _actions(client, uuid):
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=admin("2.96"))
    return [(a["action"], a["user_id"]) for a in got.json["instanceActions"]]


def test_a_vm_gone_from_the_cluster_is_powered_off_then_started_again(world):
    client, controller, cluster = world
    uuid = _boot(client, controller)
    _remove_vm(cluster, uuid)
    server = _until(client, controller, uuid, "SHUTOFF")
    assert "fault" not in server and server["OS-EXT-STS:power_state"] == 0  # no guest
    assert _actions(client, uuid)[0] == ("stop", None)  # Nova's power sync calls the stop API
    _action(client, uuid, {"os-start": None})
    _until(client, controller, uuid, "ACTIVE")
    assert _vm(cluster, uuid) is not None and _running(cluster, uuid)


@pytest.mark.parametrize("reboot", ["HARD", "SOFT"])
def test_a_reboot_of_a_server_whose_vm_is_gone_makes_it_again(world, reboot):
    """The reboot is asked before the controller noticed (the server still ACTIVE)."""
    client, controller, cluster = world
    uuid = _boot(client, controller)
    _remove_vm(cluster, uuid)
    _action(client, uuid, {"reboot": {"type": reboot}})
    server = _until(client, controller, uuid, "ACTIVE")
    assert "fault" not in server
    assert _running(cluster, uuid)


def test_a_hard_reboot_of_a_server_the_sync_stopped(world):
    client, controller, cluster = world
    uuid = _boot(client, controller)
    _remove_vm(cluster, uuid)
    _until(client, controller, uuid, "SHUTOFF")
    _action(client, uuid, {"reboot": {"type": "HARD"}})
    _until(client, controller, uuid, "ACTIVE")
    assert _running(cluster, uuid)


def test_a_rebuild_of_a_server_whose_vm_is_gone_makes_it_with_the_new_image(world):
    client, controller, cluster = world
    uuid = _boot(client, controller)
    _remove_vm(cluster, uuid)
    _action(client, uuid, {"rebuild": {"imageRef": IMAGE_ALT}})
    _until(client, controller, uuid, "ACTIVE")
    vm = _vm(cluster, uuid)
    assert IMAGE_ALT in vm["spec"]["dataVolumeTemplates"][0]["spec"]["source"]["http"]["url"]
    assert _running(cluster, uuid)


def test_a_pause_of_a_guest_that_is_gone_ends_in_a_fault_at_once(world):
    client, controller, cluster = world
    uuid = _boot(client, controller)
    _remove_vm(cluster, uuid)
    _action(client, uuid, {"pause": None})
    _until(client, controller, uuid, "SHUTOFF")  # the pause ended, then the power sync
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=admin("2.96")).json["instanceActions"]
    (pause,) = [a for a in actions if a["action"] == "pause"]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{pause['request_id']}", headers=admin("2.96"))
    (event,) = got.json["instanceAction"]["events"]
    assert (event["event"], event["result"]) == ("compute_pause_instance", "Error")
    assert event["details"] == f"Instance {uuid} is not running."  # the fault Nova records (shown in ERROR only)


def _addresses(client, uuid):
    return [a["addr"] for a in _server(client, uuid)["addresses"].get("pod-network", [])]


def _vmi_addresses(cluster, uuid):
    vmis = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    interfaces = (vmis[0]["status"].get("interfaces") or []) if vmis else []
    return [ip for i in interfaces for ip in i.get("ipAddresses") or [i.get("ipAddress")] if ip]


def test_addresses_are_the_ones_the_guest_has_now(world):
    """The pod network's address goes with the launcher pod: a stopped server shows none, a started or
    rebuilt one the new VMI's (docs/servers.md says when it changes), never the one it no longer has."""
    client, controller, cluster = world
    uuid = _boot(client, controller)
    first = _addresses(client, uuid)
    assert first and first == _vmi_addresses(cluster, uuid)
    _action(client, uuid, {"os-stop": None})
    _until(client, controller, uuid, "SHUTOFF")
    assert _addresses(client, uuid) == []
    _action(client, uuid, {"os-start": None})
    _until(client, controller, uuid, "ACTIVE")
    assert _addresses(client, uuid) == _vmi_addresses(cluster, uuid) != []
    _action(client, uuid, {"rebuild": {"imageRef": IMAGE_ALT}})
    seen_without = False  # while the old VMI is gone and the new one not yet there, no address
    deadline = time.monotonic() + 120
    while _server(client, uuid)["status"] != "ACTIVE" and time.monotonic() < deadline:
        controller.run_once()
        seen_without |= _server(client, uuid)["OS-EXT-STS:task_state"] in (
            "rebuild_block_device_mapping", "rebuild_spawning") and _addresses(client, uuid) == []
        time.sleep(0.02)
    assert seen_without
    _until(client, controller, uuid, "ACTIVE")
    assert _addresses(client, uuid) == _vmi_addresses(cluster, uuid) != []


@pytest.mark.parametrize("plugin", ["calico", "kube-ovn"])
def test_with_keep_pod_address_the_address_outlives_stop_reboot_and_rebuild(world, plugin):
    """[controller] keep_pod_address: the VM's template asks the network plugin for the guest's address
    (Calico's or Kube-OVN's pod annotation), so the new VMIs of a stop and start, a hard reboot and a
    rebuild get it again, as a Neutron port keeps its address (Tempest's test_rebuild_server)."""
    client, controller, cluster = world
    controller.servers.settings = dataclasses.replace(controller.servers.settings, keep_pod_address=plugin)
    uuid = _boot(client, controller)
    first = _addresses(client, uuid)
    controller.run_once()  # the template asks for it from now on
    annotations = _vm(cluster, uuid)["spec"]["template"]["metadata"]["annotations"]
    assert {"calico": ("cni.projectcalico.org/ipAddrs", f'["{first[0]}"]'),
            "kube-ovn": ("ovn.kubernetes.io/ip_address", first[0])}[plugin] in annotations.items()
    other = _boot(client, controller)  # another server's pod in between takes the next free address
    assert _addresses(client, other) != first
    for body, status in (({"os-stop": None}, "SHUTOFF"), ({"os-start": None}, "ACTIVE"),
                         ({"reboot": {"type": "HARD"}}, "ACTIVE"), ({"rebuild": {"imageRef": IMAGE_ALT}}, "ACTIVE")):
        _action(client, uuid, body)
        _until(client, controller, uuid, status)
        if status == "ACTIVE":
            assert _addresses(client, uuid) == first == _vmi_addresses(cluster, uuid)[:1], body


def test_a_revert_of_a_resized_server_whose_vm_is_gone_makes_it_again_at_the_old_size(world):
    """Not a wait for ever: the revert makes the VM again from the server's record on the old flavor."""
    client, controller, cluster = world
    got = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": "m1.large", "ram": 1024, "vcpus": 2, "disk": 2, "id": "large"}})
    assert got.status_code == 200, got.text
    uuid = _boot(client, controller)
    _action(client, uuid, {"resize": {"flavorRef": "large"}})
    _until(client, controller, uuid, "VERIFY_RESIZE")
    _remove_vm(cluster, uuid)
    _action(client, uuid, {"revertResize": None})
    server = _until(client, controller, uuid, "ACTIVE")
    assert "fault" not in server and server["flavor"].get("original_name", server["flavor"].get("id")) in ("m1.small", "small")
    vm = _vm(cluster, uuid)
    it = cluster.get("VirtualMachineInstancetype", vm["spec"]["instancetype"]["name"], vm["metadata"]["namespace"])
    assert it["spec"]["memory"]["guest"] == "512Mi"
    assert _running(cluster, uuid)
    migrations = client.get("/v2.1/os-migrations", headers=admin("2.96")).json["migrations"]
    assert [m["status"] for m in migrations] == ["reverted"]
