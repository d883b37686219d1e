"""The admission table: each KubeVirt v1.9 refusal, the reproductions of issue 13, and the operator doc."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from openkeel_compute.kubevirt.admission import (
    ADMISSION_TABLE,
    ANNOTATIONS_LIMIT,
    RULES_BY_ID,
    Rendered,
    admission_refusals,
    annotations_size,
)
from openkeel_compute.kubevirt.flavor import InvalidFlavor
from openkeel_compute.kubevirt.guard import cluster_refusals
from openkeel_compute.kubevirt.image import preference_with_image
from openkeel_compute.kubevirt.mapping import FlavorObjects, flavor_to_kubevirt

DOC = Path(__file__).resolve().parents[2] / "docs" / "kubevirt-mapping.md"


def _flavor(vcpus: int = 4, ram: int = 4096, **extra_specs: str) -> dict[str, Any]:
    specs = {key.replace("__", ":"): value for key, value in extra_specs.items()}
    return {"id": "f1", "name": "f1", "vcpus": vcpus, "ram": ram, "disk": 10, "extra_specs": specs}


def _table(result: FlavorObjects, preference_spec: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """Every admission-table refusal of the emitted objects (all copies, their metadata and the VM)."""
    found = []
    for instancetype, preference in zip(result.instancetypes, result.preferences, strict=True):
        pref = preference["spec"] if preference_spec is None else preference_spec
        found += admission_refusals(instancetype["spec"], pref, result.vm,
                                    [instancetype["metadata"], preference["metadata"], result.vm["metadata"]])
    return found


def _report(result: FlavorObjects) -> dict[str, tuple[str, str]]:
    return {e.key: (str(e.fidelity), e.note) for e in result.report}


# -- the table itself ---------------------------------------------------------------------------------


def test_every_row_has_an_id_a_message_a_provenance_and_what_openkeel_does() -> None:
    assert len(RULES_BY_ID) == len(ADMISSION_TABLE), "row ids must be unique"
    for rule in ADMISSION_TABLE:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.id), rule.id
        assert rule.message.strip() and rule.instead.strip(), rule.id
        assert re.search(r"\.go:\d+", rule.source), f"{rule.id}: provenance must be path:line, got {rule.source!r}"


IT = {"cpu": {"guest": 4}, "memory": {"guest": "4Gi"}}
DEDICATED = {"cpu": {"guest": 4, "dedicatedCPUPlacement": True}, "memory": {"guest": "4Gi"}}


def _vm(**domain_devices: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"domain": {"devices": {"disks": [{"name": "root", "disk": {}}],
                                                                   **domain_devices}}}}}}


def _server_vm(*, hostname: str = "web-1", volume: dict[str, Any] | None = None, volume_name: str = "cloudinitdisk",
               dv_name: str = "u-root", networks: list[dict[str, Any]] | None = None, mac: str = "fa:16:3e:00:00:01",
               **template: Any) -> dict[str, Any]:
    """A server's VM as compose writes it, with one field changed."""
    return {"spec": {
        "dataVolumeTemplates": [{"metadata": {"name": dv_name}, "spec": {"storage": {}}}],
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
            "hostname": hostname,
            "domain": {"devices": {"disks": [{"name": "root", "disk": {}}, {"name": "cloudinitdisk", "disk": {}}],
                                   "interfaces": [{"name": "default", "masquerade": {}, "macAddress": mac}]}},
            "networks": networks or [{"name": "default", "pod": {}}],
            "volumes": [{"name": "root", "dataVolume": {"name": "u-root"}},
                        {"name": volume_name, **(volume or {"cloudInitNoCloud": {"secretRef": {"name": "s"}}})}],
            **template}}}}


