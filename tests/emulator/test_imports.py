"""The built-in CDI reads each import's HTTP source as CDI's importer does: a source served to its end makes the
DataVolume Succeeded (with the Secret's header sent), one that cannot be read shows what CDI v1.64 shows for a
failing import (still ImportInProgress, Running=False with reason Error and the importer's message, the
restart count growing as kubelet restarts the importer pod) and the VM is DataVolumeError."""

from __future__ import annotations

import http.server
import socket
import threading
from typing import ClassVar

import pytest

from openkeel_compute.controller.kube import make_client
from openkeel_compute.emulator import Delays, Emulator
from openkeel_compute.emulator.importer import read_source
from tests.emulator.conftest import (
    CIT,
    CPREF,
    NS,
    VM,
    VM_NAME,
    header_secret,
    instancetype,
    preference,
    printable,
    put,
    server_vm,
)


class _Images(http.server.BaseHTTPRequestHandler):
    """/good: 1 MiB of image; anything else 404 (an image deleted from the image service)."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self):
        type(self).seen.append(self.headers.get("X-Auth-Token"))
        if self.path != "/good":
            self.send_error(404, "Not Found")
            return
        body = b"\0" * (1 << 20)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def images():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Images.seen = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def reading():
    """A built-in cluster whose imports read their sources (the default)."""
    emulator = Emulator(delays=Delays.fast(), tick=0.01).start()
    emulator.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    emulator.seed(header_secret())
    yield emulator
    emulator.stop()


def _boot(cluster, url):
    client = make_client(cluster.kubeconfig(), timeout=5)
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm(url=url)), namespace=NS)
    assert put(client, "virtualmachines", VM_NAME, "start").status_code == 202
    return client


def _conditions(dv):
    return {c["type"]: (c["status"], c.get("reason"), c.get("message")) for c in dv["status"]["conditions"]}


def test_an_import_whose_source_is_served_succeeds_with_the_secrets_header(reading, images):
    client = _boot(reading, f"{images}/good")
    dv = reading.wait_for("DataVolume", f"{VM_NAME}-root", NS, lambda o: (o or {}).get("status", {}).get(
        "phase") == "Succeeded")
    assert _conditions(dv)["Ready"][:1] == ("True",)
    assert "restartCount" not in dv["status"] or dv["status"]["restartCount"] == 0
    assert _Images.seen == ["abc"]  # read once, with the header of secretExtraHeaders (X-Auth-Token:abc)
    reading.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Running")
    client.close()


def test_an_import_whose_source_is_gone_shows_cdis_failing_import_and_restarts(reading, images):
    client = _boot(reading, f"{images}/deleted")
    name = f"{VM_NAME}-root"
    message = "Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found"
    failed = reading.wait_for("DataVolume", name, NS, lambda o: (o or {}).get("status", {}).get(
        "phase") == "ImportInProgress" and _conditions(o)["Running"][0] == "False")
    assert failed["status"]["phase"] == "ImportInProgress"  # CDI fails a DataVolume only on a fatal error
    assert _conditions(failed) == {"Bound": ("True", "Bound", f"PVC {name} Bound"), "Ready": ("False", None, None),
                                   "Running": ("False", "Error", message)}
    assert reading.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "DataVolumeError")
    again = reading.wait_for("DataVolume", name, NS, lambda o: o["status"].get("restartCount", 0) >= 2
                             and _conditions(o)["Running"][0] == "False")
    assert again["status"]["phase"] == "ImportInProgress"
    assert _conditions(again)["Running"] == ("False", "Error", message)
    assert len(_Images.seen) >= 3  # each restarted pod reads the source again
    assert reading.get("VirtualMachineInstance", VM_NAME, NS) is None  # never started
    client.close()


def test_a_cluster_told_not_to_read_images_imports_an_unserved_url(images):
    with Emulator(delays=Delays.fast(), tick=0.01, read_images=False) as cluster:
        cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        cluster.seed(header_secret())
        client = _boot(cluster, f"{images}/deleted")
        cluster.wait_for("DataVolume", f"{VM_NAME}-root", NS,
                         lambda o: (o or {}).get("status", {}).get("phase") == "Succeeded")
        assert _Images.seen == []
        client.close()


def test_the_importer_words_a_source_that_does_not_answer_as_cdi():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    url = f"http://127.0.0.1:{port}/v2/images/x/file"
    assert read_source(url, {}, None, 2, 10) == (
        f'Unable to connect to http data source: HTTP request errored: Get "{url}": '
        f"dial tcp 127.0.0.1:{port}: connect: connection refused")

