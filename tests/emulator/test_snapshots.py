"""The built-in cluster's VirtualMachineSnapshot, VirtualMachineSnapshotContent and VirtualMachineExport
(emulator/snapshots.py): indications, the content and its copy of the disk, the export's links serving the
bytes to the token only, raw and gzip, and a snapshot of a VM that is not there failing."""

from __future__ import annotations

import base64
import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2 as httpx
import pytest

from openkeel_compute.controller.kube import VM
from openkeel_compute.emulator.faults import Fault
from tests.emulator.conftest import NS, VM_NAME, boot, put, running, server_vm

DISK = bytes(range(256)) * 64  # 16 KiB


@pytest.fixture
def image_url():
    """An image service serving DISK to the token server_vm's import Secret sends."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(DISK)))
            self.end_headers()
            self.wfile.write(DISK)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v2/images/abc/file"
    server.shutdown()
    server.server_close()


def _api(cluster, method, path, body=None):
    return httpx.request(method, f"{cluster.url}{path}", json=body, timeout=5)


SNAPSHOTS = f"/apis/snapshot.kubevirt.io/v1beta1/namespaces/{NS}/virtualmachinesnapshots"
EXPORTS = f"/apis/export.kubevirt.io/v1/namespaces/{NS}/virtualmachineexports"


def _snapshot(cluster, name="snap", vm=VM_NAME):
    got = _api(cluster, "POST", SNAPSHOTS, {"apiVersion": "snapshot.kubevirt.io/v1beta1",
                                            "kind": "VirtualMachineSnapshot", "metadata": {"name": name},
                                            "spec": {"source": {"apiGroup": "kubevirt.io",
                                                                "kind": "VirtualMachine", "name": vm}}})
    assert got.status_code == 201, got.text
    return cluster.wait_for("VirtualMachineSnapshot", name, NS,
                            lambda o: (o.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


def _export(cluster, name="export", token="s3cret"):
    cluster.seed({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": NS},
                  "data": {"token": base64.b64encode(token.encode()).decode()}})
    got = _api(cluster, "POST", EXPORTS, {"apiVersion": "export.kubevirt.io/v1", "kind": "VirtualMachineExport",
                                          "metadata": {"name": name}, "spec": {
                                              "source": {"apiGroup": "snapshot.kubevirt.io",
                                                         "kind": "VirtualMachineSnapshot", "name": "snap"},
                                              "tokenSecretRef": "token"}})
    assert got.status_code == 201, got.text
    return cluster.wait_for("VirtualMachineExport", name, NS, lambda o: (o.get("status") or {}).get("phase")
                            == "Ready")


def test_a_running_vm_is_snapshotted_with_its_agent_and_exported(cluster, client, image_url):
    boot(cluster, client, start=False)  # the namespace, the flavor, the import Secret
    _api(cluster, "DELETE", f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/{VM_NAME}")
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o is None)
    cluster.wait_for("DataVolume", f"{VM_NAME}-root", NS, lambda o: o is None)
    client.create(VM.from_dict(server_vm(VM_NAME, "m1.small", image_url)), namespace=NS)
    assert put(client, "virtualmachines", VM_NAME, "start").status_code == 202
    running(cluster)
    snap = _snapshot(cluster)
    assert (snap["status"]["phase"], snap["status"]["readyToUse"]) == ("Succeeded", True)
    assert snap["status"]["indications"] == ["Online", "GuestAgent"]
    content = cluster.get("VirtualMachineSnapshotContent", snap["status"]["virtualMachineSnapshotContentName"], NS)
    assert content["status"]["readyToUse"] is True
    ((backup),) = content["spec"]["volumeBackups"]
    assert (backup["volumeName"], backup["persistentVolumeClaim"]["metadata"]["name"]) == ("root", f"{VM_NAME}-root")
    export = _export(cluster)
    (volume,) = export["status"]["links"]["internal"]["volumes"]
    urls = {f["format"]: f["url"] for f in volume["formats"]}
    assert set(urls) == {"raw", "gzip"} and volume["name"] == f"{VM_NAME}-root"
    assert httpx.get(urls["raw"]).status_code == 401
    assert httpx.get(urls["raw"], headers={"x-kubevirt-export-token": "wrong"}).status_code == 401
    assert httpx.get(urls["raw"], headers={"x-kubevirt-export-token": "s3cret"}).content == DISK
    assert gzip.decompress(httpx.get(urls["gzip"] + "?x_kubevirt_export_token=s3cret").content) == DISK
    # the copy is the snapshot's: the VM deleted, the export still serves it
    assert _api(cluster, "DELETE", f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachines/{VM_NAME}").status_code \
        == 200
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o is None)
    assert httpx.get(urls["raw"], headers={"x-kubevirt-export-token": "s3cret"}).content == DISK
    # deleting the snapshot takes its content (and the copy) with it
    assert _api(cluster, "DELETE", f"{SNAPSHOTS}/snap").status_code == 200
    cluster.wait_for("VirtualMachineSnapshotContent", content["metadata"]["name"], NS, lambda o: o is None)
    cluster.wait_for("VirtualMachineExport", "export", NS,
                     lambda o: o is not None and (o.get("status") or {}).get("phase") == "Pending")
    assert httpx.get(urls["raw"], headers={"x-kubevirt-export-token": "s3cret"}).status_code == 404


def test_a_stopped_vm_has_no_indications_and_a_missing_vm_fails(cluster, client):
    boot(cluster, client, start=False)
    snap = _snapshot(cluster)
    assert (snap["status"]["phase"], snap["status"]["indications"]) == ("Succeeded", [])
    failed = _snapshot(cluster, "nothing", vm="not-there")
    assert failed["status"]["phase"] == "Failed" and failed["status"]["readyToUse"] is False
    assert {c["type"]: c.get("message") for c in failed["status"]["conditions"]}["Failure"] == (
        "VirtualMachine not-there does not exist")


def test_the_snapshot_failure_fault(cluster, client):
    boot(cluster, client, start=False)
    cluster.inject(Fault(kind="snapshot-failure", name=VM_NAME, message="no VolumeSnapshotClass"))
    snap = _snapshot(cluster)
    assert snap["status"]["phase"] == "Failed"
    assert {c["type"]: c.get("message") for c in snap["status"]["conditions"]}["Failure"] == "no VolumeSnapshotClass"
