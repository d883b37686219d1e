"""``openkeel-compute extra-specs list|describe``."""

from __future__ import annotations

import argparse
import sys
import types

import pytest

from openkeel_compute.cmd import extra_specs as cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    parser = argparse.ArgumentParser(prog="openkeel-compute")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["extra-specs", *argv])
    status = args.func(args)
    return status, capsys.readouterr().out.splitlines()


@pytest.fixture
def without_kubevirt_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "KUBEVIRT_RULES_MODULE", "openkeel_compute.absent_for_this_test.rules")


def test_list_shows_every_validator(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = run(capsys, "list")
    assert status == 0
    assert lines[-1] == "525 extra spec(s)"
    assert len(lines) == 526


def test_list_filters_by_namespace_and_marks_deprecation(capsys: pytest.CaptureFixture[str]) -> None:
    _, lines = run(capsys, "list", "--namespace", "none")
    assert [line.split()[0] for line in lines[:-1]] == ["hide_hypervisor_id", "group_policy"]
    assert lines[0].endswith("[deprecated]")
    _, hw_lines = run(capsys, "list", "--namespace", "hw")
    assert hw_lines[-1] == "37 extra spec(s)"


def test_list_refuses_an_unknown_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "list", "--namespace", "powervm")


def test_describe_a_concrete_key_names_its_validator_and_values(
    capsys: pytest.CaptureFixture[str], without_kubevirt_rules: None
) -> None:
    status, lines = run(capsys, "describe", "hw:numa_mem.2")
    assert status == 0
    assert lines[0] == "hw:numa_mem.2"
    assert "  validator:   hw:numa_mem.{num}" in lines
    assert "  value:       integer >= 1" in lines
    assert "  deprecated:  no" in lines
    assert not any("kubevirt" in line for line in lines), "KubeVirt lines without a KubeVirt mapping"


def test_describe_with_a_value_reports_novas_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = run(capsys, "describe", "hw:cpu_policy", "--value", "pinned")
    assert status == 1
    assert lines[-1] == "  'pinned': refused: Validation failed; 'pinned' is not one of: dedicated, shared, mixed."


def test_describe_unknown_key_in_policed_namespace_fails(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = run(capsys, "describe", "hw:turbo")
    assert status == 1
    assert "refused with 400" in lines[0]


def test_describe_key_outside_novas_namespaces_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = run(capsys, "describe", "openkeel:anything")
    assert status == 0
    assert "accepted without validation" in lines[0]


def test_describe_shows_deprecation(capsys: pytest.CaptureFixture[str], without_kubevirt_rules: None) -> None:
    _, lines = run(capsys, "describe", "hide_hypervisor_id")
    assert "  deprecated:  yes" in lines


def test_describe_asks_the_kubevirt_mapping_when_it_exists(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def rule_for_extra_spec(key: str) -> object:
        asked.append(key)
        return types.SimpleNamespace(target="spec.cpu.sockets", fidelity="exact", note="one to one")

    fake = types.ModuleType("fake_kubevirt_rules")
    fake.rule_for_extra_spec = rule_for_extra_spec  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_kubevirt_rules", fake)
    monkeypatch.setattr(cli, "KUBEVIRT_RULES_MODULE", "fake_kubevirt_rules")
    _, lines = run(capsys, "describe", "trait{group}:CUSTOM_{trait}")
    # a validator name is looked up through a concrete example key
    assert asked == ["trait:CUSTOM_FAST_DISK"]
    assert "  kubevirt:    spec.cpu.sockets (fidelity: exact)" in lines
    assert "               one to one" in lines
