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


@pytest.fixture
def servers_bench(monkeypatch):
    monkeypatch.setenv("OPENKEEL_BENCH_REEXEC", "1")
    loader = importlib.machinery.SourceFileLoader("bench_servers", str(ROOT / "bench/servers_compare.py"))
    spec = importlib.util.spec_from_loader("bench_servers", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _run(rps: float, cpu: float = 1.0) -> dict:
    return {"rps": rps, "p50_us": 1000, "p99_us": 2000, "cpu_ms_per_req": cpu, "errors": 0, "load": "1.00 1.00 1.00"}


def test_the_servers_report_computes_ratios_and_verdicts_and_names_no_path(servers_bench, monkeypatch):
    monkeypatch.setattr(servers_bench.sys, "argv", ["servers_compare.py", "--servers", "5",
                                                    "--markdown", "/tmp/x/section.md", "--json=/home/u/raw.json"])
    args = types.SimpleNamespace(server_core="1", client_core="0", servers=5, list_connections=1, list_duration=4,
                                 connections=4, duration=3, warmup=1, delay_scale=1.0, batch=5, boot=10,
                                 boot_batch=5, cluster_nodes=20)
    result = {
        "ops": {"detail": {"nova": _run(0.5), "openkeel": _run(12.0)},   # 24x: target 20x met
                "index": {"nova": _run(2.0), "openkeel": _run(30.0)},     # 15x: short of 20x
                "create": {"nova": _run(4.0), "openkeel": _run(39.0)}},   # 9.75x: short of 10x
        "seed": {"nova": {"seconds": 10.0, "rate": 0.5, "posts_s": 2.0, "load": "1"},
                 "openkeel": {"seconds": 5.0, "rate": 1.0, "posts_s": 0.1, "load": "1"}},
        "boot": {"active": 10, "errors": 0, "seconds": 61.0, "rate": 0.16, "posts_s": 0.2, "load": "1",
                 "cpu_s": {"api": 0.1, "controller": 2.0}},
    }
    report = servers_bench.render(result, args, ["detail", "index", "create"])
    lines = {line.split(" |")[0]: line for line in report.splitlines() if line.startswith("| ")}
    assert "**24.0x** | >= 20x PASS" in lines["| GET /servers/detail @2.96"]
    assert "**15.0x** | >= 20x **FAIL**" in lines["| GET /servers @2.96"]
    assert "**9.8x** | >= 10x **FAIL**" in lines["| POST /servers @2.96 (one server each)"]
    assert "build rate OpenKeel / Nova: 2.0x" in report
    assert "10 ACTIVE, 0 ERROR after 61.0 s" in report and "within 60 s: **FAIL**" in report
    assert "built-in cluster delay scale 1, 20 nodes." in report  # the cluster the boots ran on
    assert "/tmp/x" not in report and "/home/u" not in report
