"""What the README and docs/conformance.md claim about the repository is so."""

from __future__ import annotations

import re
import shutil
import subprocess

from tests.scripts.checkout import ROOT, VENV, clean_env

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.:])\s+", " ".join(text.split()))


def test_the_readme_config_generator_command_reproduces_the_sample(tmp_path):
    [command] = re.findall(r"`(\.venv/bin/oslo-config-generator [^`]*)`", README)
    shutil.copytree(ROOT / "etc", tmp_path / "etc")
    (tmp_path / "etc/openkeel-compute.conf.sample").unlink()
    (tmp_path / ".venv").symlink_to(VENV)
    got = subprocess.run(["bash", "-c", command], check=False, cwd=tmp_path, env=clean_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "etc/openkeel-compute.conf.sample").read_text() == (
        ROOT / "etc/openkeel-compute.conf.sample").read_text()


def test_every_test_path_the_readme_cites_exists():
    cited = set(re.findall(r"`(tests/[\w/.]*)`", README))
    assert len(cited) >= 8, cited
    missing = sorted(p for p in cited if not (ROOT / p).exists())
    assert not missing, missing


def test_the_readme_claims_no_untested_client():
    assert "unchanged" not in README
    for client in ("novaclient", "Terraform", "Horizon"):
        for sentence in _sentences(README):
            if client in sentence:
                assert "not been tested" in sentence, sentence


def test_what_each_command_runs_is_what_the_readme_says():
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    [run_tests] = [line for line in ci if line.split()[0] == "scripts/test"][:1]
    assert run_tests in ("scripts/test", "scripts/test -n 2")  # every test; -n only runs them side by side
    assert ci.index(run_tests) < ci.index("scripts/conformance")
    assert "export OPENKEEL_REQUIRE_SHARED=1" in ci and "export OPENKEEL_REQUIRE_DATABASES=1" in ci
    [row] = [line for line in README.splitlines() if line.startswith("| `.ci/run`")]
    assert "then `scripts/test`" in row and "then `scripts/conformance`" in row
    assert "OPENKEEL_REQUIRE_SHARED=1" in row and "OPENKEEL_REQUIRE_DATABASES=1" in row
    test_script = (ROOT / "scripts/test").read_text()
    # every test, with the caller's arguments; --dist only says how xdist shares them out (by group)
    assert 'exec "$VENV/bin/python" -m pytest --dist loadgroup "$@"' in test_script
    assert "runs everything" not in README
    conformance = " ".join((ROOT / "docs/conformance.md").read_text().split())
    assert "`.ci/run` runs it after `scripts/test`" in conformance
    assert "not wired into" not in conformance