# One object set per row that KubeVirt refuses for that row's reason: (instancetype, preference, VM, metadata).
REFUSED: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]] = {
    "cpu-guest-required": ({"cpu": {"guest": 0}, "memory": {"guest": "1Gi"}}, {}, None, []),
    "cpu-uint32": ({"cpu": {"guest": 2**40}, "memory": {"guest": "1Gi"}}, {}, None, []),
    "isolate-emulator-needs-dedicated": ({"cpu": {"guest": 2, "isolateEmulatorThread": True},
                                          "memory": {"guest": "1Gi"}}, {}, None, []),
    "realtime-needs-dedicated": ({"cpu": {"guest": 2, "realtime": {}}, "memory": {"guest": "1Gi"}}, {}, None, []),
    "realtime-needs-numa-passthrough": ({"cpu": {"guest": 2, "realtime": {}, "dedicatedCPUPlacement": True},
                                         "memory": {"guest": "1Gi"}}, {}, None, []),
    "numa-needs-dedicated": ({"cpu": {"guest": 2, "numa": {"guestMappingPassthrough": {}}},
                              "memory": {"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}}}, {}, None, []),
    "numa-needs-hugepages": ({"cpu": {"guest": 2, "dedicatedCPUPlacement": True,
                                      "numa": {"guestMappingPassthrough": {}}}, "memory": {"guest": "1Gi"}}, {},
                             None, []),
    "dedicated-max-two-threads": (DEDICATED, {"cpu": {"preferredCPUTopology": "threads"}}, None, []),
    "arm64-dedicated-one-thread": (DEDICATED, {"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {
        "across": "CoresThreads", "ratio": 2}}, "preferredArchitecture": "arm64"}, None, []),
    "max-sockets-below-topology": ({"cpu": {"guest": 4, "maxSockets": 2}, "memory": {"guest": "1Gi"}}, {}, None, []),
    "preferred-topology-known": (IT, {"cpu": {"preferredCPUTopology": "diagonal"}}, None, []),
    "spread-across-known": (IT, {"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"across": "Dies"}}},
                            None, []),
    "spread-cores-threads-ratio": (IT, {"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {
        "across": "CoresThreads", "ratio": 4}}}, None, []),
    "spread-divisible": ({"cpu": {"guest": 3}, "memory": {"guest": "1Gi"}},
                         {"cpu": {"preferredCPUTopology": "spread"}}, None, []),
    "hugepages-fit-guest-memory": ({"cpu": {"guest": 1}, "memory": {"guest": "1000Mi",
                                                                    "hugepages": {"pageSize": "1Gi"}}}, {}, None, []),
    "overcommit-range": ({"cpu": {"guest": 1}, "memory": {"guest": "1Gi", "overcommitPercent": 101}}, {}, None, []),
    "overcommit-not-with-hugepages": ({"cpu": {"guest": 1}, "memory": {"guest": "1Gi", "overcommitPercent": 10,
                                                                       "hugepages": {"pageSize": "2Mi"}}}, {}, None, []),
    "secure-boot-needs-smm": (IT, {"firmware": {"preferredEfi": {"secureBoot": True}}}, None, []),
    "launch-security-architecture": ({**IT, "launchSecurity": {"sev": {}}},
                                     {"preferredArchitecture": "arm64", "firmware": {"preferredEfi": {}}}, None, []),
    "launch-security-one-type": ({**IT, "launchSecurity": {"sev": {}, "tdx": {}}},
                                 {"firmware": {"preferredEfi": {"secureBoot": False}}}, None, []),
    "launch-security-needs-uefi": ({**IT, "launchSecurity": {"tdx": {}}}, {}, None, []),
    "sev-snp-no-secure-boot": ({**IT, "launchSecurity": {"snp": {}}},
                               {"firmware": {"preferredEfi": {}}, "features": {"preferredSmm": {}}}, None, []),
    "tdx-no-smm": ({**IT, "launchSecurity": {"tdx": {}}},
                   {"firmware": {"preferredEfi": {}}, "features": {"preferredSmm": {}}}, None, []),
    "snp-tdx-no-persistent-efi": ({**IT, "launchSecurity": {"snp": {}}},
                                  {"firmware": {"preferredEfi": {"secureBoot": False, "persistent": True}}}, None, []),
    "arm64-no-bios": (IT, {"preferredArchitecture": "arm64", "firmware": {"preferredUseBios": True}}, None, []),
    "disk-bus-ide": (IT, {"devices": {"preferredDiskBus": "ide"}}, _vm(), []),
    "cdrom-bus-virtio": (IT, {"devices": {"preferredCdromBus": "virtio"}},
                         {"spec": {"template": {"spec": {"domain": {"devices": {"disks": [
                             {"name": "cd", "cdrom": {}}]}}}}}}, []),
    "disk-bus-known": (IT, {"devices": {"preferredDiskBus": "fdc"}}, _vm(), []),
    "arm64-disk-bus": (IT, {"devices": {"preferredDiskBus": "sata"}, "preferredArchitecture": "arm64"}, _vm(), []),
    "interface-model": (IT, {"devices": {"preferredInterfaceModel": "vmxnet3"}}, None, []),
    "video-type": (IT, {"devices": {"preferredVideoType": "qxl"}}, None, []),
    "input-bus": (IT, {"devices": {"preferredInputBus": "ps2"}}, None, []),
    "input-type": (IT, {"devices": {"preferredInputType": "mouse"}}, None, []),
    "sound-model": (IT, {"devices": {"preferredSoundModel": "sb16"}}, _vm(sound={"name": "sound"}), []),
    "arm64-no-sound": (IT, {"preferredArchitecture": "arm64"}, _vm(sound={"name": "sound"}), []),
    "watchdog-model": (IT, {"preferredArchitecture": "arm64"},
                       _vm(watchdog={"name": "w", "i6300esb": {"action": "reset"}}), []),
    "machine-type": (IT, {"machine": {"preferredMachineType": "pc-i440fx-2.11"}}, None, []),
    "preference-requirements": (IT, {"requirements": {"cpu": {"guest": 8}}}, None, []),
    "affinity-label-syntax": (IT, {}, {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "openkeel.io/trait.a/b", "operator": "NotIn", "values": ["true"]}]}]}}}}}}}, []),
    "node-selector-label-syntax": ({**IT, "nodeSelector": {"openkeel.io/aggregate.x": "a b"}}, {}, None, []),
    "annotations-total-size": (IT, {}, None, [{"name": "x", "annotations": {"a": "\U0001F600" * 65536}}]),
    "annotation-key-syntax": (IT, {}, None, [{"name": "x", "annotations": {"not a key": "v"}}]),
    "label-syntax": (IT, {}, None, [{"name": "x", "labels": {"app.kubernetes.io/managed-by": "open keel"}}]),
    "object-name": (IT, {}, None, [{"name": "M1.Small"}]),
    "hostname-dns-label": (IT, {}, _server_vm(hostname="web.example"), []),
    "access-credential-volume": (IT, {}, _server_vm(accessCredentials=[{"sshPublicKey": {
        "source": {"secret": {"secretName": "k"}}, "propagationMethod": {"configDrive": {}}}}]), []),
    "cloud-init-data-source": (IT, {}, _server_vm(volume={"cloudInitNoCloud": {}}), []),
    "cloud-init-inline-size": (IT, {}, _server_vm(volume={"cloudInitNoCloud": {"userData": "x" * 2049}}), []),
    "volume-one-source": (IT, {}, _server_vm(volume={"emptyDisk": {"capacity": "1Gi"},
                                                     "cloudInitNoCloud": {"userData": "x"}}), []),
    "disk-volume-match": (IT, {}, _server_vm(volume_name="other"), []),
    "datavolume-template-referenced": (IT, {}, _server_vm(dv_name="elsewhere"), []),
    "interface-network-match": (IT, {}, _server_vm(networks=[{"name": "default", "multus": {"networkName": "n"}}]),
                                []),
    "mac-address": (IT, {}, _server_vm(mac="fa:16:3e:zz:00:01"), []),
}


