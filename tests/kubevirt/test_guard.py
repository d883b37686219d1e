"""The admission guard: what KubeVirt refuses beside an instancetype (seed 003) and in the VMI."""

from __future__ import annotations

from typing import Any

import pytest

from openkeel_compute.kubevirt.admission import RULES_BY_ID, Rendered, admission_refusals
from openkeel_compute.kubevirt.guard import (
    RefusedByKubeVirt,
    check_vm,
    cluster_refusals,
    instancetype_conflicts,
)
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt

IT = {"cpu": {"guest": 2}, "memory": {"guest": "4096Mi"}}


def _vm(domain: dict[str, Any], **tmpl: Any) -> dict[str, Any]:
    return {"spec": {"instancetype": {"name": "x"}, "template": {"spec": {"domain": domain, **tmpl}}}}


def test_seed_003_sizing_beside_a_matcher_is_refused() -> None:
    vm = _vm({"cpu": {"cores": 2, "sockets": 1}, "resources": {"requests": {"memory": "4Gi"}}, "devices": {}})
    assert instancetype_conflicts(vm, IT) == [
        "spec.template.spec.domain.cpu.sockets",
        "spec.template.spec.domain.cpu.cores",
        "spec.template.spec.domain.resources.requests.memory",
    ]


def test_a_cpu_limit_beside_an_instancetype_is_refused() -> None:
    vm = _vm({"resources": {"limits": {"cpu": "1000m"}}, "devices": {}})
    with pytest.raises(RefusedByKubeVirt, match=r"resources\.limits\.cpu conflicts with selected instance type"):
        check_vm(vm, IT)


def test_an_empty_node_selector_conflicts_with_an_instancetype_node_selector() -> None:
    vm = _vm({"devices": {}}, nodeSelector={})
    assert instancetype_conflicts(vm, {**IT, "nodeSelector": {"a": "b"}}) == ["spec.template.spec.nodeSelector"]


def test_other_resources_and_zero_sockets_do_not_conflict() -> None:
    vm = _vm({"cpu": {"sockets": 0}, "resources": {"requests": {"ephemeral-storage": "1Gi"}}, "devices": {}})
    assert instancetype_conflicts(vm, IT) == []


def test_devices_conflict_only_when_both_sides_have_some() -> None:
    vm = _vm({"devices": {"gpus": [{"name": "g", "deviceName": "d"}]}})
    assert instancetype_conflicts(vm, IT) == []
    assert instancetype_conflicts(vm, {**IT, "gpus": [{"name": "g1", "deviceName": "d"}]}) == [
        "spec.template.spec.domain.devices.gpus"]


@pytest.mark.parametrize(("spec", "preference", "rule"), [
    ({"cpu": {"guest": 2, "isolateEmulatorThread": True}, "memory": {"guest": "1Gi"}}, {},
     "isolate-emulator-needs-dedicated"),
    ({"cpu": {"guest": 2, "realtime": {}}, "memory": {"guest": "1Gi"}}, {}, "realtime-needs-dedicated"),
    ({"cpu": {"guest": 2, "dedicatedCPUPlacement": True, "numa": {"guestMappingPassthrough": {}}},
      "memory": {"guest": "1Gi"}}, {}, "numa-needs-hugepages"),
    ({"cpu": {"guest": 1}, "memory": {"guest": "1000Mi", "hugepages": {"pageSize": "1Gi"}}}, {},
     "hugepages-fit-guest-memory"),
    ({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}, "launchSecurity": {"snp": {}}},
     {"firmware": {"preferredEfi": {"secureBoot": True}}, "features": {"preferredSmm": {}}}, "sev-snp-no-secure-boot"),
    ({"cpu": {"guest": 3}, "memory": {"guest": "1Gi"}},
     {"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"ratio": 2}}}, "spread-divisible"),
    ({"cpu": {"guest": 4, "maxSockets": 2}, "memory": {"guest": "1Gi"}}, {}, "max-sockets-below-topology"),
    ({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}},
     {"requirements": {"memory": {"guest": "2Gi"}}}, "preference-requirements"),
    ({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}}, {"firmware": {"preferredEfi": {}}}, "secure-boot-needs-smm"),
])
def test_cluster_refusals_name_the_reason(spec: dict[str, Any], preference: dict[str, Any], rule: str) -> None:
    refusals = admission_refusals(spec, preference)
    assert rule in [found for found, _message in refusals], refusals
    assert RULES_BY_ID[rule].check(Rendered(spec, preference)) in cluster_refusals(spec, preference)


def test_mapping_never_emits_realtime_without_dedicated_cpus() -> None:
    result = flavor_to_kubevirt({"id": "rt", "name": "rt", "ram": 1024, "vcpus": 2, "disk": 1,
                                 "extra_specs": {"hw:cpu_realtime": "yes", "hw:emulator_threads_policy": "isolate",
                                                 "hw:numa_nodes": "1"}})
    assert result.instancetypes[0]["spec"]["cpu"] == {"guest": 2}
    assert {e.key: str(e.fidelity) for e in result.report if e.key.startswith("hw:")} == {
        "hw:cpu_realtime": "none", "hw:emulator_threads_policy": "none", "hw:numa_nodes": "none"}


def test_strict_schema_rejects_unknown_fields(strict_errors: Any) -> None:
    obj = {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineClusterInstancetype",
           "metadata": {"name": "x"}, "spec": {"cpu": {"guest": 1, "vcpus": 1}, "memory": {"guest": "1Gi"}}}
    assert any("vcpus" in e for e in strict_errors(obj)), "the strict schema must refuse spec.cpu.vcpus"
