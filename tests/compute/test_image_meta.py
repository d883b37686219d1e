"""What a server keeps of its image in system metadata."""

from __future__ import annotations

from openkeel_compute.compute import image_meta

IMAGE = {
    "id": "155d900f-4e14-4e4c-a73d-069cbf4541e6",
    "min_ram": 0,
    "min_disk": 0,
    "disk_format": "qcow2",
    "container_format": "bare",
    "properties": {"hw_disk_bus": "virtio", "os_distro": "fedora", "hw_video_ram": 8,
                   "block_device_mapping": "[...]", "img_mappings": "[...]", "long": "é" * 200},
}


def test_properties_are_copied_with_the_prefix_and_cut_to_255_bytes():
    meta = image_meta.system_metadata(IMAGE, {"root_gb": 10})
    assert meta["image_hw_disk_bus"] == "virtio" and meta["image_hw_video_ram"] == "8"
    assert "image_block_device_mapping" not in meta and "image_img_mappings" not in meta
    # 200 two-byte characters are 400 bytes: 127 whole characters fit in 255 bytes
    assert meta["image_long"] == "é" * 127
    assert (meta["image_min_ram"], meta["image_min_disk"], meta["image_disk_format"],
            meta["image_container_format"]) == ("0", "10", "qcow2", "bare")


def test_min_disk_is_at_least_the_flavor_root_disk_except_for_vhd():
    assert image_meta.system_metadata(dict(IMAGE, min_disk=20), {"root_gb": 10})["image_min_disk"] == "20"
    assert image_meta.system_metadata(dict(IMAGE, min_disk=20, disk_format="vhd"),
                                      {"root_gb": 10})["image_min_disk"] == "10"
    assert image_meta.system_metadata(dict(IMAGE, min_disk=None), {"root_gb": 3})["image_min_disk"] == "3"
    assert "image_min_disk" not in image_meta.system_metadata(dict(IMAGE, min_disk=None))
    no_disk = dict(IMAGE)
    del no_disk["min_disk"]
    assert "image_min_disk" not in image_meta.system_metadata(no_disk)


def test_the_inverse_gives_the_image_back():
    meta = image_meta.system_metadata(IMAGE, {"root_gb": 1})
    image = image_meta.image_from_system_metadata({**meta, "locked_reason": "x", "image_gone": None})
    assert image["disk_format"] == "qcow2" and image["min_disk"] == "1"
    assert image["properties"]["os_distro"] == "fedora" and image["properties"]["locked_reason"] == "x"
    assert "gone" not in image["properties"]


def test_truncation_never_splits_a_character():
    assert image_meta.truncate_utf8("a" + "€" * 100, 5) == "a€"
    assert image_meta.truncate_utf8("short") == "short"