def test_every_row_has_a_refused_example() -> None:
    assert sorted(REFUSED) == sorted(RULES_BY_ID), "each admission row needs an example in REFUSED"


@pytest.mark.parametrize("rule_id", sorted(RULES_BY_ID))
def test_each_row_finds_its_refusal(rule_id: str) -> None:
    instancetype, preference, vm, metadata = REFUSED[rule_id]
    rule = RULES_BY_ID[rule_id]
    message = rule.check(Rendered(instancetype, preference, vm, metadata))
    assert message is not None, f"{rule_id} does not fire on its example"
    assert rule_id in [found for found, _ in admission_refusals(instancetype, preference, vm, metadata)]
    assert message in cluster_refusals(instancetype, preference, vm, metadata), "the guard must find it too"


def test_the_plain_objects_break_no_row() -> None:
    meta = [{"name": "m1", "labels": {"app.kubernetes.io/managed-by": "openkeel"}, "annotations": {"a": "b"}}]
    assert admission_refusals(IT, {}, _vm(), meta) == []


def test_the_plain_server_vm_breaks_no_row() -> None:
    assert admission_refusals(IT, {}, _server_vm()) == []
    assert cluster_refusals(IT, {}, _server_vm()) == []


# -- the reproductions of issue 13 item 2 ---------------------------------------------------------------


