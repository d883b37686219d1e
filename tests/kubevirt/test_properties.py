"""Properties over generated flavors: strict-valid objects, no admission conflict, lossless round trip."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from openkeel_compute.kubevirt.admission import admission_refusals
from openkeel_compute.kubevirt.flavor import parse_flavor
from openkeel_compute.kubevirt.guard import cluster_refusals, instancetype_conflicts
from openkeel_compute.kubevirt.image import ImageRefused, preference_with_image
from openkeel_compute.kubevirt.mapping import FlavorObjects, flavor_to_kubevirt
from openkeel_compute.kubevirt.reverse import IncompleteObjects, objects_to_flavor
from openkeel_compute.kubevirt.rules import Fidelity
from tests.kubevirt.strategies import PROPERTY_OPTIONS, flavors, images, random_flavor, random_image

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TABLE_FLAVORS = 10_000


def _annotation_left_out(result: FlavorObjects) -> bool:
    return any(e.key in ("description", "extra_specs") and "left out" in e.note for e in result.report)


def _table_refusals(flavor: dict[str, Any], image: dict[str, Any]) -> list[Any]:
    """Every admission-table refusal of a flavor's objects, and of its preference with the image applied."""
    result = flavor_to_kubevirt(flavor, PROPERTY_OPTIONS)
    found: list[Any] = []
    for instancetype, preference in zip(result.instancetypes, result.preferences, strict=True):
        found += instancetype_conflicts(result.vm, instancetype["spec"])
        metadata = [instancetype["metadata"], preference["metadata"], result.vm["metadata"]]
        found += admission_refusals(instancetype["spec"], preference["spec"], result.vm, metadata)
    try:
        with_image = preference_with_image(flavor, image, PROPERTY_OPTIONS)
    except ImageRefused:
        return found  # Nova refuses this flavor and image together
    instancetype_spec = result.instancetypes[0]["spec"] if result.instancetypes else None
    if instancetype_spec is not None:
        found += admission_refusals(instancetype_spec, with_image.spec, result.vm)
    return found


# Inputs that KubeVirt v1.9 refused before the mapping avoided them; the generator must keep producing them.
_RISKY = {
    "dedicated CPUs with 3-4 threads": lambda f, i: f["extra_specs"].get("hw:cpu_policy") == "dedicated"
    and f["extra_specs"].get("hw:cpu_threads") in ("3", "4"),
    "dedicated realtime": lambda f, i: f["extra_specs"].get("hw:cpu_policy") == "dedicated"
    and "hw:cpu_realtime" in f["extra_specs"],
    "TDX": lambda f, i: f["extra_specs"].get("hw:mem_encryption_model") == "intel-tdx",
    "image secure boot": lambda f, i: i["properties"].get("os_secure_boot") == "required",
    "image IDE bus": lambda f, i: i["properties"].get("hw_disk_bus") == "ide",
    "maxSockets beyond uint32": lambda f, i: int(f["extra_specs"].get("hw:cpu_max_sockets", "0")) > 2**32 - 1,
    "description over 60,000 characters": lambda f, i: len(f["description"] or "") > 60_000,
}


def test_no_generated_flavor_or_image_breaks_a_row_of_the_admission_table() -> None:
    rng = random.Random(20261201)  # a fixed seed: every run checks the same 10,000 flavors
    seen = dict.fromkeys(_RISKY, 0)
    for _ in range(TABLE_FLAVORS):
        flavor, image = random_flavor(rng), random_image(rng)
        for name, risky in _RISKY.items():
            seen[name] += bool(risky(flavor, image))
        refusals = _table_refusals(flavor, image)
        assert refusals == [], (f"KubeVirt would refuse flavor {flavor['extra_specs']} "
                                f"with image {image['properties']}: {refusals}")
    assert all(seen.values()), f"the generator no longer produces some risky inputs: {seen}"


@SETTINGS
@given(flavor=flavors(), image=images())
def test_hypothesis_flavors_and_images_break_no_row_of_the_admission_table(flavor: dict[str, Any],
                                                                          image: dict[str, Any]) -> None:
    assert _table_refusals(flavor, image) == []


@SETTINGS
@given(flavor=flavors())
def test_every_generated_object_is_strict_valid_and_admissible(flavor: dict[str, Any], strict_errors: Any) -> None:
    result = flavor_to_kubevirt(flavor, PROPERTY_OPTIONS)
    for doc in [*result.documents(), result.vm]:
        errors = strict_errors(doc)
        assert errors == [], f"{doc['kind']} of {flavor['id']!r} fails the strict schema: {errors}"
    for instancetype, preference in zip(result.instancetypes, result.preferences, strict=True):
        conflicts = instancetype_conflicts(result.vm, instancetype["spec"])
        assert conflicts == [], f"VM sets fields KubeVirt refuses beside the instancetype: {conflicts}"
        refusals = cluster_refusals(instancetype["spec"], preference["spec"])
        assert refusals == [], f"KubeVirt would refuse {flavor['extra_specs']}: {refusals}"


@SETTINGS
@given(flavor=flavors())
def test_no_extra_spec_vanishes_from_the_report(flavor: dict[str, Any]) -> None:
    result = flavor_to_kubevirt(flavor, PROPERTY_OPTIONS)
    reported = [e.key for e in result.report if e.key in flavor["extra_specs"]]
    assert sorted(reported) == sorted(flavor["extra_specs"]), f"report lists {reported}"
    assert all(isinstance(e.fidelity, Fidelity) for e in result.report)


@SETTINGS
@given(flavor=flavors())
def test_objects_give_back_the_flavor_exactly(flavor: dict[str, Any]) -> None:
    result = flavor_to_kubevirt(flavor, PROPERTY_OPTIONS)
    # What the cluster stores: YAML through kubectl, JSON back from the API server.
    stored = [json.loads(json.dumps(yaml.safe_load(yaml.safe_dump(doc)))) for doc in result.instancetypes]
    if _annotation_left_out(result):  # over Kubernetes' annotation limit: only the catalogue has it all
        with pytest.raises(IncompleteObjects):
            objects_to_flavor(stored)
        return
    back = objects_to_flavor(stored)
    expected = parse_flavor(flavor).as_api_dict()
    assert back == expected, f"round trip differs: {back} != {expected}"
