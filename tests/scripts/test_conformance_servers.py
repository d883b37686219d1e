"""The servers phase of scripts/conformance: its list of exclusions and its Tempest shim."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from tests._shared import shared_path
from tests.scripts.checkout import ROOT

EXCLUSIONS = ROOT / "tests/conformance/tempest-compute-exclusions.txt"
SHIM = ROOT / "tests/conformance/tempest_shim"
REASONS = ("KubeVirt limit: ",)   # the only reason left: resize now runs


def _exclusions():
    for line in EXCLUSIONS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            uuid, test, reason = (part.strip() for part in line.split("|", 2))
            yield uuid, test, reason


def test_every_exclusion_names_a_core_test_and_an_allowed_reason():
    core = [line.strip() for line in shared_path("reference/tempest/tempest-compute-core.txt").read_text().splitlines()
            if line.strip()]
    seen = set()
    for uuid, test, reason in _exclusions():
        assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", uuid), uuid
        assert uuid not in seen, f"{uuid} twice"
        seen.add(uuid)
        [full] = [t for t in core if f"id-{uuid}" in t]
        assert full.startswith(f"tempest.api.compute.{test}["), (test, full)
        assert reason.startswith(REASONS) and len(reason) > 20, reason
    assert len(seen) == 1


def _run_with_shim(tmp_path, env_shim="1"):
    pkg = tmp_path / "tempest/api/compute"
    pkg.mkdir(parents=True)
    for d in (tmp_path / "tempest", tmp_path / "tempest/api", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "base.py").write_text(textwrap.dedent("""
        class BaseV2ComputeTest:
            create_default_network = False
            @classmethod
            def skip_checks(cls):
                if cls.create_default_network:
                    raise RuntimeError("Neutron is not available")
    """))
    program = textwrap.dedent("""
        from tempest.api.compute import base
        class Flagged(base.BaseV2ComputeTest):
            create_default_network = True
        class Plain(base.BaseV2ComputeTest):
            pass
        for cls in (Flagged, Plain):
            try:
                cls.skip_checks()
                print(cls.__name__, "runs", cls.create_default_network, "create_default_network" in cls.__dict__)
            except RuntimeError as exc:
                print(cls.__name__, "skipped:", exc)
    """)
    env = {"PYTHONPATH": f"{SHIM}:{tmp_path}", "OPENKEEL_TEMPEST_NETWORK_SHIM": env_shim, "PATH": "/usr/bin:/bin"}
    got = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert got.returncode == 0, got.stderr
    return got.stdout.splitlines()


def test_the_shim_lets_classes_that_ask_for_a_network_run_and_changes_nothing_else(tmp_path):
    # the flag is ignored by the check only: afterwards each class has exactly the attribute it had
    assert _run_with_shim(tmp_path) == ["Flagged runs True True", "Plain runs False False"]


def test_without_the_shim_tempest_skips_them(tmp_path):
    assert _run_with_shim(tmp_path, env_shim="0") == ["Flagged skipped: Neutron is not available",
                                                      "Plain runs False False"]


def test_the_servers_phase_gates_unless_told_not_to():
    """Every test of the servers phase passes, so the phase gates by default; 0 only reports it."""
    script = (ROOT / "scripts/conformance").read_text()
    [gate] = re.findall(r"\$\{OPENKEEL_CONFORMANCE_SERVERS_GATE:-(\d)\}", script)
    assert gate == "1"
    assert "OPENKEEL_CONFORMANCE_SERVERS_GATE  1 (default)" in script  # the help says so
