"""FlavorPayload 1.4 pinned field by field against what Nova 34.0.0 emits.

The expected dicts are Nova's documented notification samples
(doc/notification_samples/flavor-{create,update,delete}.json) for the same flavor.
"""

from __future__ import annotations

import copy

import pytest

from openkeel_compute.notifications import FlavorAction, build_flavor_payload
from tests.notifications.conftest import SAMPLE_FLAVOR, SAMPLE_FLAVOR_AFTER_UPDATES
from tests.notifications.flavor_payloads import (
    EXPECTED_CREATE_PAYLOAD,
    EXPECTED_DELETE_PAYLOAD,
    EXPECTED_UPDATE_PAYLOAD,
    assert_same_payload,
)


def test_create_payload_matches_nova_sample() -> None:
    assert_same_payload(build_flavor_payload(SAMPLE_FLAVOR, FlavorAction.CREATE), EXPECTED_CREATE_PAYLOAD)


def test_update_payload_matches_nova_sample() -> None:
    payload = build_flavor_payload(SAMPLE_FLAVOR_AFTER_UPDATES, FlavorAction.UPDATE)
    assert_same_payload(payload, EXPECTED_UPDATE_PAYLOAD)


def test_delete_payload_matches_nova_sample() -> None:
    # The catalogue still knows the extra specs and projects; Nova sends them as null anyway.
    payload = build_flavor_payload(SAMPLE_FLAVOR_AFTER_UPDATES | {"is_public": True}, FlavorAction.DELETE)
    assert_same_payload(payload, EXPECTED_DELETE_PAYLOAD)


def test_create_sends_extra_specs_as_null_even_when_the_catalogue_has_some() -> None:
    flavor = SAMPLE_FLAVOR | {"extra_specs": {"hw:cpu_policy": "dedicated"}, "projects": ["p1"]}
    data = build_flavor_payload(flavor, FlavorAction.CREATE)["nova_object.data"]
    assert data["extra_specs"] is None
    assert data["projects"] == ["p1"]


def test_update_sends_empty_collections_as_empty_not_null() -> None:
    flavor = SAMPLE_FLAVOR | {"extra_specs": None, "projects": None}
    data = build_flavor_payload(flavor, FlavorAction.UPDATE)["nova_object.data"]
    assert data["extra_specs"] == {}
    assert data["projects"] == []


def test_payload_never_carries_a_changes_key() -> None:
    for action in FlavorAction:
        assert "nova_object.changes" not in build_flavor_payload(SAMPLE_FLAVOR, action)


def test_unset_sizes_and_vcpu_weight_are_sent_as_zero() -> None:
    flavor = {"flavorid": "f1", "name": "tiny", "memory_mb": 512, "vcpus": 1, "root_gb": 1}
    data = build_flavor_payload(flavor, FlavorAction.UPDATE)["nova_object.data"]
    assert data["ephemeral_gb"] == 0
    assert data["swap"] == 0
    assert data["vcpu_weight"] == 0
    assert data["rxtx_factor"] == 1.0
    assert data["disabled"] is False
    assert data["is_public"] is True
    assert data["description"] is None


@pytest.mark.parametrize(
    ("field", "given", "sent"),
    [
        ("rxtx_factor", 2, 2.0),
        ("rxtx_factor", None, None),
        ("flavorid", 42, "42"),
        ("vcpu_weight", 7, 7),
        ("description", "for batch jobs", "for batch jobs"),
    ],
)
def test_values_are_coerced_to_the_payload_field_types(field: str, given: object, sent: object) -> None:
    data = build_flavor_payload(SAMPLE_FLAVOR | {field: given}, FlavorAction.UPDATE)["nova_object.data"]
    assert data[field] == sent
    assert type(data[field]) is type(sent)


def test_extra_spec_values_are_sent_as_strings() -> None:
    flavor = SAMPLE_FLAVOR | {"extra_specs": {"hw:numa_nodes": 2}}
    data = build_flavor_payload(flavor, FlavorAction.UPDATE)["nova_object.data"]
    assert data["extra_specs"] == {"hw:numa_nodes": "2"}


def test_building_a_payload_does_not_alias_the_catalogue_dict() -> None:
    flavor = copy.deepcopy(SAMPLE_FLAVOR_AFTER_UPDATES)
    data = build_flavor_payload(flavor, FlavorAction.UPDATE)["nova_object.data"]
    data["extra_specs"]["new"] = "x"
    data["projects"].append("other")
    assert flavor == SAMPLE_FLAVOR_AFTER_UPDATES


def test_event_types_match_nova() -> None:
    assert [action.event_type for action in FlavorAction] == [
        "flavor.create",
        "flavor.update",
        "flavor.delete",
    ]
