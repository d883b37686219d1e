"""openkeel-compute flavor convert / explain / import-instancetypes, and extending the group."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from openkeel_compute.cmd import flavor as flavor_cmd
from openkeel_compute.cmd.main import build_parser, main
from openkeel_compute.kubevirt.flavor import parse_flavor
from openkeel_compute.kubevirt.vectors import VECTORS
from tests._shared import shared_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_convert_vectors_prints_kubectl_ready_documents(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "flavor", "convert", "--vectors")
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = [d["kind"] for d in docs]
    assert status == 0
    # 5 public vectors x (instancetype + preference) + 2 projects x 2 for the private one
    assert len(docs) == 14, kinds
    assert all(d["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "openkeel"} for d in docs)
    assert "# conf-4: os:secure_boot=required [none]" in out


def test_convert_reads_a_list_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "flavors.json"
    path.write_text(json.dumps([{"id": "1", "name": "a", "ram": 512, "vcpus": 1, "disk": 1},
                                {"id": "m1.big", "name": "b", "ram": 1024, "vcpus": 2, "disk": 0}]))
    status, out, _ = _run(capsys, "flavor", "convert", str(path))
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(out) if d]
    assert (status, names) == (0, ["1", "1", "fl-m1.big", "fl-m1.big"]), names


def test_convert_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    body = {"flavor": {"id": "7", "name": "x", "ram": 512, "vcpus": 1, "disk": 1}}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(body)))
    status, out, _ = _run(capsys, "flavor", "convert", "-", "--vm")
    kinds = [d["kind"] for d in yaml.safe_load_all(out) if d]
    assert (status, kinds) == (0, ["VirtualMachineClusterInstancetype", "VirtualMachineClusterPreference",
                                   "VirtualMachine"])


def test_invalid_flavor_exits_1_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"id": "x", "name": "y", "ram": 0, "vcpus": 1, "disk": 1}))
    status, out, err = _run(capsys, "flavor", "convert", str(path))
    assert (status, out, err.strip()) == (
        1, "", "error: flavor x: ram: Invalid input for field/attribute ram. Value: 0. 0 is less than the minimum of 1")


def test_explain_shows_what_kubevirt_will_not_honour(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "flavor", "explain", "--vectors")
    line = next(line for line in out.splitlines() if line.startswith("hw:sound_model"))
    assert status == 0 and "none" in line and "ich9 and ac97" in line, line


def test_import_instancetypes_prints_flavors_and_reports_losses(capsys: pytest.CaptureFixture[str]) -> None:
    bundle = shared_path("kubevirt/common-instancetypes/common-clusterinstancetypes-bundle.yaml")
    status, out, err = _run(capsys, "flavor", "import-instancetypes", str(bundle))
    flavors = json.loads(out)
    assert status == 0 and len(flavors) == 65
    u1 = next(f for f in flavors if f["id"] == "u1.medium")
    assert (u1["vcpus"], u1["ram"], u1["extra_specs"]) == (1, 4096, {})
    assert "# lost: o1.nano: spec.memory.overcommitPercent" in err


def test_import_of_openkeel_objects_is_the_exact_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    converted, out, _ = _run(capsys, "flavor", "convert", "--vectors")
    path = tmp_path / "objects.yaml"
    path.write_text(out)
    imported, out, _ = _run(capsys, "flavor", "import-instancetypes", str(path))
    assert (converted, imported) == (0, 0)
    expected = sorted((parse_flavor(v).as_api_dict() for v in VECTORS.values()), key=lambda f: f["id"])
    assert sorted(json.loads(out), key=lambda f: f["id"]) == expected


def test_another_room_can_add_a_flavor_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[Any] = []

    def setup(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("flavor_id")

    def run(args: argparse.Namespace) -> int:
        calls.append(args.flavor_id)
        return 0

    try:
        build_parser()  # the group exists already: the new sub-command is added to it at once
        flavor_cmd.add_flavor_subcommand("status-test", "test sub-command", setup, run)
        assert main(["flavor", "status-test", "42"]) == 0 and calls == ["42"]
    finally:
        flavor_cmd.FLAVOR_SUBCOMMANDS.pop("status-test", None)
