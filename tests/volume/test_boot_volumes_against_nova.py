"""Boots with block devices refused alike by OpenKeel and the live Nova 34.0.0 servers API (its Cinder
fixture knows every volume id as an available 1 GiB volume; the in-memory Cinder holds the same ids)."""

from __future__ import annotations

import json

import pytest

from openkeel_compute.db import api as db_api
from tests.api import oracles
from tests.api.servers.helpers import IMAGE, local_image_service
from tests.volume.test_boot_volumes import _flavors, _world, database_url  # noqa: F401 (fixture)

VOL = "6ca404f3-d844-4169-bb96-bc792f37de98"  # the fixture's bootable image-backed volume
MULTI = "4757d51f-54eb-4442-8684-3399a6431f67"  # the fixture's multiattach volume


def _v(uuid=VOL, **extra):
    return {"source_type": "volume", "destination_type": "volume", "uuid": uuid, "boot_index": 0, **extra}


CASES = [
    ("2.100", {"block_device_mapping_v2": [_v()], "block_device_mapping": [{"volume_id": VOL}]}),
    ("2.100", {"block_device_mapping_v2": [{"source_type": "blank", "destination_type": "volume", "uuid": VOL,
                                            "boot_index": 0}]}),
    ("2.100", {"block_device_mapping_v2": [{"source_type": "image", "destination_type": "volume", "boot_index": 0}]}),
    ("2.100", {"block_device_mapping_v2": [{"source_type": "image", "destination_type": "local", "uuid": IMAGE,
                                            "boot_index": 0}]}),
    ("2.100", {"block_device_mapping_v2": [_v(volume_type="x")]}),
    ("2.66", {"block_device_mapping_v2": [_v(volume_type="x")]}),
    ("2.100", {"block_device_mapping_v2": [_v(boot_index=1)]}),
    ("2.100", {"imageRef": IMAGE, "block_device_mapping_v2": [_v(boot_index=None)]}),
    ("2.100", {"block_device_mapping_v2": [{"source_type": "blank", "destination_type": "volume", "boot_index": 0}]}),
    ("2.100", {"block_device_mapping_v2": [{"source_type": "image", "destination_type": "volume", "uuid": IMAGE,
                                            "boot_index": 0}]}),
    ("2.100", {"block_device_mapping_v2": [_v(disk_bus="foo")]}),
    ("2.100", {"block_device_mapping_v2": [_v(), {"source_type": "blank", "destination_type": "local",
                                                  "boot_index": -1, "volume_size": 5}]}),
    ("2.100", {"block_device_mapping_v2": [_v(), {"source_type": "blank", "destination_type": "local",
                                                  "boot_index": -1, "guest_format": "swap", "volume_size": 5}]}),
    ("2.100", {"imageRef": IMAGE, "block_device_mapping_v2": [
        _v(boot_index=1, device_name="/dev/vda"),
        {"source_type": "image", "destination_type": "local", "uuid": IMAGE, "boot_index": 0}]}),
    ("2.100", {"max_count": 2, "block_device_mapping_v2": [_v()]}),
    ("2.59", {"block_device_mapping_v2": [_v(MULTI)]}),
    ("2.100", {"block_device_mapping": [{"device_name": "vdb"}]}),
    ("2.100", {"block_device_mapping": [{"volume_id": VOL, "device_name": "vdb"}]}),
    ("2.100", {"block_device_mapping_v2": [{"source_type": "blank", "destination_type": "volume", "volume_size": 1,
                                            "boot_index": 0, "volume_type": "nope"}]}),
    ("2.100", {"block_device_mapping_v2": [_v(foo=1)]}),
    ("2.100", {"block_device_mapping_v2": [_v(boot_index="x")]}),
    ("2.100", {"block_device_mapping_v2": [_v(virtual_name="swap")]}),
]


@pytest.fixture(scope="module")
def nova():
    with oracles.servers_oracle() as base:
        yield base


@pytest.fixture
def openkeel(tmp_path, cinder, database_url, nova):  # noqa: F811 (the fixture imported)
    from openkeel_compute import policies

    cinder.types = []  # the fixture knows no volume type either
    for volume_id, multi in ((VOL, False), (MULTI, True)):
        vol = cinder.volume(bootable=True, multiattach=multi)
        del cinder.volumes[vol["id"]]
        vol["id"] = volume_id
        cinder.volumes[volume_id] = vol
    conf, client, engine = _world(tmp_path, database_url, cinder)
    with local_image_service(conf, tmp_path):
        _flavors(engine)
        yield client
    db_api.dispose_all()
    policies.reset()


@pytest.mark.parametrize(("version", "fields"), CASES)
def test_refused_as_nova_refuses(nova, openkeel, version, fields):
    body = json.dumps({"server": {"name": "v", "flavorRef": "1", "networks": "none", **fields}}).encode()
    theirs = oracles.ask_nova(nova, "POST", "/v2.1/servers", token="user:project", version=version, body=body)
    ours = oracles.ask_openkeel(openkeel, "POST", "/v2.1/servers", token="user:project", version=version, body=body)
    assert theirs.status >= 400, theirs.body
    assert (ours.status, ours.json) == (theirs.status, theirs.json)
