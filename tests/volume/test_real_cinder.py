"""Attach and detach against a real Cinder 29 (../shared's cinder-up.sh, backend okc-nfs): the one
OPENKEEL_TEST_CINDER_DIR names (the recipe's OKC_SERVICES_DIR, with harness/keystone.env), else one started
once for the session (tests/volume/shared_cinder.py; skipped with the reason when it cannot be). The API
runs with keystone auth behind the recipe's Keystone and the caller is its admin with a real token (the
API calls Cinder as the caller, found in the token's catalog); the [cinder] credential is the nova service
user and [service_user] sends its token (X-Service-Token), as a deployment sets them; the cluster is the
built-in one."""

from __future__ import annotations

import pathlib
import time

import pytest

from openkeel_compute import policies
from openkeel_compute.controller.service import server_loop_from
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.conftest import make_conf
from tests.databases import ENGINES, throwaway_database
from tests.server_world import IMAGE, image_service, server_world

# one xdist worker runs the whole module (scripts/test's --dist loadgroup): one real Cinder is started a run
pytestmark = pytest.mark.xdist_group("real-cinder")

ATTACHMENTS = {"OpenStack-API-Version": "volume 3.44"}


def _env(path: pathlib.Path) -> dict:
    values = {}
    for line in path.read_text().splitlines():
        for word in line.removeprefix("export ").split():
            if "=" in word:
                key, value = word.split("=", 1)
                values[key] = value.strip("'\"")
    return values


class RealCinder:
    """Cinder's own answers, as its admin (what the test checks; OpenKeel calls it as the nova user)."""

    def __init__(self, ks: dict) -> None:
        from keystoneauth1 import session
        from keystoneauth1.identity import v3

        self.ks = ks
        self.session = session.Session(auth=v3.Password(
            auth_url=ks["KEYSTONE_URL"], username="admin", password=ks["ADMIN_PASSWORD"], project_name="admin",
            user_domain_id="default", project_domain_id="default"))
        self.filter = {"service_type": "block-storage", "interface": "public"}
        self.token = self.session.get_token()

    def headers(self, version: str = "2.96") -> dict:
        """The compute API's headers of Keystone's admin (project admin, role admin)."""
        return {"X-Auth-Token": self.token, "OpenStack-API-Version": f"compute {version}"}

    def call(self, method: str, path: str, **kwargs):
        return self.session.request(path, method, endpoint_filter=self.filter, raise_exc=False, **kwargs)

    def volume(self, volume_id: str) -> dict:
        return self.call("GET", f"/volumes/{volume_id}").json()["volume"]

    def create_volume(self) -> dict:
        got = self.call("POST", "/volumes", json={"volume": {"size": 1, "name": "okc-real-attach"}})
        assert got.status_code == 202, got.text
        volume = got.json()["volume"]
        deadline = time.monotonic() + 60
        while self.volume(volume["id"])["status"] != "available":
            assert time.monotonic() < deadline, self.volume(volume["id"])
            time.sleep(0.3)
        return volume

    def attachments(self, volume_id: str) -> list[dict]:
        got = self.call("GET", f"/attachments/detail?volume_id={volume_id}", headers=ATTACHMENTS)
        assert got.status_code == 200, got.text
        return got.json()["attachments"]


@pytest.fixture(scope="module")
def real_cinder(real_cinder_dir):
    return RealCinder(_env(pathlib.Path(real_cinder_dir) / "harness" / "keystone.env"))


@pytest.fixture(params=ENGINES)
def real_world(request, tmp_path, real_cinder):
    """(client, controller, cluster) of a controller whose [cinder] is the real Cinder, on each engine."""
    ks = real_cinder.ks
    credential = {"auth_type": "password", "auth_url": ks["KEYSTONE_URL"], "username": ks["SERVICE_USERNAME"],
                  "password": ks["SERVICE_PASSWORD"], "project_name": "service", "user_domain_name": "Default",
                  "project_domain_name": "Default"}
    authtoken = {**credential, "www_authenticate_uri": ks["KEYSTONE_URL"].removesuffix("/v3"),
                 "region_name": "RegionOne", "service_type": "compute"}
    policies.reset()
    with image_service(tmp_path) as glance_url, throwaway_database(request.param, tmp_path) as url:
        conf = make_conf(tmp_path, auth_strategy="keystone", keystone_authtoken=authtoken,
                         controller={"poll_interval": "0.05", "workers": "4"},
                         glance={"api_servers": glance_url}, database={"connection": url},
                         cinder={**credential, "os_region_name": "RegionOne"},
                         service_user={**credential, "send_service_user_token": "true"})
        engine = db_api.get_engine(conf)
        migration.sync(engine)
        with server_world(conf, lambda kube: server_loop_from(conf, engine, kube)) as (client, controller, cluster):
            got = client.post("/v2.1/flavors", headers=real_cinder.headers(), json_body={
                "flavor": {"name": "small", "ram": 512, "vcpus": 1, "disk": 1, "id": "small"}})
            assert got.status_code == 200, got.text
            yield client, controller, cluster


