"""The guest device names Nova's compute gives a server's block devices at build (compute/device_names.py):
recorded in the mappings (os-volume_attachments' ``device``) and sent to Cinder as the connector's
``mountpoint``, so that the volume's attachment shows its device (``/dev/vda`` for a boot volume)."""

from __future__ import annotations

import pytest

from openkeel_compute.compute import device_names
from tests.conftest import admin
from tests.server_world import out_of_build as _settled

ADMIN = admin("2.96")


def _bdm(uuid, **values):
    return {"uuid": uuid, **values}


def test_an_image_boot_names_ephemeral_swap_then_volumes_and_ignores_the_names_asked():
    bdms = [_bdm("root", source_type="image", destination_type="local", boot_index=0),
            _bdm("blank", source_type="blank", destination_type="volume", boot_index=-1),
            _bdm("data", source_type="volume", destination_type="volume", device_name="/dev/vdz"),
            _bdm("eph", source_type="blank", destination_type="local", boot_index=-1),
            _bdm("swap", source_type="blank", destination_type="local", guest_format="swap", boot_index=-1)]
    assert device_names.default_names(bdms, {}) == {
        "root": "/dev/vda", "eph": "/dev/vdb", "swap": "/dev/vdc", "data": "/dev/vdd", "blank": "/dev/vde"}


def test_the_root_keeps_its_name_and_each_bus_its_prefix():
    bdms = [_bdm("root", source_type="volume", destination_type="volume", boot_index=0, device_name="vdb"),
            _bdm("a", source_type="volume", destination_type="volume", disk_bus="scsi"),
            _bdm("b", source_type="volume", destination_type="volume"),
            _bdm("c", source_type="volume", destination_type="volume", disk_bus="nonsense", device_type="cdrom")]
    assert device_names.default_names(bdms, {}) == {
        "root": "/dev/vdb", "a": "/dev/sda", "b": "/dev/vda", "c": "/dev/sdb"}
    sata = device_names.default_names(bdms[1:] + [_bdm("r", source_type="volume", destination_type="volume",
                                                       boot_index=0)], {"image_hw_disk_bus": "sata"})
    assert sata == {"r": "/dev/sda", "a": "/dev/sdb", "b": "/dev/sdc", "c": "/dev/sdd"}
    assert device_names.default_names(bdms[1:], {}) == {}  # no root: Nova names nothing


def test_names_past_z_and_the_ide_limit():
    bdms = [_bdm("root", source_type="volume", destination_type="volume", boot_index=0)]
    bdms += [_bdm(str(i), source_type="volume", destination_type="volume") for i in range(27)]
    names = device_names.default_names(bdms, {})
    assert (names["24"], names["25"], names["26"]) == ("/dev/vdz", "/dev/vdaa", "/dev/vdab")
    with pytest.raises(device_names.TooManyDisks):
        device_names.default_names(bdms[:5], {"image_hw_disk_bus": "ide"})


def test_an_attach_takes_the_next_name_of_the_images_bus():
    """Nova's get_device_name_for_instance: the image's hw_disk_bus (virtio when none), the next free name."""
    assert device_names.next_name(["/dev/vda"], {}) == "/dev/vdb"
    assert device_names.next_name(["/dev/vda", "/dev/vdb", None, "vdd"], {}) == "/dev/vdc"
    assert device_names.next_name(["/dev/sda"], {"image_hw_disk_bus": "scsi"}) == "/dev/sdb"
    assert device_names.next_name(["/dev/sda"], {"image_hw_disk_bus": "nonsense"}) == "/dev/vda"
    with pytest.raises(device_names.TooManyDisks, match=r"\(4\)"):
        device_names.next_name(["hda", "hdb", "hdc", "hdd"], {"image_hw_disk_bus": "ide"})
    taken = [f"vd{device_names._letters(i)}" for i in range(device_names.ATTACH_DEVICES)]
    assert taken[-1] == "vdzz"
    with pytest.raises(device_names.TooManyDisks, match=r"\(702\)"):
        device_names.next_name(taken, {})


def test_a_boot_sends_each_volumes_device_to_cinder_as_its_mountpoint(volume_world, cinder):
    """Nova's compute names the devices before it attaches the volumes and sends the name as the
    connector's mountpoint: Cinder's volume shows ``attachments[].device``, os-volume_attachments ``device``."""
    client, controller, _cluster = volume_world
    root, data, other = cinder.volume(bootable=True), cinder.volume(), cinder.volume()
    got = client.post("/v2.1/servers", headers=ADMIN, json_body={"server": {
        "name": "bfv", "flavorRef": "small", "networks": "none", "block_device_mapping_v2": [
            {"source_type": "volume", "destination_type": "volume", "uuid": root["id"], "boot_index": 0},
            {"source_type": "volume", "destination_type": "volume", "uuid": data["id"], "device_name": "vdz"},
            {"source_type": "volume", "destination_type": "volume", "uuid": other["id"], "disk_bus": "scsi"}]}})
    assert got.status_code == 202, got.text
    uuid = got.json["server"]["id"]
    assert _settled(client, controller, uuid)["status"] == "ACTIVE"
    expected = {root["id"]: "/dev/vda", data["id"]: "/dev/vdb", other["id"]: "/dev/sda"}
    mountpoints = {cinder.attachments[r["path"].rsplit("/", 1)[1]]["volume_id"]:
                   r["body"]["attachment"]["connector"].get("mountpoint")
                   for r in cinder.requests if r["method"] == "PUT" and "/attachments/" in r["path"]}
    assert mountpoints == expected
    assert {v: cinder.volumes[v]["attachments"][0]["device"] for v in expected} == expected
    listed = client.get(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=ADMIN).json["volumeAttachments"]
    assert {a["volumeId"]: a["device"] for a in listed} == expected
    later = cinder.volume()
    got = client.post(f"/v2.1/servers/{uuid}/os-volume_attachments", headers=ADMIN,
                      json_body={"volumeAttachment": {"volumeId": later["id"]}})
    assert got.status_code == 200 and got.json["volumeAttachment"]["device"] == "/dev/vdc", got.text
