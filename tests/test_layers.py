"""The map of docs/architecture.md, enforced: the import contracts (import-linter, pyproject.toml's
[tool.importlinter]) and the types (mypy, [tool.mypy]: strict on kubevirt/, extra_specs/ and model/).

Both run as the tools themselves, from this environment, with their caches inside it (a warm run takes
a few seconds; the first one in a fresh environment about fifteen). A failure prints the tool's report:
the broken contract and the import chain that breaks it, or mypy's errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CACHE = Path(sys.prefix) / ".layers-cache"  # inside the virtualenv: never in the checkout


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    executable = BIN / tool
    assert executable.exists(), f"{tool} is missing from {BIN}: install the test extra (scripts/test does)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([str(executable), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def test_every_room_imports_only_what_the_map_allows():
    result = _run("lint-imports", "--no-logo", "--cache-dir", str(CACHE / "import-linter"))
    assert result.returncode == 0, f"the map is broken (pyproject.toml [tool.importlinter]):\n{result.stdout}" \
                                   f"{result.stderr}"
    assert "broken" in result.stdout and " 0 broken" in result.stdout, result.stdout


def test_the_types_check():
    result = _run("mypy", "--cache-dir", str(CACHE / "mypy"))
    assert result.returncode == 0, f"mypy (pyproject.toml [tool.mypy]):\n{result.stdout}{result.stderr}"
