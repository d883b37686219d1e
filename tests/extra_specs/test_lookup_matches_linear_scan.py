"""The indexed lookup must pick exactly what Nova's linear scan over the registry picks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openkeel_compute.extra_specs import VALIDATORS, Validator, find_validator
from openkeel_compute.extra_specs.lookup import ValidatorIndex
from openkeel_compute.extra_specs.model import Parameter


def linear_scan(key: str) -> Validator | None:
    """Nova's algorithm, literally: exact name, else the first regex that fullmatches."""
    if key in VALIDATORS:
        return VALIDATORS[key]
    return next((v for v in VALIDATORS.values() if v.compiled_name.fullmatch(key)), None)


TRICKY_KEYS = [
    "hw:numa_cpus_1", "hw:numa_cpusX12", "hw:numa_mem:0", "hw:numa_cpus.", "capabilities:cpu_info",
    "capabilities:cpu_info:a:b", "capabilities:cpu_info.x", "capabilities:vcpus_used", "trait:CUSTOM_",
    "trait:CUSTOM_X", "trait-_9:HW_CPU_X86_AVX2", "trait" + "a" * 65 + ":HW_CPU_X86_AVX2", "resources:VCPU",
    "resources_1:CUSTOM_GPU", "resources.1:VCPU", "aggregate_instance_extra_specs:a:b",
    "aggregate_instance_extra_specs:", "hide_hypervisor_id", "group_policy", "group_policy:x", ":", "", "hw",
    "hw:cpu_policy\n", "HW:cpu_policy",
]


@pytest.mark.parametrize("key", TRICKY_KEYS)
def test_tricky_keys_resolve_like_the_linear_scan(key: str) -> None:
    assert find_validator(key) is linear_scan(key)


def test_every_example_key_resolves_like_the_linear_scan() -> None:
    differing = [v.example_key for v in VALIDATORS.values() if find_validator(v.example_key) is not linear_scan(v.example_key)]
    assert differing == []


namespace_like = st.sampled_from(["hw", "trait", "trait1", "resources", "resources_x", "capabilities",
                                  "aggregate_instance_extra_specs", "quota", "hw_rng", "openkeel", ""])
tail_like = st.one_of(
    st.sampled_from([v.name.split(":", 1)[1] for v in VALIDATORS.values() if ":" in v.name]),
    st.from_regex(r"[A-Za-z0-9_.:{}-]{0,30}", fullmatch=True),
)


@settings(max_examples=300, deadline=None)
@given(namespace=namespace_like, tail=tail_like, separator=st.sampled_from([":", "", "::"]))
def test_generated_keys_resolve_like_the_linear_scan(namespace: str, tail: str, separator: str) -> None:
    key = namespace + separator + tail
    assert find_validator(key) is linear_scan(key)


def test_earlier_regex_beats_later_plain_name_in_the_same_namespace() -> None:
    catch_all = Validator("ns:{any}", "ns", "catch-all", "str", parameters=(Parameter("any", ".+"),))
    plain = Validator("ns:exact", "ns", "plain", "str")
    assert ValidatorIndex([catch_all, plain]).first_match("ns:exact") is catch_all
    assert ValidatorIndex([plain, catch_all]).first_match("ns:exact") is plain


def test_index_refuses_a_namespace_regex_that_could_swallow_the_colon() -> None:
    with pytest.raises(ValueError, match="might match ':'"):
        ValidatorIndex([Validator("{ns}:x", None, "bad", "str", parameters=(Parameter("ns", ".+"),))])