def test_realtime_without_numa_passthrough_is_not_emitted() -> None:
    result = flavor_to_kubevirt(_flavor(hw__cpu_policy="dedicated", hw__cpu_realtime="yes"))
    cpu = result.instancetypes[0]["spec"]["cpu"]
    assert "realtime" not in cpu and "numa" not in cpu
    fidelity, note = _report(result)["hw:cpu_realtime"]
    assert fidelity == "none" and "guestMappingPassthrough" in note and "hw:mem_page_size" in note
    assert _table(result) == []


def test_realtime_with_huge_pages_gets_numa_passthrough() -> None:
    result = flavor_to_kubevirt(_flavor(hw__cpu_policy="dedicated", hw__cpu_realtime="yes",
                                        hw__cpu_realtime_mask="^0", hw__mem_page_size="2MB"))
    cpu = result.instancetypes[0]["spec"]["cpu"]
    assert cpu["realtime"] == {"mask": "0-3,^0"} and cpu["numa"] == {"guestMappingPassthrough": {}}
    assert _report(result)["hw:cpu_realtime"][0] == "partial"
    assert _table(result) == []


def test_tdx_gets_uefi() -> None:
    result = flavor_to_kubevirt(_flavor(hw__mem_encryption="true", hw__mem_encryption_model="intel-tdx"))
    assert result.instancetypes[0]["spec"]["launchSecurity"] == {"tdx": {}}
    assert result.preferences[0]["spec"]["firmware"] == {"preferredEfi": {"secureBoot": False}}
    assert _table(result) == []


def test_tdx_with_secure_boot_has_no_smm() -> None:
    result = flavor_to_kubevirt(_flavor(hw__mem_encryption="true", hw__mem_encryption_model="intel-tdx",
                                        os__secure_boot="required"))
    preference = result.preferences[0]["spec"]
    assert preference["firmware"] == {"preferredEfi": {"secureBoot": True}}
    assert "preferredSmm" not in preference.get("features", {})
    assert _table(result) == []


@pytest.mark.parametrize("flavor_specs", [
    {"hw:mem_encryption": "true", "hw:mem_encryption_model": "intel-tdx"},
    {"os:secure_boot": "required"},
])
def test_tdx_with_secure_boot_from_the_image_has_no_smm(flavor_specs: dict[str, str]) -> None:
    flavor = _flavor()
    flavor["extra_specs"] = flavor_specs
    props = {"os_secure_boot": "required", "hw_firmware_type": "uefi", "hw_mem_encryption": "true",
             "hw_mem_encryption_model": "intel-tdx"}
    image = {"name": "img", "id": "i1", "properties": props}
    spec = preference_with_image(flavor, image).spec
    assert spec["firmware"] == {"preferredEfi": {"secureBoot": True}}
    assert "preferredSmm" not in spec.get("features", {})
    result = flavor_to_kubevirt(flavor)
    assert _table(result, spec) == []


def test_an_image_tdx_model_cannot_override_the_flavors_sev_instancetype() -> None:
    flavor = _flavor(hw__mem_encryption="true")  # no model: the instancetype carries SEV
    image = {"name": "img", "id": "i1", "properties": {"os_secure_boot": "required", "hw_firmware_type": "uefi",
                                                       "hw_mem_encryption_model": "intel-tdx"}}
    result = preference_with_image(flavor, image)
    assert result.spec["firmware"] == {"preferredEfi": {"secureBoot": False}}
    assert [key for key, _ in result.dropped] == ["hw_mem_encryption_model"]
    assert _table(flavor_to_kubevirt(flavor), result.spec) == []


