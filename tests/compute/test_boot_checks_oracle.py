"""check_boot against the real Nova 34.0.0 servers API, case by case.

The oracle (../shared/nova-oracle/run-servers-oracle.sh) is started on a free port. For each case a
server is snapshotted with the image properties of the case (Nova gives the snapshot min_disk 20,
its source flavor's disk), a flavor is made with the case's sizes and extra specs, and the same
boot is asked of the oracle and of check_boot: both must refuse with the same status and message,
or both accept. Skips without ../shared (fails under OPENKEEL_REQUIRE_SHARED=1).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from openkeel_compute.compute.boot_checks import BootRefused, check_boot
from tests.api.oracles import free_port, oracle_script

BASE_IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"

# (case id, image properties, flavor ram, disk, vcpus, extra specs, caller)
CASES = [
    ("fits", {}, 4096, 40, 2, {}, "demo"),
    ("min-disk", {}, 4096, 5, 2, {}, "demo"),
    ("min-disk-tiny", {}, 512, 1, 1, {}, "demo"),
    ("zero-disk-member", {}, 4096, 0, 2, {}, "demo"),
    ("zero-disk-admin", {}, 4096, 0, 2, {}, "admin"),
    ("config-drive", {"img_config_drive": "bad", "hw_mem_page_size": "large"}, 512, 1, 1, {}, "demo"),
    ("config-drive-mandatory", {"img_config_drive": "mandatory"}, 512, 40, 1, {}, "demo"),
    ("cpu-policy", {"hw_cpu_policy": "dedicated"}, 512, 1, 1, {"hw:cpu_policy": "shared"}, "demo"),
    ("cpu-policy-same", {"hw_cpu_policy": "shared"}, 512, 40, 1, {"hw:cpu_policy": "shared"}, "demo"),
    ("page-size", {"hw_mem_page_size": "large"}, 512, 1, 1, {}, "demo"),
    ("page-size-any", {"hw_mem_page_size": "large"}, 512, 40, 1, {"hw:mem_page_size": "any"}, "demo"),
    ("mem-encryption", {"hw_mem_encryption": "true"}, 512, 1, 1, {}, "demo"),
    ("encrypted-volume-image", {"cinder_encryption_key_id": "abc"}, 512, 40, 1, {}, "demo"),
    ("encrypted-volume-after-cpu", {"cinder_encryption_key_id": "abc", "hw_cpu_policy": "dedicated"},
     512, 40, 1, {"hw:cpu_policy": "shared"}, "demo"),
    ("tpm-conflict-is-driver-time", {"hw_tpm_version": "2.0"}, 512, 40, 1,
     {"hw:tpm_version": "1.2", "hw:tpm_model": "tpm-tis"}, "demo"),
]


def _free_port() -> int:
    """A port the system says is free (tests/api/oracles.free_port): two test workers running this module's
    tests at once each start an oracle of their own, never one on the other's port (the oracle script's pid
    file is per port: a shared port meant one worker's stop killing the other's oracle)."""
    return free_port()


class Oracle:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}/v2.1"

    def call(self, method, path, body=None, token="demo:demo", version="2.96"):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"X-Auth-Token": token, "OpenStack-API-Version": f"compute {version}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")

    def boot(self, image, flavor, token="demo:demo"):
        return self.call("POST", "/servers", {"server": {"name": "b", "imageRef": image, "flavorRef": flavor,
                                                         "networks": "none"}}, token=token)

    def wait_active(self, server_id):
        for _ in range(100):
            if self.call("GET", f"/servers/{server_id}")[1]["server"]["status"] == "ACTIVE":
                return
            time.sleep(0.2)
        raise AssertionError(f"server {server_id} never became ACTIVE")

    def delete(self, server_id, token="demo:demo"):
        """Delete a server and wait until it is gone (the project's quota is 10 servers)."""
        self.call("DELETE", f"/servers/{server_id}", token=token)
        for _ in range(100):
            if self.call("GET", f"/servers/{server_id}", token=token)[0] == 404:
                return
            time.sleep(0.2)
        raise AssertionError(f"server {server_id} was never deleted")


@pytest.fixture(scope="module")
def oracle():
    script = oracle_script("run-servers-oracle.sh")
    port = _free_port()
    subprocess.run([str(script), "start", str(port)], check=True, capture_output=True, timeout=600)
    try:
        yield Oracle(port)
    finally:
        subprocess.run([str(script), "stop", str(port)], check=False, capture_output=True, timeout=120)


def _snapshot(oracle, props):
    status, body = oracle.boot(BASE_IMAGE, "2")
    assert status == 202, body
    server_id = body["server"]["id"]
    oracle.wait_active(server_id)
    status, body = oracle.call("POST", f"/servers/{server_id}/action",
                               {"createImage": {"name": "snap", "metadata": props}})
    assert status == 202, body
    for _ in range(100):  # the snapshot is done when the server leaves image_snapshot
        if oracle.call("GET", f"/servers/{server_id}")[1]["server"]["OS-EXT-STS:task_state"] is None:
            break
        time.sleep(0.2)
    oracle.delete(server_id)
    return body["image_id"]


def _image_as_glance_gives_it(oracle, image_id, props):
    """The oracle's image through Nova's image proxy (2.35), in the shape images.glance returns."""
    status, body = oracle.call("GET", f"/images/{image_id}", version="2.35")
    assert status == 200, body
    shown = body["image"]
    return {"id": image_id, "name": shown["name"], "status": shown["status"].lower(),
            "min_ram": shown["minRam"], "min_disk": shown["minDisk"], "size": shown["OS-EXT-IMG-SIZE:size"],
            "disk_format": "raw", "container_format": "bare", "properties": dict(shown["metadata"])}


@pytest.mark.parametrize(("case", "props", "ram", "disk", "vcpus", "specs", "caller"), CASES,
                         ids=[c[0] for c in CASES])
def test_check_boot_answers_as_nova(oracle, case, props, ram, disk, vcpus, specs, caller):
    flavor_id = f"f-{case}"
    status, body = oracle.call("POST", "/flavors", {"flavor": {"name": flavor_id, "id": flavor_id, "ram": ram,
                                                               "vcpus": vcpus, "disk": disk}}, token="admin:admin")
    assert status == 200, body
    if specs:
        status, body = oracle.call("POST", f"/flavors/{flavor_id}/os-extra_specs", {"extra_specs": specs},
                                   token="admin:admin")
        assert status == 200, body
    image_id = _snapshot(oracle, props)
    token = "admin:admin" if caller == "admin" else "demo:demo"
    nova_status, nova_body = oracle.boot(image_id, flavor_id, token=token)
    if nova_status == 202:
        oracle.delete(nova_body["server"]["id"], token=token)

    row = {"id": 99, "flavorid": flavor_id, "name": flavor_id, "memory_mb": ram, "vcpus": vcpus, "root_gb": disk,
           "ephemeral_gb": 0, "swap": 0, "rxtx_factor": 1.0, "disabled": False, "is_public": True,
           "extra_specs": specs}
    image = _image_as_glance_gives_it(oracle, image_id, props)
    try:
        check_boot(row, image, zero_disk_allowed=lambda: caller == "admin")
    except BootRefused as refused:
        ours = (refused.code, refused.message)
    else:
        ours = (202, None)
    theirs = (nova_status, next(iter(nova_body.values()))["message"] if nova_status != 202 else None)
    assert ours == theirs
