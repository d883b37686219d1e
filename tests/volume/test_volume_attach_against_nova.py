"""Attach, update and detach exchanges answered alike by OpenKeel and the live Nova 34.0.0 servers API (its
Cinder fixture knows every volume id as an available 1 GiB volume; the in-memory Cinder holds the same
ids). The servers' ids are replaced by SERVER, and the device names by DEVICE: Nova's fake driver names
disks /dev/sdX, Nova's libvirt driver (and OpenKeel) /dev/vdX."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest

from tests.api import oracles
from tests.server_world import IMAGE

VA = "aaaaaaaa-1111-4111-8111-00000000000a"
VB = "aaaaaaaa-1111-4111-8111-00000000000b"
VC = "aaaaaaaa-1111-4111-8111-00000000000c"
MULTI = "4757d51f-54eb-4442-8684-3399a6431f67"  # the fixture's multiattach volume
USER = "user:project"


def _att(volume_id, **extra):
    return {"volumeAttachment": {"volumeId": volume_id, **extra}}


# (token, version, method, path under the server, body, compare headers)
EXCHANGES = [
    (USER, "2.79", "POST", "/os-volume_attachments", _att(VA, tag="data", delete_on_termination=True), False),
    (USER, "2.1", "POST", "/os-volume_attachments", _att(VA), False),
    (USER, "2.59", "POST", "/os-volume_attachments", _att(MULTI), False),
    (USER, "2.48", "POST", "/os-volume_attachments", _att(VB, tag="x"), False),
    (USER, "2.78", "POST", "/os-volume_attachments", _att(VB, delete_on_termination=True), False),
    (USER, "2.1", "POST", "/os-volume_attachments", _att(VB, device="dev/vdb"), False),
    (USER, "2.1", "POST", "/os-volume_attachments", {"volumeAttachment": {}}, False),
    (USER, "2.85", "PUT", f"/os-volume_attachments/{VA}", _att(VA, device="/dev/vdz"), False),
    (USER, "2.85", "PUT", f"/os-volume_attachments/{VA}", _att(VA, tag="other"), False),
    (USER, "2.85", "PUT", f"/os-volume_attachments/{VA}", _att(VB), False),
    ("admin:admin", "2.84", "PUT", f"/os-volume_attachments/{VA}", _att(VB), False),
    (USER, "2.85", "PUT", f"/os-volume_attachments/{VB}", _att(VB), False),
    (USER, "2.84", "PUT", f"/os-volume_attachments/{VA}", _att(VA, delete_on_termination=False), False),
    (USER, "2.85", "PUT", f"/os-volume_attachments/{VA}", _att(VA, delete_on_termination=False), True),
    (USER, "2.101", "POST", "/os-volume_attachments", _att(VC), True),
    (USER, "2.89", "GET", f"/os-volume_attachments/{VA}", None, False),
    (USER, "2.1", "DELETE", f"/os-volume_attachments/{VB}", None, False),
    (USER, "2.1", "DELETE", f"/os-volume_attachments/{VA}", None, True),
]


@pytest.fixture(scope="module")
def nova():
    with oracles.servers_oracle() as base:
        yield base


def _normal(answer, server: str, headers: bool):
    status, all_headers, body = answer.comparable()
    text = json.dumps(body).replace(server, "SERVER")
    text = re.sub(r'"device": "/dev/[sv]d[a-z]+"', '"device": "DEVICE"', text)
    text = re.sub(r'"(attachment_id|bdm_uuid)": "[0-9a-f-]{36}"', r'"\1": "ID"', text)
    kept = [h for h in all_headers if h[0] in ("content-type", "content-length")] if headers else []
    return status, kept, json.loads(text)


def _nova_server(base: str) -> str:
    body = json.dumps({"server": {"name": "v", "imageRef": "155d900f-4e14-4e4c-a73d-069cbf4541e6", "flavorRef": "1",
                                  "networks": "none"}}).encode()
    made = oracles.ask_nova(base, "POST", "/v2.1/servers", token=USER, version="2.37", body=body)
    assert made.status == 202, made.body
    uuid = made.json["server"]["id"]
    deadline = time.monotonic() + 120
    while oracles.ask_nova(base, "GET", f"/v2.1/servers/{uuid}", token=USER).json["server"]["status"] != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return uuid


def _our_server(client, controller) -> str:
    got = client.post("/v2.1/servers", headers={"X-Auth-Token": USER, "OpenStack-API-Version": "compute 2.37"},
                      json_body={"server": {
        "name": "v", "imageRef": IMAGE, "flavorRef": "small", "networks": "none"}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    deadline = time.monotonic() + 120
    while client.get(f"/v2.1/servers/{uuid}", headers={"X-Auth-Token": USER}).json["server"]["status"] != "ACTIVE":
        assert time.monotonic() < deadline
        controller.run_once()
        time.sleep(0.05)
    return uuid


def _settle(controller, cinder):
    """The controller carries out what the API asked (a detach needs the volume in-use, as Cinder wants)."""
    deadline = time.monotonic() + 120
    while any(v["status"] in ("reserved", "attaching", "detaching") for v in cinder.volumes.values()):
        assert time.monotonic() < deadline
        controller.run_once()
        time.sleep(0.05)


def test_exchanges_answered_as_nova_answers(nova, volume_world, cinder):
    client, controller, _cluster = volume_world
    # fresh volume ids for each run: the oracle (one per module) keeps the earlier runs' attachments
    fresh = {old: str(uuid.uuid4()) for old in (VA, VB, VC)}

    def ids(text: str) -> str:
        for old, new in fresh.items():
            text = text.replace(old, new)
        return text

    for volume_id, multi in ((fresh[VA], False), (fresh[VB], False), (fresh[VC], False), (MULTI, True)):
        vol = cinder.volume(multiattach=multi)
        del cinder.volumes[vol["id"]]
        vol["id"] = volume_id
        cinder.volumes[volume_id] = vol
    theirs_id, ours_id = _nova_server(nova), _our_server(client, controller)
    for token, version, method, path, body, headers in EXCHANGES:
        data = ids(json.dumps(body)).encode() if body is not None else None
        path = ids(path)
        theirs = oracles.ask_nova(nova, method, f"/v2.1/servers/{theirs_id}{path}", token=token, version=version,
                                  body=data)
        ours = oracles.ask_openkeel(client, method, f"/v2.1/servers/{ours_id}{path}", token=token, version=version,
                                    body=data)
        assert _normal(ours, ours_id, headers) == _normal(theirs, theirs_id, headers), (method, path, version)
        _settle(controller, cinder)