def test_dedicated_cpus_get_at_most_two_threads_per_core() -> None:
    result = flavor_to_kubevirt(_flavor(hw__cpu_policy="dedicated", hw__cpu_threads="4"))
    preference = result.preferences[0]["spec"]
    rendered = Rendered(result.instancetypes[0]["spec"], preference)
    assert (rendered.sockets, rendered.cores, rendered.threads) == (1, 2, 2)
    fidelity, note = _report(result)["hw:cpu_threads"]
    assert fidelity == "partial" and "the flavor's 4 threads become 2" in note
    assert _table(result) == []


def test_dedicated_cpus_with_odd_threads_get_one_thread_per_core() -> None:
    result = flavor_to_kubevirt(_flavor(vcpus=6, hw__cpu_policy="dedicated", hw__cpu_threads="3",
                                        hw__cpu_sockets="2"))
    rendered = Rendered(result.instancetypes[0]["spec"], result.preferences[0]["spec"])
    assert (rendered.sockets, rendered.cores, rendered.threads) == (2, 3, 1)
    assert _table(result) == []


def test_shared_cpus_keep_four_threads() -> None:
    result = flavor_to_kubevirt(_flavor(hw__cpu_threads="4"))
    assert result.preferences[0]["spec"]["cpu"] == {"preferredCPUTopology": "threads"}


@pytest.mark.parametrize(("prop", "value"), [
    ("hw_disk_bus", "ide"), ("hw_disk_bus", "fdc"), ("hw_cdrom_bus", "ide"), ("hw_cdrom_bus", "virtio"),
    ("hw_vif_model", "vmxnet3"), ("hw_video_model", "qxl"), ("hw_machine_type", "pc-i440fx-2.11"),
])
def test_image_device_values_kubevirt_refuses_are_dropped(prop: str, value: str) -> None:
    image = {"name": "img", "id": "i1", "properties": {prop: value}}
    result = preference_with_image(_flavor(), image)
    devices = result.spec.get("devices", {})
    assert value not in devices.values() and value not in result.spec.get("machine", {}).values()
    assert [key for key, _reason in result.dropped] == [prop]
    objects = flavor_to_kubevirt(_flavor())
    vm = objects.vm
    vm["spec"]["template"]["spec"]["domain"]["devices"]["disks"].append({"name": "cd", "cdrom": {}})
    assert admission_refusals(objects.instancetypes[0]["spec"], result.spec, vm) == []


def test_image_ide_bus_would_have_been_refused() -> None:
    objects = flavor_to_kubevirt(_flavor())
    refused = admission_refusals(objects.instancetypes[0]["spec"], {"devices": {"preferredDiskBus": "ide"}},
                                 objects.vm)
    assert ("disk-bus-ide", "IDE bus is not supported") in refused


def test_image_accepted_buses_stay() -> None:
    image = {"name": "img", "id": "i1", "properties": {"hw_disk_bus": "sata", "hw_cdrom_bus": "scsi"}}
    spec = preference_with_image(_flavor(), image).spec
    assert spec["devices"] == {"preferredDiskBus": "sata", "preferredCdromBus": "scsi"}


# Nova's descriptions hold characters up to U+FFFD only, so 3 UTF-8 bytes is the widest.
@pytest.mark.parametrize("char", ["x", "\u00e9", "\u4e2d", "\ufffd"])
def test_a_maximal_description_keeps_annotations_under_the_limit(char: str) -> None:
    flavor = {**_flavor(), "description": char * 65535}
    result = flavor_to_kubevirt(flavor)
    for doc in [*result.documents(), result.vm]:
        assert annotations_size(doc["metadata"]["annotations"]) <= ANNOTATIONS_LIMIT
    dropped = len((char * 65535).encode()) + 300 > ANNOTATIONS_LIMIT
    assert ("openkeel.io/flavor-description" in result.instancetypes[0]["metadata"]["annotations"]) is not dropped
    assert ("description" in _report(result)) is dropped
    assert _table(result) == []


