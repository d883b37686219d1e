"""bench/compare's report names no path of the machine it ran on (bench/RESULTS.md is published)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import types

import pytest

from tests._shared import ROOT


@pytest.fixture
def compare(monkeypatch):
    monkeypatch.setenv("OPENKEEL_BENCH_REEXEC", "1")  # import it here, never re-exec it
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    loader = importlib.machinery.SourceFileLoader("bench_compare", str(ROOT / "bench/compare"))
    spec = importlib.util.spec_from_loader("bench_compare", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_command_line_shown_drops_output_files(compare):
    argv = ["--db", "sqlite", "--markdown", "/tmp/x/section.md", "--json=/home/u/raw.json", "--duration", "5"]
    assert compare._without_output_files(argv) == ["--db", "sqlite", "--duration", "5"]


def test_the_convergence_line_names_the_script_relative_to_the_checkout(compare, monkeypatch, tmp_path):
    ran = {}

    def fake_run(argv, **kwargs):
        ran["argv"] = argv
        return subprocess.CompletedProcess(argv, 0, stdout="convergence: 1.0s for 20 objects\n", stderr="")

    monkeypatch.setattr(compare.subprocess, "run", fake_run)
    args = types.SimpleNamespace(skip_convergence=False, convergence_args="--flavors 10 --projects 1",
                                 convergence_timeout=5)
    line = compare.convergence(args, tmp_path)
    assert str(ROOT) in ran["argv"][1]  # it does run the checkout's script
    assert line == "`bench/controller_convergence.py --flavors 10 --projects 1` exit 0: convergence: 1.0s for 20 objects"
    assert str(ROOT) not in line and "/bin/python" not in line
