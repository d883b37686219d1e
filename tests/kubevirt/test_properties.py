"""Properties over generated flavors: strict-valid objects, no admission conflict, lossless round trip."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings

from openkeel_compute.kubevirt.flavor import parse_flavor
from openkeel_compute.kubevirt.guard import cluster_refusals, instancetype_conflicts
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from openkeel_compute.kubevirt.reverse import objects_to_flavor
from openkeel_compute.kubevirt.rules import Fidelity
from tests.kubevirt.strategies import PROPERTY_OPTIONS, flavors

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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
    back = objects_to_flavor(stored)
    expected = parse_flavor(flavor).as_api_dict()
    assert back == expected, f"round trip differs: {back} != {expected}"
