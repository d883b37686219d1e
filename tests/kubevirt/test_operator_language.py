"""What the mapping prints speaks the operator's language: no internal documents, file:line or jargon.

Covers the rule rows (``extra-specs describe``), every report note of ``flavor convert`` / ``explain``
for every validator's sample values, the lost notes of ``import-instancetypes``, the help texts of the
``flavor`` and ``extra-specs`` commands, the ``[kubevirt]`` option help and docs/kubevirt-mapping.md.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from openkeel_compute.cmd.main import build_parser
from openkeel_compute.conf.kubevirt import list_opts
from openkeel_compute.extra_specs import VALIDATORS
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from openkeel_compute.kubevirt.reverse import import_instancetype
from openkeel_compute.kubevirt.rules import BASE_FIELD_RULES, EXTRA_SPEC_RULES, UNKNOWN_RULE
from openkeel_compute.kubevirt.vectors import VECTOR_OPTIONS, VECTORS
from tests._shared import shared_path
from tests.kubevirt.rule_samples import OPTIONS, sample_flavors

ROOT = Path(__file__).resolve().parents[2]
# Internal documents, source locations of other projects and words an operator never sees.
INTERNAL = re.compile(
    r"seed \d|\bseeds?\b|§|\.go\b|\.go:\d|\w\.md\b|\.py:\d|node agent|\brooms?\b|\.\./shared|"
    r"staging/src|instancetype-rules|vmi-create-admitter|\bkubevirt:(?=\S)"
    , re.IGNORECASE)


def _leaks(text: str) -> list[str]:
    return [m.group(0) for m in INTERNAL.finditer(text)]


def test_the_pattern_catches_what_the_review_found() -> None:
    for text in ("seed 000 §6", "instancetype-rules.md §B", "types.go:152", "the OpenKeel node agent",
                 "kubevirt:staging/src/kubevirt.io/api/core/v1/schema.go:1408-1431"):
        assert _leaks(text), text
    assert not _leaks("preference spec.cpu.preferredCPUTopology; nodes must carry the label")


def test_rule_rows_speak_the_operators_language() -> None:
    for rule in (*BASE_FIELD_RULES, *EXTRA_SPEC_RULES, UNKNOWN_RULE):
        for text in (rule.key, rule.values, rule.target, rule.note):
            assert not _leaks(text), f"{rule.key}: {text!r} cites {_leaks(text)}"


def test_report_notes_of_every_sample_flavor_speak_the_operators_language() -> None:
    seen = 0
    flavors = [(f, VECTOR_OPTIONS) for f in VECTORS.values()] + [(f, OPTIONS) for f in sample_flavors()]
    for flavor, options in flavors:
        for entry in flavor_to_kubevirt(flavor, options).report:
            seen += 1
            for text in (entry.target, entry.note):
                assert not _leaks(text), f"{entry.key}={entry.value}: {text!r} cites {_leaks(text)}"
    assert seen > len(VALIDATORS)


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_help_texts_speak_the_operators_language() -> None:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("flavor", "extra-specs"):
        for sub in _parsers(top.choices[name]):
            text = sub.format_help()
            assert not _leaks(text), f"{sub.prog}: {_leaks(text)}"


def test_kubevirt_option_help_speaks_the_operators_language() -> None:
    for _group, opts in list_opts():
        for opt in opts:
            assert not _leaks(opt.help or ""), f"{opt.name}: {_leaks(opt.help)}"


def test_the_mapping_page_speaks_the_operators_language() -> None:
    text = (ROOT / "docs" / "kubevirt-mapping.md").read_text(encoding="utf-8")
    leaks = [(n, line) for n, line in enumerate(text.splitlines(), 1) if _leaks(line)]
    assert not leaks, leaks


def test_import_notes_speak_the_operators_language() -> None:
    folder = shared_path("kubevirt/common-instancetypes")
    docs = [d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    instancetypes = [d for d in docs if d["kind"] == "VirtualMachineClusterInstancetype"]
    preferences = [d for d in docs if d["kind"] == "VirtualMachineClusterPreference"]
    for preference in preferences:
        result = import_instancetype(instancetypes[0], preference)
        for path, why in result.lost:
            assert not _leaks(f"{path}: {why}"), (path, why)