def _settle(controller, until, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        controller.run_once()
        if until():
            return True
        time.sleep(0.1)
    return False


def _objects(cluster, kind, volume_id):
    return [obj for obj in cluster.objects(kind).values()
            if (obj["metadata"].get("labels") or {}).get("openkeel.io/volume-id") == volume_id]


def test_attach_and_detach_with_a_real_cinder(real_world, real_cinder):
    client, controller, cluster = real_world
    ADMIN = real_cinder.headers()
    volume = real_cinder.create_volume()
    volume_id = volume["id"]
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "real-cinder", "imageRef": IMAGE, "flavorRef": "small", "networks": "none"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert _settle(controller, lambda: client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).json["server"][
        "status"] == "ACTIVE")
    try:
        path = f"/v2.1/servers/{uuid}/os-volume_attachments"
        got = client.post(path, headers=real_cinder.headers("2.79"), json_body={"volumeAttachment": {"volumeId": volume_id}})
        assert got.status_code == 200, got.text
        assert got.json["volumeAttachment"]["device"] == "/dev/vdb"
        # the API's reservation: an attachment without a connector
        (reserved,) = real_cinder.attachments(volume_id)
        assert reserved["instance"] == uuid and reserved["status"] == "reserved"
        assert real_cinder.volume(volume_id)["status"] == "reserved"

        # the controller: the node's connector, Cinder's NFS connection_info as the PersistentVolume, the
        # hotplugged disk Ready on the VMI, the attachment completed
        assert _settle(controller, lambda: real_cinder.volume(volume_id)["status"] == "in-use")
        (attached,) = real_cinder.attachments(volume_id)
        assert attached["id"] == reserved["id"] and attached["status"] == "attached"
        assert attached["connection_info"]["driver_volume_type"] == "nfs"
        assert attached["attach_mode"] == "rw"
        shown = real_cinder.volume(volume_id)
        assert [a["server_id"] for a in shown["attachments"]] == [uuid]
        assert shown["attachments"][0]["device"] == "/dev/vdb"
        (pv,) = _objects(cluster, "PersistentVolume", volume_id)
        server, _, export = attached["connection_info"]["export"].partition(":")
        assert pv["spec"]["nfs"] == {"server": server, "path": export, "readOnly": False}
        assert pv["metadata"]["name"] == f"openkeel-{attached['id']}"
        (pvc,) = _objects(cluster, "PersistentVolumeClaim", volume_id)
        assert pvc["metadata"]["name"] == f"vol-{volume_id}" and pvc["spec"]["volumeName"] == pv["metadata"]["name"]
        ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(uuid)]
        disks = {d["name"]: d for d in vm["spec"]["template"]["spec"]["domain"]["devices"]["disks"]}
        assert disks[f"vol-{volume_id}"]["serial"] == volume_id
        vmi = next(v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1].endswith(uuid))
        entry = next(e for e in vmi["status"]["volumeStatus"] if e["name"] == f"vol-{volume_id}")
        assert entry["phase"] == "Ready" and entry["hotplugVolume"]["attachPodName"]
        listed = client.get(path, headers=real_cinder.headers("2.89")).json["volumeAttachments"]
        assert [(a["volumeId"], a["attachment_id"]) for a in listed] == [(volume_id, attached["id"])]

        # detach: os-begin_detaching, the disk unplugged, the claim and volume gone, the attachment deleted
        got = client.delete(f"{path}/{volume_id}", headers=ADMIN)
        assert got.status_code == 202, got.text
        assert real_cinder.volume(volume_id)["status"] == "detaching"
        assert _settle(controller, lambda: real_cinder.volume(volume_id)["status"] == "available")
        assert real_cinder.attachments(volume_id) == []
        assert real_cinder.volume(volume_id)["attachments"] == []
        assert _settle(controller, lambda: not _objects(cluster, "PersistentVolumeClaim", volume_id)
                       and not _objects(cluster, "PersistentVolume", volume_id))
        ((_key, vm),) = [(k, v) for k, v in cluster.objects("VirtualMachine").items() if k[1].endswith(uuid)]
        assert f"vol-{volume_id}" not in {v["name"] for v in vm["spec"]["template"]["spec"]["volumes"]}
        assert client.get(path, headers=ADMIN).json["volumeAttachments"] == []
    finally:
        client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN)
        _settle(controller, lambda: client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 404)
        real_cinder.call("DELETE", f"/volumes/{volume_id}")


def test_a_boot_volume_shows_its_device_in_a_real_cinder(real_world, real_cinder):
    """Nova's compute sends the root's device name as the connector's mountpoint when it updates the
    attachment: Cinder's volume then lists the server's attachment on /dev/vda."""
    client, controller, _cluster = real_world
    ADMIN = real_cinder.headers()
    volume_id = real_cinder.create_volume()["id"]
    got = real_cinder.call("POST", f"/volumes/{volume_id}/action", json={"os-set_bootable": {"bootable": True}})
    assert got.status_code == 200, got.text
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "real-bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": volume_id, "boot_index": 0}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    try:
        assert _settle(controller, lambda: real_cinder.volume(volume_id)["status"] == "in-use")
        shown = real_cinder.volume(volume_id)
        assert [(a["server_id"], a["device"]) for a in shown["attachments"]] == [(uuid, "/dev/vda")]
        listed = client.get(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=ADMIN).json["volumeAttachments"]
        assert [(a["volumeId"], a["device"]) for a in listed] == [(volume_id, "/dev/vda")]
    finally:
        client.delete(f"/v2.1/servers/{uuid}", headers=ADMIN)
        _settle(controller, lambda: client.get(f"/v2.1/servers/{uuid}", headers=ADMIN).status_code == 404)
        real_cinder.call("DELETE", f"/volumes/{volume_id}")
