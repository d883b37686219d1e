"""Every rule row's text (target, fidelity, the per-value outcomes of its note) matches what the mapping emits.

For each extra-spec rule, the flavors built from Nova's validators and their sample values are
converted with and without the key (in the context the key needs, e.g. dedicated CPUs for realtime);
the difference between the two is what the key emits. ``extra-specs describe`` prints these rows, so
a row that says one thing while ``flavor convert`` does another misleads the operator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from openkeel_compute.kubevirt.rules import EXTRA_SPEC_RULES, Fidelity, Rule, rule_for_extra_spec
from tests.kubevirt.rule_samples import OPTIONS, flavor_with, samples

Path = tuple[str, ...]
# Path components that say nothing about which field a rule targets.
_GENERIC = frozenset({"spec", "template", "domain", "devices", "metadata", "cpu", "memory", "features",
                      "firmware", "annotations"})
# An outcome that emits nothing: KubeVirt's default, or no target at all.
_NOTHING = re.compile(r"(none|no |nothing|default|KubeVirt's default)", re.IGNORECASE)
_CLAUSE = re.compile(r"^\s*([\w.<>=^-]+(?:\s*(?:,|/)\s*[\w.<>=^-]+)*)\s*->\s*(.+?)\s*$")


def _leaves(node: Any, prefix: Path) -> Iterator[tuple[Path, Any]]:
    """Leaf paths of JSON data; a list or an empty dict is one leaf."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*prefix, str(key)))
    else:
        yield prefix, node


def _objects(flavor: dict[str, Any]) -> tuple[dict[Path, Any], list[Any]]:
    result = flavor_to_kubevirt(flavor, OPTIONS)
    paths: dict[Path, Any] = {}
    for kind, obj in (("instancetype", result.instancetypes[0]["spec"]),
                      ("preference", result.preferences[0]["spec"]), ("VM", result.vm["spec"])):
        paths.update(_leaves(obj, (kind, "spec")))
    return paths, list(result.report)


def emitted(key: str, value: str) -> tuple[set[Path], list[Fidelity]]:
    """The leaf paths key=value adds or changes, and the fidelities reported for the key."""
    flavor = flavor_with(key, None)
    rule = rule_for_extra_spec(key)
    assert rule is not None
    # Partners the same handler reads with the key (hw:tpm_version for hw:tpm_model) leave the
    # baseline: the row's target is what the key produces together with them.
    flavor["extra_specs"] = {k: v for k, v in flavor["extra_specs"].items()
                             if (rule_for_extra_spec(k) or rule).handler != rule.handler or not rule.handler}
    base, _ = _objects(flavor)
    with_key, report = _objects(flavor_with(key, value))
    changed = {p for p, v in with_key.items() if base.get(p, object()) != v
               and not (v == {} and any(q[:len(p)] == p and q != p for q in base))}
    # A path that disappeared is a change too, unless an empty section merely gained fields.
    changed |= {p for p in base if p not in with_key and not any(q[:len(p)] == p for q in with_key)}
    return changed, [e.fidelity for e in report if e.key == key]


def _names(path: Path, text: str) -> bool:
    """The row's text names the object kind of the path and one of its specific fields."""
    kind, fields = path[0], [p for p in path[1:] if p not in _GENERIC and not p.isdigit()]
    if not re.search(rf"\b{kind}\b", text, re.IGNORECASE):
        return False
    return any(re.search(rf"(?<![\w]){re.escape(field)}(?![\w])", text) for field in fields)


def _outcomes(note: str) -> dict[str, str]:
    """'a, b -> outcome; c -> other' clauses of a note, per value."""
    found: dict[str, str] = {}
    for clause in note.split(";"):
        match = _CLAUSE.match(clause)
        if match:
            for value in re.split(r"\s*(?:,|/)\s*", match.group(1)):
                found[value] = match.group(2)
    return found


def _by_rule() -> dict[str, list[tuple[str, str]]]:
    grouped: dict[str, list[tuple[str, str]]] = {}
    for _validator, key, value in samples():
        rule = rule_for_extra_spec(key)
        assert rule is not None, key
        items = grouped.setdefault(rule.key, [])
        keys = {k for k, _ in items}
        # Families (traits, resource classes) hold hundreds of validators: three keys of each are plenty.
        if key in keys or len(keys) < 3:
            items.append((key, value))
    return grouped


SAMPLES = _by_rule()
RULES = {rule.key: rule for rule in EXTRA_SPEC_RULES}


def test_every_extra_spec_rule_has_samples() -> None:
    assert set(SAMPLES) == set(RULES)


