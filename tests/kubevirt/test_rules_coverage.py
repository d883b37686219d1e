"""Every Nova extra-spec validator matches exactly one mapping rule; the fidelity counts are pinned."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from openkeel_compute.kubevirt.rules import (
    BASE_FIELD_RULES,
    EXTRA_SPEC_RULES,
    Fidelity,
    fidelity_counts,
    rule_for_extra_spec,
    rules_matching,
)

# Seed 000 §3 counts 8 / 458 / 9 / 10 / 18 / 22. Two validators move where KubeVirt v1.9 refuses the
# plain translation: quota:cpu_quota goes from approximate to none (resources.limits.cpu beside an
# instancetype), hw:cpu_realtime from exact to partial (realtime needs the NUMA passthrough, which
# needs huge pages).
EXPECTED_COUNTS = {
    Fidelity.EXACT: 7, Fidelity.PARTIAL: 459, Fidelity.APPROXIMATE: 8,
    Fidelity.NODE_LEVEL: 10, Fidelity.NONE: 19, Fidelity.NA: 22,
}
# Sample values for the parameters of parametrised validator names.
_SAMPLES = {"group": ["", "1", "_net-a"], "num": ["0", "7"], "key": ["ssd", "a:b"], "trait": ["FOO_1"],
            "resource": ["FPGA_X"], "filter": ["", ":features", ":a:b"]}


def _validators() -> list[tuple[str, str]]:
    """(name, name_regex) of every validator in the project's registry (collected at import).

    The registry is checked against Nova's extracted facts in tests/extra_specs; reading those
    facts here, at collection time, would break the module when ../shared is absent.
    """
    from openkeel_compute.extra_specs import VALIDATORS

    return [(v.name, v.name_regex) for v in VALIDATORS.values()]


def _example_keys(name: str) -> Iterator[str]:
    """Concrete keys for a validator name, one per sample of each parameter."""
    params = re.findall(r"\{(\w+)\}", name)
    if not params:
        yield name
        return
    for index in range(3):
        key = name
        for param in params:
            samples = _SAMPLES[param]
            key = key.replace("{" + param + "}", samples[index % len(samples)])
        yield key


VALIDATORS = _validators()


def test_the_registry_has_nova_525_validators() -> None:
    assert len(VALIDATORS) == 525, f"expected Nova 34.0.0's 525 validators, found {len(VALIDATORS)}"


@pytest.mark.parametrize(("name", "name_regex"), VALIDATORS, ids=[n for n, _ in VALIDATORS])
def test_each_nova_validator_matches_exactly_one_rule(name: str, name_regex: str) -> None:
    for key in _example_keys(name):
        assert re.fullmatch(name_regex, key), f"sample key {key!r} is not a key of validator {name}"
        matching = rules_matching(key)
        assert len(matching) == 1, f"{key!r} (validator {name}) matches {[r.key for r in matching]}"
        assert rule_for_extra_spec(key) is matching[0], f"lookup of {key!r} disagrees with the table"


def test_fidelity_counts_over_the_validators_are_seed_000_but_cpu_quota_and_realtime() -> None:
    counts = fidelity_counts(next(_example_keys(name)) for name, _ in VALIDATORS)
    assert dict(counts) == EXPECTED_COUNTS, f"fidelity counts changed: {dict(counts)}"


def test_every_rule_is_reached_by_some_validator() -> None:
    reached = {rule_for_extra_spec(k).key for name, _ in VALIDATORS for k in _example_keys(name)}  # type: ignore[union-attr]
    unreached = [r.key for r in EXTRA_SPEC_RULES if r.key not in reached]
    assert unreached == [], f"rules no Nova validator reaches: {unreached}"


def test_every_rule_names_its_nova_source_target_and_a_fidelity() -> None:
    for rule in (*BASE_FIELD_RULES, *EXTRA_SPEC_RULES):
        assert rule.source.startswith("nova/"), f"{rule.key}: source {rule.source!r}"
        assert rule.target, f"{rule.key}: no target"
        assert isinstance(rule.fidelity, Fidelity), f"{rule.key}: fidelity {rule.fidelity!r}"


def test_seed_000_base_fields_are_all_rows() -> None:
    keys = {r.key for r in BASE_FIELD_RULES}
    assert keys == {"id", "name", "description", "vcpus", "ram", "disk", "OS-FLV-EXT-DATA:ephemeral", "swap",
                    "os-flavor-access:is_public", "access", "OS-FLV-DISABLED:disabled", "rxtx_factor",
                    "vcpu_weight", "extra_specs"}, keys


def test_unknown_keys_have_no_rule() -> None:
    assert rule_for_extra_spec("my-own-key") is None
    assert rule_for_extra_spec("hw:not_a_spec") is None


def test_describe_lookup_returns_target_fidelity_and_note() -> None:
    rule = rule_for_extra_spec("hw:cpu_policy")
    assert rule is not None
    assert (rule.fidelity, "dedicatedCPUPlacement" in rule.target, "mixed" in rule.note) == (
        Fidelity.PARTIAL, True, True)
