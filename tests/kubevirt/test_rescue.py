"""kubevirt/rescue.py: a server's VM into its rescue form and back, as JSON patches (pure)."""

from __future__ import annotations

import pytest

from openkeel_compute.emulator.store import ApiError, json_patch
from openkeel_compute.kubevirt.rescue import (
    RESCUED_FROM,
    is_rescued,
    rescue_patch,
    stable_device,
    unrescue_patch,
    user_data,
)
from openkeel_compute.kubevirt.server import compose
from tests.kubevirt.objects import IMAGE, SERVER, SERVER_UUID, flavor_copy

UUID = SERVER_UUID.lower()


def _vm(**flavor):
    return compose(SERVER, flavor_copy(**flavor), IMAGE, "ssh-ed25519 AAAA k").vm


def _rescued(vm, stable=None):
    return json_patch(vm, rescue_patch(vm, UUID, image_url="http://glance/v2/images/x/file", header_secret="tok",
                                       size_gib=3, labels={"a": "b"}, stable=stable))


def _disks(vm):
    return vm["spec"]["template"]["spec"]["domain"]["devices"]["disks"]


def test_legacy_rescue_boots_the_rescue_disk_then_the_root_disk_and_unrescue_restores_all():
    vm = _vm(ephemeral_gb=1, swap=512)
    rescued = _rescued(vm)
    assert is_rescued(rescued) and not is_rescued(vm)
    assert [(d["name"], d.get("bootOrder")) for d in _disks(rescued)] == [
        ("rescue", 1), ("root", 2), ("cloudinitdisk", None)]
    volumes = {v["name"]: v for v in rescued["spec"]["template"]["spec"]["volumes"]}
    assert volumes["cloudinitdisk"]["cloudInitNoCloud"] == {"secretRef": {"name": f"{UUID}-rescue-user-data"}}
    template = rescued["spec"]["dataVolumeTemplates"][-1]
    assert template["metadata"] == {"name": f"{UUID}-rescue", "labels": {"a": "b"}}
    assert template["spec"]["source"]["http"] == {"url": "http://glance/v2/images/x/file",
                                                  "secretExtraHeaders": ["tok"]}
    assert template["spec"]["storage"] == {"resources": {"requests": {"storage": "3Gi"}}}
    back = json_patch(rescued, unrescue_patch(rescued))
    assert back == vm
    assert unrescue_patch(vm) == []


@pytest.mark.parametrize(("device", "bus", "wanted"), [
    ("disk", "scsi", ("disk", "scsi")), ("disk", "ide", ("disk", "sata")), ("floppy", "fdc", ("disk", "sata")),
    ("cdrom", "virtio", ("cdrom", "sata")), ("cdrom", "scsi", ("cdrom", "scsi")), ("cdrom", "usb", ("cdrom", "sata")),
])
def test_stable_device_rescue_keeps_every_disk(device, bus, wanted):
    assert stable_device({"hw_rescue_device": device, "hw_rescue_bus": bus}) == wanted
    vm = _vm(ephemeral_gb=1)
    rescued = _rescued(vm, stable=wanted)
    names = [d["name"] for d in _disks(vm)]
    assert [d["name"] for d in _disks(rescued)] == [*names, "rescue"]
    assert _disks(rescued)[-1] == {"name": "rescue", wanted[0]: {"bus": wanted[1]}, "bootOrder": 1}
    assert json_patch(rescued, unrescue_patch(rescued)) == vm


def test_one_property_is_no_stable_rescue():
    assert stable_device({"hw_rescue_device": "disk"}) is None
    assert stable_device({"hw_rescue_bus": "virtio"}) is None


def test_a_vm_changed_since_it_was_read_is_not_patched():
    vm = _vm()
    ops = rescue_patch(vm, UUID, image_url="u", header_secret=None, size_gib=1, labels={})
    changed = json_patch(vm, [{"op": "add", "path": "/spec/template/spec/domain/devices/disks/-",
                               "value": {"name": "x", "disk": {}}}])
    with pytest.raises(ApiError):
        json_patch(changed, ops)
    rescued = json_patch(vm, ops)
    assert "secretExtraHeaders" not in rescued["spec"]["dataVolumeTemplates"][-1]["spec"]["source"]["http"]
    assert RESCUED_FROM in rescued["metadata"]["annotations"]


def test_the_password_is_quoted_for_yaml():
    text = user_data('p"a: ss').decode()
    assert text.startswith("#cloud-config\n") and 'password: "p\\"a: ss"' in text
