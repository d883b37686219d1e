"""Our registry against the facts extracted from Nova 34.0.0 (../shared/reference), so drift is caught.

The facts are read in place, never copied into the project.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from openkeel_compute.extra_specs import NAMESPACES, VALIDATORS, InvalidExtraSpec, validate
from openkeel_compute.extra_specs.model import FALSE_WORDS, TRUE_WORDS
from tests._shared import shared_path

FACTS_FILE = "reference/nova/extra-spec-validators.json"


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    with shared_path(FACTS_FILE).open(encoding="utf-8") as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


@pytest.fixture(scope="module")
def nova_validators(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    # Nova's registry is a dict filled in registration order: a repeated name keeps its first place.
    unique: dict[str, dict[str, Any]] = {}
    for entry in facts["validators"]:
        unique.setdefault(entry["name"], entry)
    return unique


def test_same_names_in_the_same_order(nova_validators: dict[str, dict[str, Any]]) -> None:
    ours, theirs = list(VALIDATORS), list(nova_validators)
    assert set(ours) - set(theirs) == set(), "names only we have"
    assert set(theirs) - set(ours) == set(), "names only Nova has"
    first_difference = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b), None)
    assert first_difference is None, f"order differs from position {first_difference}"


def test_unique_count_matches_the_facts(facts: dict[str, Any]) -> None:
    assert len(VALIDATORS) == facts["counts"]["unique_names (len(validators.VALIDATORS))"]


def test_each_validator_constrains_values_like_nova(nova_validators: dict[str, dict[str, Any]]) -> None:
    differences = []
    for name, fact in nova_validators.items():
        ours = VALIDATORS[name]
        value = fact["value"]
        expected = {
            "value_type": value["type"],
            "enum": value.get("enum"),
            "minimum": value.get("min"),
            "maximum": value.get("max"),
            "pattern": value.get("pattern"),
            "deprecated": fact["deprecated"],
            "parameters": [(p["name"], p["pattern"]) for p in fact["parameters"]],
            "name_regex": fact["name_regex"],
        }
        actual = {
            "value_type": ours.value_type,
            "enum": list(ours.enum) if ours.enum is not None else None,
            "minimum": ours.minimum,
            "maximum": ours.maximum,
            "pattern": ours.pattern,
            "deprecated": ours.deprecated,
            "parameters": [(p.name, p.pattern) for p in ours.parameters],
            "name_regex": ours.name_regex,
        }
        differences += [f"{name}.{field}: ours {actual[field]!r}, Nova {expected[field]!r}"
                        for field in expected if actual[field] != expected[field]]
    assert differences == []


def test_descriptions_are_our_own_words(nova_validators: dict[str, dict[str, Any]]) -> None:
    copied = [name for name, fact in nova_validators.items()
              if VALIDATORS[name].description.strip() == fact["description"].strip()]
    assert copied == []


def test_policed_namespaces_match(facts: dict[str, Any]) -> None:
    assert sorted(NAMESPACES) == sorted(facts["namespaces_checked"])


def test_boolean_words_match(facts: dict[str, Any]) -> None:
    assert TRUE_WORDS == set(facts["bool_values_strict"]["true"])
    assert FALSE_WORDS == set(facts["bool_values_strict"]["false"])


# One example per message kind, rendered through Nova's documented template.
MESSAGE_EXAMPLES = [
    ("pattern", "hw:pmem", "a,,b", {"value": "a,,b", "value_regex": "([a-zA-Z0-9_]+(,)?)+"}),
    ("enum", "os:secure_boot", "no", {"value": "no", "a, b": "disabled, required"}),
    ("int_parse", "hw:numa_nodes", "one", {"value": "one"}),
    ("max", "hw:redirected_usb_ports", "99", {"value": "99", "max": "15"}),
    ("min", "hw:numa_nodes", "-3", {"value": "-3", "min": "1"}),
    ("bool", "hw:pmu", "maybe", {"value": "maybe"}),
    ("unknown_in_known_namespace", "quota:nope", "1", {"name": "quota:nope"}),
]


@pytest.mark.parametrize(("kind", "key", "value", "fields"), MESSAGE_EXAMPLES, ids=[e[0] for e in MESSAGE_EXAMPLES])
def test_message_follows_novas_template(
    facts: dict[str, Any], kind: str, key: str, value: str, fields: dict[str, str]
) -> None:
    expected = facts["error_messages"][kind]
    for placeholder, text in fields.items():
        expected = expected.replace("{" + placeholder + "}", text)
    with pytest.raises(InvalidExtraSpec) as refusal:
        validate(key, value)
    assert refusal.value.message == expected
