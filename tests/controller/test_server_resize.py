"""Resize, confirm and revert end to end: the API, the controller and the built-in KubeVirt cluster.

The VM moves to the new flavor's instancetype (stopped, patched, started), VERIFY_RESIZE shows the new
flavor; a revert puts the old instancetype back by name and revision, also when the old flavor was deleted
meanwhile; a confirm drops the old revision; resize_confirm_window confirms by itself."""

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
from tests.server_world import DEMO, IMAGE, image_service, server_world, until

V247 = dict(DEMO, **{"OpenStack-API-Version": "compute 2.47"})


@pytest.fixture(params=ENGINES)
def world(request, tmp_path):
    """The API, the controller and the built-in cluster on each database engine: PostgreSQL and MariaDB
    enforce column lengths that SQLite does not (a resize's bookkeeping once overflowed them)."""
    policies.reset()
    with throwaway_database(request.param, tmp_path) as url, image_service(tmp_path) as glance_url:
        conf = make_conf(tmp_path, controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            yield client, controller, cluster, conf


def _flavor(client, flavorid, ram, vcpus=1, disk=1, ephemeral=0, swap=0):
    got = client.post("/v2.1/flavors", headers=admin(), json_body={
        "flavor": {"name": f"m1.{flavorid}", "ram": ram, "vcpus": vcpus, "disk": disk, "id": flavorid,
                   "OS-FLV-EXT-DATA:ephemeral": ephemeral, "swap": swap}})
    assert got.status_code == 200, got.text


def _until(client, controller, uuid, status):
    got = until(client, controller, uuid, lambda got: got.json["server"]["status"] == status
                and got.json["server"]["OS-EXT-STS:task_state"] is None)
    assert got.json["server"]["status"] == status, got.json["server"]
    return got.json["server"]


def _boot(client, controller, flavor="small"):
    got = client.post("/v2.1/servers", headers=DEMO, json_body={
        "server": {"name": "web-1", "imageRef": IMAGE, "flavorRef": flavor, "networks": "auto"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    _until(client, controller, uuid, "ACTIVE")
    return uuid


def _vm(cluster, uuid):
    ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1] == uuid]
    return vm


def _own_instancetype(cluster, vm, spec):
    """The VM names the server's own instancetype, in its namespace, owned by it, of spec ``spec``."""
    matcher = vm["spec"]["instancetype"]
    assert matcher["kind"] == "VirtualMachineInstancetype" and matcher["name"].startswith(vm["metadata"]["name"])
    it = cluster.get("VirtualMachineInstancetype", matcher["name"], vm["metadata"]["namespace"])
    assert it["spec"] == spec
    assert [r["uid"] for r in it["metadata"]["ownerReferences"]] == [vm["metadata"]["uid"]]
    return matcher


def _action(client, uuid, body):
    return client.post(f"/v2.1/servers/{uuid}/action", headers=DEMO, json_body=body)


def _events(client, uuid, name):
    actions = client.get(f"/v2.1/servers/{uuid}/os-instance-actions", headers=admin("2.96")).json["instanceActions"]
    (request_id,) = [a["request_id"] for a in actions if a["action"] == name][:1]
    got = client.get(f"/v2.1/servers/{uuid}/os-instance-actions/{request_id}", headers=admin("2.96"))
    return sorted((e["event"], e["result"]) for e in got.json["instanceAction"]["events"])


def _migration_statuses(client):
    return [m["status"] for m in client.get("/v2.1/os-migrations", headers=admin("2.96")).json["migrations"]]


def test_resize_then_confirm(world):
    client, controller, cluster, _conf = world
    _flavor(client, "small", 512)
    _flavor(client, "large", 1024, vcpus=2, disk=2)
    uuid = _boot(client, controller)
    old_vm = _vm(cluster, uuid)
    old_rev = old_vm["status"]["instancetypeRef"]["controllerRevisionRef"]["name"]

    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    server = _until(client, controller, uuid, "VERIFY_RESIZE")
    got = client.get(f"/v2.1/servers/{uuid}", headers=V247).json["server"]
    assert (got["flavor"]["original_name"], got["flavor"]["ram"], got["flavor"]["vcpus"]) == ("m1.large", 1024, 2)
    assert server["OS-EXT-STS:vm_state"] == "resized"
    assert server["progress"] == 0  # as Nova's libvirt driver leaves it (the servers oracle answers the same)
    vm = _vm(cluster, uuid)
    _own_instancetype(cluster, vm, {"cpu": {"guest": 2}, "memory": {"guest": "1024Mi"}})
    assert vm["spec"]["instancetype"]["name"] != old_vm["spec"]["instancetype"]["name"]
    new_rev = vm["status"]["instancetypeRef"]["controllerRevisionRef"]["name"]
    assert new_rev != old_rev and cluster.get("ControllerRevision", old_rev, vm["metadata"]["namespace"])
    (vmi,) = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    assert vmi["spec"]["domain"]["memory"]["guest"] == "1024Mi"
    assert vmi["status"]["phase"] == "Running"
    claim = cluster.get("PersistentVolumeClaim", f"{uuid}-root", vm["metadata"]["namespace"])
    assert (claim["spec"]["resources"]["requests"]["storage"], claim["status"]["capacity"]["storage"]) == ("2Gi",) * 2
    assert _events(client, uuid, "resize") == sorted([
        ("conductor_migrate_server", "Success"), ("cold_migrate", "Success"), ("compute_prep_resize", "Success"),
        ("compute_resize_instance", "Success"), ("compute_finish_resize", "Success")])

    got = _action(client, uuid, {"confirmResize": None})
    assert got.status_code == 204, got.text
    server = _until(client, controller, uuid, "ACTIVE")
    assert server["flavor"]["original_name"] == "m1.large"
    assert _events(client, uuid, "confirmResize") == [("compute_confirm_resize", "Success")]
    assert cluster.objects("ControllerRevision").get((vm["metadata"]["namespace"], old_rev)) is None


def _flavor_disks(cluster, uuid):
    """{disk name: emptyDisk capacity} of the VM's ephemeral and swap disks, and whether the user data
    enables swap."""
    vm = _vm(cluster, uuid)
    tspec = vm["spec"]["template"]["spec"]
    disks = {d["name"] for d in tspec["domain"]["devices"]["disks"]}
    sizes = {v["name"]: v["emptyDisk"]["capacity"] for v in tspec["volumes"] if "emptyDisk" in v}
    assert set(sizes) <= disks  # every volume has its disk
    secret = cluster.get("Secret", f"{uuid}-user-data", vm["metadata"]["namespace"])
    import base64

    swapon = b"swapon" in base64.b64decode(secret["data"]["userdata"])
    return sizes, swapon


def test_swap_and_ephemeral_disks_follow_the_flavor_and_come_back_on_revert(world):
    """The VM's ephemeral and swap emptyDisks as a boot on the new flavor composes them (added, grown,
    removed), and the old ones again after a revert. (A smaller ephemeral disk is refused as Nova's
    libvirt driver refuses it: a removal comes with a revert only.)"""
    client, controller, cluster, _conf = world
    _flavor(client, "small", 512, swap=256)
    _flavor(client, "large", 1024, vcpus=2, disk=2, ephemeral=3, swap=512)
    _flavor(client, "plain", 1024, vcpus=2, disk=2)
    uuid = _boot(client, controller)
    assert _flavor_disks(cluster, uuid) == ({"swap": "256Mi"}, True)
    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    _until(client, controller, uuid, "VERIFY_RESIZE")
    assert _flavor_disks(cluster, uuid) == ({"ephemeral0": "3Gi", "swap": "512Mi"}, True)
    (vmi,) = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    assert {v["name"]: v.get("emptyDisk") for v in vmi["spec"]["volumes"] if "emptyDisk" in v} == {
        "ephemeral0": {"capacity": "3Gi"}, "swap": {"capacity": "512Mi"}}
    assert _action(client, uuid, {"revertResize": None}).status_code == 202
    _until(client, controller, uuid, "ACTIVE")
    assert _flavor_disks(cluster, uuid) == ({"swap": "256Mi"}, True)
    (vmi,) = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    assert "ephemeral0" not in {v["name"] for v in vmi["spec"]["volumes"]}
    # to a flavor without swap: the disk and the user data's swap lines go
    assert _action(client, uuid, {"resize": {"flavorRef": "plain"}}).status_code == 202
    _until(client, controller, uuid, "VERIFY_RESIZE")
    assert _flavor_disks(cluster, uuid) == ({}, False)


def test_revert_when_the_old_flavor_was_deleted(world):
    client, controller, cluster, _conf = world
    _flavor(client, "small", 512)
    _flavor(client, "large", 1024, vcpus=2)
    uuid = _boot(client, controller)
    old_vm = _vm(cluster, uuid)
    old_rev = old_vm["status"]["instancetypeRef"]["controllerRevisionRef"]["name"]
    # scenario 4: the flavor a server uses is deleted; the server keeps it
    assert client.delete("/v2.1/flavors/small", headers=admin()).status_code == 202
    controller.run_once()
    assert not [k for k in cluster.objects("VirtualMachineClusterInstancetype") if k[1] == "small"]
    got = client.get(f"/v2.1/servers/{uuid}", headers=V247).json["server"]["flavor"]
    assert {k: got[k] for k in ("original_name", "vcpus", "ram", "disk", "ephemeral", "swap")} == {
        "original_name": "m1.small", "vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0}
    got = _action(client, uuid, {"resize": {"flavorRef": "small"}})
    assert (got.status_code, got.json["badRequest"]["message"]) == (400, "Flavor small could not be found.")

    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    _until(client, controller, uuid, "VERIFY_RESIZE")
    got = _action(client, uuid, {"revertResize": None})
    assert got.status_code == 202, got.text
    server = _until(client, controller, uuid, "ACTIVE")
    assert server["flavor"]["original_name"] == "m1.small"
    vm = _vm(cluster, uuid)
    assert vm["spec"]["instancetype"]["name"] == old_vm["spec"]["instancetype"]["name"]
    assert vm["spec"]["instancetype"]["revisionName"] == old_rev
    (vmi,) = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    assert vmi["spec"]["domain"]["memory"]["guest"] == "512Mi"
    assert _events(client, uuid, "revertResize") == [("compute_finish_revert_resize", "Success"),
                                                     ("compute_revert_resize", "Success")]
    assert sorted(_migration_statuses(client)) == ["reverted"]
    # the next resize replaces the pinned revision (KubeVirt refuses a name change that keeps it)
    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    _until(client, controller, uuid, "VERIFY_RESIZE")
    matcher = _own_instancetype(cluster, _vm(cluster, uuid), {"cpu": {"guest": 2}, "memory": {"guest": "1024Mi"}})
    assert "revisionName" not in matcher


def test_a_stopped_server_stays_stopped_and_the_window_confirms(world):
    client, controller, cluster, _conf = world
    controller.servers.settings = dataclasses.replace(controller.servers.settings, resize_confirm_window=0.01)
    _flavor(client, "small", 512)
    _flavor(client, "large", 1024)
    uuid = _boot(client, controller)
    assert _action(client, uuid, {"os-stop": None}).status_code == 202
    _until(client, controller, uuid, "SHUTOFF")
    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    server = _until(client, controller, uuid, "SHUTOFF")
    assert server["flavor"]["original_name"] == "m1.large"
    assert not [k for k in cluster.objects("VirtualMachineInstance") if k[1] == uuid]
    assert sorted(_migration_statuses(client)) == ["confirmed"]
    assert _events(client, uuid, "confirmResize") == [("compute_confirm_resize", "Success")]


def test_a_server_deleted_in_verify_resize_confirms_its_resize(world):
    client, controller, _cluster, _conf = world
    _flavor(client, "small", 512)
    _flavor(client, "large", 1024)
    uuid = _boot(client, controller)
    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    _until(client, controller, uuid, "VERIFY_RESIZE")
    assert client.delete(f"/v2.1/servers/{uuid}", headers=DEMO).status_code == 204
    until(client, controller, uuid, lambda got: got.status_code == 404)
    assert _migration_statuses(client) == ["confirmed"]


def test_resize_accounting_in_placement(tmp_path, placement_service):
    """Nova's resize accounting against a real Placement: the old flavor moves to the migration, the
    server claims the new one; revert moves it back, confirm gives the migration's back."""
    import uuid as uuidlib

    from openkeel_compute.controller.resize_allocations import Allocations
    from openkeel_compute.placement.client import PlacementClient
    from tests.conftest import placement_overrides

    placement = PlacementClient.from_conf(make_conf(tmp_path, placement=placement_overrides(placement_service)))
    rp, server, project, user = (str(uuidlib.uuid4()) for _ in range(4))
    placement.create_provider(rp, f"node-{rp}")
    placement.set_inventories(rp, 0, {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}, "DISK_GB": {"total": 100}})
    old = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    placement.put_allocations(server, {rp: old}, project_id=project, user_id=user, consumer_generation=None)
    moves = Allocations(placement)
    large = {"vcpus": 2, "memory_mb": 1024, "root_gb": 2, "ephemeral_gb": 0, "swap": 512}
    for ending in ("revert", "confirm"):
        migration = str(uuidlib.uuid4())
        moves.resize(server, migration, large)
        moves.resize(server, migration, large)  # a step tried again moves nothing twice
        assert placement.get_allocations(migration).allocations == {rp: old}
        assert placement.get_allocations(server).allocations == {rp: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 3}}
        if ending == "revert":
            moves.revert(server, migration)
            assert placement.get_allocations(server).allocations == {rp: old}
        else:
            moves.confirm(migration)
            assert placement.get_allocations(server).allocations == {rp: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 3}}
        assert placement.get_allocations(migration).allocations == {}


