"""The Glance v2 client against the development image service (always runs: no ../shared needed)."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import urllib.request
from wsgiref.simple_server import make_server

import pytest

from openkeel_compute.images import errors, glance, local
from tests.images.conftest import context, make_client

QCOW2_VIRTUAL = 1 << 30


def qcow2_file(path):
    """The first bytes of a qcow2 v3 image of 1 GiB virtual size (enough for the header reader)."""
    header = b"QFI\xfb" + struct.pack(">I", 3) + b"\0" * 16 + struct.pack(">Q", QCOW2_VIRTUAL)
    path.write_bytes(header + b"\0" * 4064)
    return path


def test_show_reads_a_registered_image_as_nova_does(tmp_path, image_dir, local_service):
    src = qcow2_file(tmp_path / "disk.qcow2")
    body = local.register(image_dir, src, name="cirros", min_ram=64, min_disk=1,
                          properties={"hw_disk_bus": "virtio", "hw_firmware_type": "uefi"})
    client = make_client(api_servers=[local_service])
    image = client.show(context(), body["id"])
    assert image["id"] == body["id"] and image["name"] == "cirros" and image["status"] == "active"
    assert (image["disk_format"], image["container_format"]) == ("qcow2", "bare")
    assert (image["min_ram"], image["min_disk"], image["size"]) == (64, 1, 4096)
    assert image["virtual_size"] == QCOW2_VIRTUAL
    assert image["properties"] == {"hw_disk_bus": "virtio", "hw_firmware_type": "uefi"}
    assert image["is_public"] is True and image["visibility"] == "public"
    assert "self" not in image and "file" not in image and "schema" not in image
    assert len(image["checksum"]) == 32 and image["os_hash_algo"] == "sha512"


def test_download_url_serves_the_files_bytes(tmp_path, image_dir, local_service):
    src = tmp_path / "disk.raw"
    src.write_bytes(bytes(range(256)) * 64)
    body = local.register(image_dir, src)
    assert body["disk_format"] == "raw" and body["virtual_size"] == 16384
    client = make_client(api_servers=[local_service + "/"])
    url = client.download_url(context(), body["id"])
    assert url == f"{local_service}/v2/images/{body['id']}/file"
    with urllib.request.urlopen(url) as resp:
        assert resp.read() == src.read_bytes()
        assert resp.headers["Content-MD5"] == body["checksum"]


def test_missing_image_is_novas_400(local_service):
    client = make_client(api_servers=[local_service])
    with pytest.raises(errors.ImageNotFound) as info:
        client.show(context(), "0b1b5d4a-0e1b-4a43-9b5c-000000000000")
    err = info.value
    assert (err.code, err.explanation) == (400, "Can not find requested image")
    assert str(err) == "Image 0b1b5d4a-0e1b-4a43-9b5c-000000000000 could not be found."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_service_is_retried_then_reported():
    port = _free_port()
    client = make_client(api_servers=[f"http://127.0.0.1:{port}"], num_retries=2)
    with pytest.raises(errors.ImageServiceUnavailable) as info:
        client.show(context(), "0b1b5d4a-0e1b-4a43-9b5c-000000000000")
    err = info.value
    assert err.code == 500 and err.server == f"http://127.0.0.1:{port}"
    assert str(err).startswith(f"Connection to glance host http://127.0.0.1:{port} failed: ")
    assert err.explanation.endswith("<class 'nova.exception.GlanceConnectionFailed'>")


class _Flaky:
    """A real HTTP server that answers 503 a given number of times, then forwards to the image service."""

    def __init__(self, failures, upstream):
        self.failures, self.calls, self.upstream = failures, 0, upstream

    def __call__(self, environ, start_response):
        self.calls += 1
        if self.calls <= self.failures:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"busy"]
        return self.upstream(environ, start_response)


@pytest.mark.parametrize(("failures", "retries", "found"), [(2, 2, True), (3, 2, False), (1, 0, False)])
def test_503_is_retried_num_retries_times(tmp_path, image_dir, failures, retries, found):
    body = local.register(image_dir, qcow2_file(tmp_path / "d.qcow2"))
    app = _Flaky(failures, local.make_app(image_dir))
    server = make_server("127.0.0.1", 0, app)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = make_client(api_servers=[f"http://127.0.0.1:{server.server_port}"], num_retries=retries)
        if found:
            assert client.show(context(), body["id"])["id"] == body["id"]
        else:
            with pytest.raises(errors.ImageServiceUnavailable):
                client.show(context(), body["id"])
        assert app.calls == min(failures + 1, retries + 1)
    finally:
        server.shutdown()
        server.server_close()


def _v2_catalog(url, interfaces=("publicURL", "internalURL", "adminURL"), service_type="image"):
    return json.dumps([{"type": service_type, "name": "glance",
                        "endpoints": [{"region": "RegionOne", **{i: url for i in interfaces}}]}])


def test_the_endpoint_comes_from_the_tokens_catalog(tmp_path, image_dir, local_service):
    body = local.register(image_dir, qcow2_file(tmp_path / "d.qcow2"))
    client = make_client()
    ctx = context()
    ctx.environ = {"HTTP_X_SERVICE_CATALOG": _v2_catalog(local_service + "/v2")}
    assert client.show(ctx, body["id"])["id"] == body["id"]
    assert client.download_url(ctx, body["id"]) == f"{local_service}/v2/images/{body['id']}/file"


def test_internal_interface_first_and_valid_interfaces(tmp_path, image_dir, local_service):
    body = local.register(image_dir, qcow2_file(tmp_path / "d.qcow2"))
    dead = f"http://127.0.0.1:{_free_port()}"
    catalog = json.dumps([{"type": "image", "endpoints": [
        {"region": "RegionOne", "publicURL": dead, "internalURL": local_service, "adminURL": dead}]}])
    ctx = context()
    ctx.environ = {"HTTP_X_SERVICE_CATALOG": catalog}
    assert make_client().show(ctx, body["id"])["id"] == body["id"]
    with pytest.raises(errors.ImageServiceUnavailable):
        make_client(valid_interfaces=["public"], num_retries=0).show(ctx, body["id"])


def test_endpoint_override_wins_over_the_catalog(tmp_path, image_dir, local_service):
    body = local.register(image_dir, qcow2_file(tmp_path / "d.qcow2"))
    ctx = context()
    ctx.environ = {"HTTP_X_SERVICE_CATALOG": _v2_catalog(f"http://127.0.0.1:{_free_port()}")}
    assert make_client(endpoint_override=local_service).show(ctx, body["id"])["id"] == body["id"]


def test_no_image_endpoint_anywhere_is_reported():
    with pytest.raises(errors.ImageServiceUnavailable) as info:
        make_client().show(context(), "0b1b5d4a-0e1b-4a43-9b5c-000000000000")
    assert "api_servers" in str(info.value)


def test_glance_options_are_novas():
    client = make_client()
    opts = client.conf.glance
    assert opts.num_retries == 3 and opts.api_servers is None
    assert opts.valid_interfaces == ["internal", "public"] and opts.service_type == "image"
    for name in ("endpoint_override", "region_name", "cafile", "insecure", "timeout"):
        assert name in opts
    names = {o.dest for _, group in glance.list_opts() for o in group}
    assert not {"version", "min_version", "max_version"} & names
    assert {"api_servers", "num_retries", "endpoint_override", "valid_interfaces", "region_name"} <= names


def test_command_line_registers_and_serves(tmp_path):
    src = qcow2_file(tmp_path / "disk.qcow2")
    directory = tmp_path / "dir"
    out = subprocess.run([sys.executable, "-m", "openkeel_compute.images.local", "register", "--dir", str(directory),
                          str(src), "--name", "cirros", "--min-ram", "64", "--property", "hw_disk_bus=virtio"],
                         check=True, capture_output=True, text=True)
    image_id = out.stdout.strip()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "openkeel_compute.images.local", "serve", "--dir",
                             str(directory), "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert "serving" in proc.stderr.readline()
        image = make_client(api_servers=[f"http://127.0.0.1:{port}"]).show(context(), image_id)
        assert (image["name"], image["min_ram"], image["properties"]) == ("cirros", 64, {"hw_disk_bus": "virtio"})
    finally:
        proc.terminate()
        proc.wait(10)


def test_an_image_is_created_queued_then_uploaded_saving_then_active(local_service):
    client = make_client(api_servers=[local_service])
    made = client.create(context(), {"name": "snap", "visibility": "private", "min_ram": 64,
                                     "instance_uuid": "u-1", "image_type": "snapshot"})
    assert made["status"] == "queued" and made["size"] == 0 and made["properties"] == {
        "instance_uuid": "u-1", "image_type": "snapshot"}
    with pytest.raises(errors.ImageBadRequest):  # no formats yet: Glance refuses the data
        client.upload(context(), made["id"], iter([b"x"]))
    client.update_base(context(), made["id"], {"disk_format": "raw", "container_format": "bare"})
    data = b"\x01" * 3000 + b"\x02" * 3000
    client.upload(context(), made["id"], iter([data[:1000], data[1000:]]))
    image = client.show(context(), made["id"])
    assert (image["status"], image["size"], image["disk_format"]) == ("active", 6000, "raw")
    with urllib.request.urlopen(f"{local_service}/v2/images/{made['id']}/file") as resp:
        assert resp.read() == data
    with pytest.raises(errors.ImageError):  # an active image takes no second upload (409)
        client.upload(context(), made["id"], iter([b"y"]))
    listed = client.list_images(context(), {"image_type": "snapshot", "instance_uuid": "u-1"})
    assert [i["id"] for i in listed] == [made["id"]]
    client.delete(context(), made["id"])
    with pytest.raises(errors.ImageNotFound):
        client.show(context(), made["id"])


def test_a_create_with_a_read_only_attribute_is_refused(local_service):
    req = urllib.request.Request(local_service + "/v2/images", method="POST", data=b'{"status": "active"}')
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req)
    assert info.value.code == 403


def test_image_without_data_answers_204(tmp_path, image_dir, local_service):
    src = qcow2_file(tmp_path / "d.qcow2")
    body = local.register(image_dir, src, status="queued")
    with urllib.request.urlopen(f"{local_service}/v2/images/{body['id']}/file") as resp:
        assert resp.status == 204 and resp.read() == b""
    assert glance.image_from_glance({"id": "x", "size": None})["size"] == 0