def test_six_hundred_extra_specs_keep_annotations_under_the_limit() -> None:
    specs = {f"custom:{i:04d}{'k' * 240}": "\u00e9" * 255 for i in range(600)}
    flavor = {**_flavor(), "extra_specs": specs, "description": "d" * 1000,
              "os-flavor-access:is_public": False, "access": ["p" * 255, "q"]}
    result = flavor_to_kubevirt(flavor)
    for doc in [*result.documents(), result.vm]:
        assert annotations_size(doc["metadata"]["annotations"]) <= ANNOTATIONS_LIMIT
    annotations = result.instancetypes[0]["metadata"]["annotations"]
    assert "openkeel.io/extra-specs" not in annotations
    assert annotations["openkeel.io/flavor-description"] == "d" * 1000, "only what must go is left out"
    fidelity, note = _report(result)["extra_specs"]
    assert fidelity == "none" and "262144 bytes" in note
    assert _table(result) == []


def test_vcpus_beyond_uint32_are_refused_with_the_field_named() -> None:
    with pytest.raises(InvalidFlavor, match="vcpus"):
        flavor_to_kubevirt(_flavor(vcpus=2**40))


def test_max_sockets_beyond_uint32_is_not_applied() -> None:
    result = flavor_to_kubevirt(_flavor(hw__cpu_max_sockets="4294967296"))
    assert "maxSockets" not in result.instancetypes[0]["spec"]["cpu"]
    assert _report(result)["hw:cpu_max_sockets"][0] == "none"
    assert _table(result) == []
    kept = flavor_to_kubevirt(_flavor(hw__cpu_max_sockets="4294967295"))
    assert kept.instancetypes[0]["spec"]["cpu"]["maxSockets"] == 4294967295


def test_trait_label_keys_kubernetes_refuses_are_not_applied() -> None:
    # Nova accepts a space in an extra-spec key; a Kubernetes label key cannot hold one.
    result = flavor_to_kubevirt(_flavor(**{"trait:CUSTOM A": "forbidden", "aggregate_instance_extra_specs:a b": "x"}))
    assert "affinity" not in result.vm["spec"]["template"]["spec"]
    assert "nodeSelector" not in result.instancetypes[0]["spec"]
    assert _table(result) == []


def test_aarch64_image_on_an_encrypted_flavor_keeps_x86_64() -> None:
    flavor = _flavor(hw__mem_encryption="true")
    image = {"name": "img", "id": "i1", "properties": {"hw_architecture": "aarch64", "hw_firmware_type": "uefi"}}
    result = preference_with_image(flavor, image)
    assert "preferredArchitecture" not in result.spec
    assert [key for key, _ in result.dropped] == ["hw_architecture"]


def test_aarch64_image_drops_bios_and_sata() -> None:
    image = {"name": "img", "id": "i1",
             "properties": {"hw_architecture": "aarch64", "hw_firmware_type": "bios", "hw_disk_bus": "sata"}}
    result = preference_with_image(_flavor(), image)
    assert result.spec["preferredArchitecture"] == "arm64"
    assert "firmware" not in result.spec and "devices" not in result.spec
    assert sorted(key for key, _ in result.dropped) == ["hw_disk_bus", "hw_firmware_type"]


def test_aarch64_image_on_dedicated_threads_gets_one_thread_per_core() -> None:
    flavor = _flavor(hw__cpu_policy="dedicated", hw__cpu_threads="2")
    image = {"name": "img", "id": "i1", "properties": {"hw_architecture": "aarch64"}}
    result = preference_with_image(flavor, image)
    assert result.spec["cpu"] == {"preferredCPUTopology": "cores"}


# -- the operator's documentation ----------------------------------------------------------------------


def _doc_section() -> str:
    text = DOC.read_text()
    start = text.index("## What KubeVirt refuses")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_the_doc_states_every_row_with_kubevirts_message() -> None:
    section = _doc_section()
    for rule in ADMISSION_TABLE:
        assert f"`{rule.id}`" in section, f"docs/kubevirt-mapping.md lacks the row {rule.id}"
        assert rule.message in section, f"docs/kubevirt-mapping.md lacks KubeVirt's message for {rule.id}"


def test_the_doc_section_speaks_the_operators_language() -> None:
    section = _doc_section()
    assert not re.search(r"\.go:\d+|seed 000|§", section), "no source lines or spec references in the operator doc"
