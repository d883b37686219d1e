"""Without ../shared beside the checkout every module still collects, and what needs it skips (or fails in CI)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests._shared import ROOT


def _pytest(tmp_path, *args: str, require: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPENKEEL_SHARED=str(tmp_path / "no-shared-here"))
    env.pop("OPENKEEL_REQUIRE_SHARED", None)
    if require:
        env["OPENKEEL_REQUIRE_SHARED"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_every_module_collects_without_shared(tmp_path) -> None:
    # A pytest.skip() or a read of ../shared at import time would show as a collection error.
    done = _pytest(tmp_path, "--collect-only", "tests")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "error" not in done.stdout.splitlines()[-1].lower(), done.stdout[-3000:]


def test_cases_parametrized_from_shared_skip_with_the_reason(tmp_path) -> None:
    done = _pytest(tmp_path, "-rs", "tests/kubevirt/test_reverse_import.py")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "is absent: ../shared is not beside this checkout" in done.stdout
    assert " passed" in done.stdout  # the cases that need nothing from ../shared still run


def test_they_fail_when_shared_is_required(tmp_path) -> None:
    done = _pytest(tmp_path, "tests/kubevirt/test_reverse_import.py", require=True)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "and OPENKEEL_REQUIRE_SHARED=1" in done.stdout
    assert "needs-shared" in done.stdout