@pytest.fixture(params=ENGINES)
def placed_world(request, tmp_path, placement_service):
    """The world with Placement: the controller claims and a resize moves allocations."""
    policies.reset()
    with throwaway_database(request.param, tmp_path) as url, image_service(tmp_path) as glance_url:
        conf = make_conf(tmp_path, DEFAULT={"allow_resize_to_same_host": "true"},
                         controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube), placement_service) as (
                client, controller, _cluster):
            yield client, controller, controller.servers.claims.placement


def test_reset_state_from_verify_resize_gives_the_old_flavor_back(placed_world):
    """Issue 27.14: an administrator's os-resetState of a server in VERIFY_RESIZE: the migration goes to
    error (as Nova's check of unconfirmed resizes) and its allocation, the old flavor's, is given back;
    the server keeps the new flavor's, and neither confirm nor revert is possible any more."""
    client, controller, placement = placed_world
    _flavor(client, "small", 512)
    _flavor(client, "large", 1024, vcpus=2, disk=2)
    uuid = _boot(client, controller)
    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    _until(client, controller, uuid, "VERIFY_RESIZE")
    (migration,) = [m["uuid"] for m in client.get("/v2.1/os-migrations", headers=admin("2.96")).json["migrations"]]
    old = placement.get_allocations(migration).allocations
    assert [r for r in old.values()] == [{"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}]
    got = client.post(f"/v2.1/servers/{uuid}/action", headers=admin(), json_body={"os-resetState": {"state": "active"}})
    assert got.status_code == 202, got.text
    _until(client, controller, uuid, "ACTIVE")
    deadline = time.monotonic() + 120
    while placement.get_allocations(migration).allocations and time.monotonic() < deadline:
        controller.run_once()
    assert placement.get_allocations(migration).allocations == {}
    assert [r for r in placement.get_allocations(uuid).allocations.values()] == [
        {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 2}]
    assert _migration_statuses(client) == ["error"]
    assert _action(client, uuid, {"revertResize": None}).status_code == 409
    assert _action(client, uuid, {"confirmResize": None}).status_code == 409


def test_a_delete_cut_short_while_closing_an_open_resize_gives_the_migrations_allocation_back(world):
    """The controller killed between closing the migration and giving its allocation back: the delete
    run again must still give it back (closed first, it stayed in Placement for good)."""
    import types

    from openkeel_compute.controller.steps import resize as resize_step

    client, controller, _cluster, conf = world
    _flavor(client, "small", 512)
    _flavor(client, "large", 1024, vcpus=2)
    uuid = _boot(client, controller)
    assert _action(client, uuid, {"resize": {"flavorRef": "large"}}).status_code == 202
    _until(client, controller, uuid, "VERIFY_RESIZE")
    given_back: list[str] = []

    class Killed(BaseException):
        pass

    class Cut:
        def confirm(self, migration):
            if not given_back:
                given_back.append("killed")
                raise Killed  # the process dies here
            given_back.append(migration)

    ctx = types.SimpleNamespace(engine=db_api.get_engine(conf), allocations=Cut())
    with pytest.raises(Killed):
        resize_step.close_on_delete(ctx, uuid)
    resize_step.close_on_delete(ctx, uuid)  # the delete run again by the restarted controller
    assert len(given_back) == 2 and given_back[1] != "killed", given_back
    assert _migration_statuses(client) == ["confirmed"]
