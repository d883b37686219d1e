"""The image proxy (/images and image metadata) answers as the live Nova 34.0.0 servers API does.

Nova's servers oracle keeps its images in Nova's Glance fixture; OpenKeel asks the development image
service (images/local.py, over HTTP, as it asks Glance), given the same images as the oracle shows
them (ids, names, sizes, sizes required, properties, times). The same requests go to both, in order,
writes included; answers must be equal once the image service's own address in the "alternate"
links and the update time of an image just written are put aside. Lists are compared in id order:
the fixture lists images in its own order and ignores filters and pages (Glance's are pinned by
tests/api/test_images.py).
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from openkeel_compute.images import glance, local
from tests.api import oracles

ADMIN, USER = "admin:admin", "iu:imgproj"
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
OTHER = "a2459075-d96c-40d5-893e-577ff92e721c"
DELETED = "76fa36fc-c930-4bf3-8c8a-ea2a2420deb6"
UNKNOWN = "0e7a3c35-6b43-4c38-9c1f-6c2a7ef7a0a1"
_ALTERNATE = re.compile(r"http://[^/\"]+/images/")
_STATUS = {"ACTIVE": "active", "SAVING": "saving", "DELETED": "deleted", "ERROR": "killed"}


@pytest.fixture(scope="module")
def nova():
    with oracles.servers_oracle() as url:
        yield url


@pytest.fixture
def images_like_novas(nova, conf, tmp_path):
    """The oracle's images in a development image service OpenKeel's [glance] points at."""
    shown = oracles.ask_nova(nova, "GET", "/v2.1/images/detail", token=ADMIN).json["images"]
    directory = tmp_path / "images"
    directory.mkdir()
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\0" * 512)
    for image in shown:
        record = {"id": image["id"], "name": image["name"], "status": _STATUS[image["status"]],
                  "visibility": "public", "protected": False, "os_hidden": False, "owner": None,
                  "size": image["OS-EXT-IMG-SIZE:size"], "min_ram": image["minRam"], "min_disk": image["minDisk"],
                  "disk_format": "raw", "container_format": "bare", "tags": [],
                  "created_at": image["created"], "updated_at": image["updated"], "_path": str(disk),
                  **image["metadata"]}
        (directory / f"{image['id']}.json").write_text(json.dumps(record))
    server = local.serve(str(directory), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    glance.register_opts(conf)
    conf.set_override("api_servers", [f"http://127.0.0.1:{server.server_port}"], group="glance")
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def _normalised(answer: oracles.Answer, host: str, *, written: bool = False):
    status, headers, body = answer.comparable()
    text = _ALTERNATE.sub("<image service>/images/", json.dumps(body)).replace(host, "<host>")
    body = json.loads(text)
    if isinstance(body, dict) and isinstance(body.get("images"), list):
        body["images"].sort(key=lambda image: image["id"])
    if written and isinstance(body, dict):
        for image in body.get("images") or [body.get("image") or {}]:
            image["updated"] = "<just written>"
    return status, headers, body


CASES = [
    # (method, path, token, version, body, written): in order, writes included
    ("GET", "/images", USER, None, None, False),
    ("GET", "/images/detail", USER, "2.35", None, False),
    ("GET", "/images", USER, "2.36", None, False),
    ("GET", f"/images/{IMAGE}", USER, None, None, False),
    ("GET", f"/images/{OTHER}", USER, "2.35", None, False),
    ("GET", f"/images/{IMAGE}", USER, "2.36", None, False),
    ("GET", f"/images/{UNKNOWN}", USER, None, None, False),
    ("GET", f"/images/{IMAGE}?anything=1", USER, None, None, False),
    ("GET", f"/images/{IMAGE}/metadata", USER, None, None, False),
    ("GET", f"/images/{IMAGE}/metadata", USER, "2.38", None, False),
    ("GET", f"/images/{IMAGE}/metadata", USER, "2.39", None, False),
    ("GET", f"/images/{IMAGE}/metadata/architecture", USER, None, None, False),
    ("GET", f"/images/{IMAGE}/metadata/nope", USER, None, None, False),
    ("GET", f"/images/{UNKNOWN}/metadata", USER, None, None, False),
    ("POST", f"/images/{IMAGE}/metadata", USER, None, {"metadata": {"color": "blue", "shape": "L"}}, False),
    ("GET", f"/images/{IMAGE}", USER, None, None, True),
    ("POST", f"/images/{IMAGE}/metadata", USER, None, {"metadata": {"bad/key": "x"}}, False),
    ("POST", f"/images/{IMAGE}/metadata", USER, None, {"meta": {"a": "b"}}, False),
    ("PUT", f"/images/{IMAGE}/metadata/color", USER, None, {"meta": {"color": "red"}}, False),
    ("PUT", f"/images/{IMAGE}/metadata/color", USER, None, {"meta": {"shade": "red"}}, False),
    ("PUT", f"/images/{IMAGE}/metadata/color", USER, None, {"meta": {"color": "red", "x": "y"}}, False),
    ("GET", f"/images/{IMAGE}/metadata", USER, None, None, False),
    ("DELETE", f"/images/{IMAGE}/metadata/shape", USER, None, None, False),
    ("DELETE", f"/images/{IMAGE}/metadata/shape", USER, None, None, False),
    ("GET", f"/images/{IMAGE}/metadata", USER, None, None, False),
    ("PUT", f"/images/{IMAGE}/metadata", USER, None, {"metadata": {"only": "this"}}, False),
    ("GET", f"/images/{IMAGE}", USER, "2.1", None, True),
    ("PUT", f"/images/{UNKNOWN}/metadata", USER, None, {"metadata": {"a": "b"}}, False),
    ("PUT", "/os-quota-sets/imgproj", ADMIN, None, {"quota_set": {"metadata_items": 2}}, False),
    ("POST", f"/images/{OTHER}/metadata", USER, None, {"metadata": {"one": "1", "two": "2"}}, False),
    ("PUT", f"/images/{OTHER}/metadata", USER, None, {"metadata": {"one": "1", "two": "2", "three": "3"}}, False),
    ("GET", f"/images/{OTHER}/metadata", USER, None, None, False),
    ("DELETE", f"/images/{DELETED}", USER, "2.36", None, False),
    ("DELETE", f"/images/{DELETED}", USER, None, None, False),
    ("GET", f"/images/{DELETED}", USER, None, None, False),
    ("DELETE", f"/images/{DELETED}", USER, None, None, False),
    ("GET", "/images/detail", USER, None, None, True),
    ("GET", "/v2/images", USER, None, None, False),
]


def test_the_image_proxy_answers_as_nova(nova, images_like_novas, client):
    differences = []
    for method, path, token, version, body, written in CASES:
        root = "" if path.startswith("/v2/") else "/v2.1"
        data = json.dumps(body).encode() if body is not None else None
        theirs = oracles.ask_nova(nova, method, root + path, token=token, version=version, body=data)
        ours = oracles.ask_openkeel(client, method, root + path, token=token, version=version, body=data)
        expected = _normalised(theirs, nova.split("//")[1], written=written)
        got = _normalised(ours, client.host, written=written)
        if expected != got:
            differences.append((method, path, version, expected, got))
    assert differences == []