@pytest.mark.parametrize("rule_key", sorted(RULES))
def test_rule_row_matches_what_the_mapping_emits(rule_key: str) -> None:
    rule: Rule = RULES[rule_key]
    text = f"{rule.target} {rule.note}"
    reported: set[Fidelity] = set()
    anything = False
    for key, value in SAMPLES[rule_key]:
        paths, fidelities = emitted(key, value)
        assert fidelities, f"{key}={value}: not reported"
        reported.update(fidelities)
        anything = anything or bool(paths)
        for path in paths:
            assert _names(path, text), f"{key}={value} emits {'.'.join(path)}, which the row does not name: {text!r}"
        outcome = _outcomes(rule.note).get(value)
        if rule.handler and outcome is not None:
            says_nothing = _NOTHING.match(outcome) is not None
            assert says_nothing == (not paths), (
                f"{key}={value}: the row says {value} -> {outcome!r}, the mapping emits "
                f"{sorted('.'.join(p) for p in paths) or 'nothing'}")
        if not rule.handler or rule.target.startswith("none"):
            assert not paths, f"{key}={value}: the row names no target, the mapping emits {paths}"
    if not rule.handler or rule.fidelity in (Fidelity.NONE, Fidelity.NA, Fidelity.NODE_LEVEL):
        assert reported == {rule.fidelity}, (rule.key, reported)
    elif rule.fidelity is Fidelity.EXACT:
        assert reported == {Fidelity.EXACT}, (rule.key, reported)
        assert anything or rule.target.startswith("none"), f"{rule.key}: exact, yet no value emits anything"
    elif rule.fidelity is Fidelity.APPROXIMATE:
        assert Fidelity.APPROXIMATE in reported, (rule.key, reported)
    else:  # partial: some value is honoured, and not every value exactly
        assert anything and reported - {Fidelity.EXACT}, (rule.key, reported)
        assert reported - {Fidelity.NONE}, (rule.key, reported)


def test_the_outcome_parser_reads_the_watchdog_row_the_review_quoted() -> None:
    assert _outcomes("poweroff, reset -> same; none -> i6300esb without action; pause -> none") == {
        "poweroff": "same", "reset": "same", "none": "i6300esb without action", "pause": "none"}
    assert _NOTHING.match("i6300esb without action") is None


# Base fields: a change of each one, and what it must change in the objects.
_BASE: dict[str, Any] = {"id": "b1", "name": "base", "vcpus": 2, "ram": 2048, "disk": 10}
_BASE_CHANGES: dict[str, dict[str, Any]] = {
    "id": {"id": "b2"},
    "name": {"name": "other"},
    "description": {"description": "some words"},
    "vcpus": {"vcpus": 3},
    "ram": {"ram": 4096},
    "disk": {"disk": 20},
    "OS-FLV-EXT-DATA:ephemeral": {"OS-FLV-EXT-DATA:ephemeral": 5},
    "swap": {"swap": 512},
    "OS-FLV-DISABLED:disabled": {"OS-FLV-DISABLED:disabled": True},
    "rxtx_factor": {"rxtx_factor": 2.0},
    "extra_specs": {"extra_specs": {"my-own-key": "x"}},
}


def _all_paths(flavor: dict[str, Any]) -> dict[Path, Any]:
    result = flavor_to_kubevirt(flavor)
    paths: dict[Path, Any] = {}
    for kind, obj in (("instancetype", result.instancetypes[0]), ("VM", result.vm)):
        paths.update(_leaves(obj, (kind,)))
    return paths


@pytest.mark.parametrize("field", sorted(_BASE_CHANGES))
def test_base_field_row_names_what_a_change_of_the_field_changes(field: str) -> None:
    from openkeel_compute.kubevirt.rules import BASE_FIELD_RULES

    rule = next(r for r in BASE_FIELD_RULES if r.key == field)
    text = f"{rule.target} {rule.note}"
    before, after = _all_paths(_BASE), _all_paths({**_BASE, **_BASE_CHANGES[field]})
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    # The VM fragment names its instancetype after the id; the id row names metadata.name for that.
    changed = {p for p in changed if not (field == "id" and p[-1] == "name" and "metadata" not in p[-2:])}
    assert changed, f"{field}: changing it changes nothing"
    for path in changed:
        fields = [p for p in path[1:] if p not in _GENERIC and not p.isdigit()]
        assert any(re.search(rf"(?<![\w]){re.escape(f)}(?![\w])", text) for f in fields), (
            f"{field}: the change of {'.'.join(path)} is not named by the row: {text!r}")
