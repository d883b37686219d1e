"""The registry's size and shape, pinned: a change here means Nova parity moved and must be justified."""

from __future__ import annotations

from collections import Counter

import os_resource_classes
import os_traits

from openkeel_compute.extra_specs import NAMESPACES, VALIDATORS, find_validator

EXPECTED_PER_NAMESPACE = {
    "accel": 1,
    "aggregate_instance_extra_specs": 1,
    "capabilities": 45,  # Nova registers 46: 'capabilities:vcpus_used' twice
    "hw": 37,
    "hw_rng": 3,
    "hw_video": 1,
    None: 2,  # hide_hypervisor_id, group_policy
    "os": 1,
    "pci_passthrough": 1,
    "quota": 31,
    "resources": 22,
    "trait": 378,
    "vmware": 2,
}


def test_registry_has_nova_34s_525_unique_names() -> None:
    assert len(VALIDATORS) == 525
    assert all(name == validator.name for name, validator in VALIDATORS.items())


def test_twelve_namespaces_are_policed() -> None:
    assert NAMESPACES == (
        "accel",
        "aggregate_instance_extra_specs",
        "capabilities",
        "hw",
        "hw_rng",
        "hw_video",
        "os",
        "pci_passthrough",
        "quota",
        "resources(?P<group>([a-zA-Z0-9_-]{1,64})?)",
        "trait(?P<group>([a-zA-Z0-9_-]{1,64})?)",
        "vmware",
    )


def test_value_types_split_452_str_62_int_11_bool() -> None:
    assert Counter(v.value_type for v in VALIDATORS.values()) == {"str": 452, "int": 62, "bool": 11}


def test_each_namespace_has_novas_number_of_validators() -> None:
    assert dict(Counter(v.namespace for v in VALIDATORS.values())) == EXPECTED_PER_NAMESPACE


def test_only_the_bare_hide_hypervisor_id_is_deprecated() -> None:
    assert [name for name, v in VALIDATORS.items() if v.deprecated] == ["hide_hypervisor_id"]


def test_traits_and_resource_classes_follow_the_pinned_packages() -> None:
    trait_names = {n for n, v in VALIDATORS.items() if v.namespace == "trait"}
    resource_names = {n for n, v in VALIDATORS.items() if v.namespace == "resources"}
    assert trait_names == {f"trait{{group}}:{t}" for t in os_traits.get_traits()} | {
        "trait{group}:CUSTOM_{trait}"
    }
    assert resource_names == {f"resources{{group}}:{rc}" for rc in os_resource_classes.STANDARDS} | {
        "resources{group}:CUSTOM_{resource}"
    }
    # the pins behind the 525: os-traits 3.9.0 has 377 traits, os-resource-classes 1.1.0 has 21 classes
    assert (len(os_traits.get_traits()), len(os_resource_classes.STANDARDS)) == (377, 21)


def test_parametrised_names_are_414() -> None:
    assert sum(1 for v in VALIDATORS.values() if v.parameters) == 414


def test_every_value_constraint_is_used_only_where_nova_uses_it() -> None:
    for name, validator in VALIDATORS.items():
        if validator.value_type != "str":
            assert validator.pattern is None and validator.enum is None, name
        if validator.value_type != "int":
            assert validator.minimum is None and validator.maximum is None, name


def test_every_example_key_is_governed_by_its_own_validator() -> None:
    strays = {name: v.example_key for name, v in VALIDATORS.items() if find_validator(v.example_key) is not v}
    assert strays == {}
