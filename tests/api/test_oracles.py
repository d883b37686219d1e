"""tests/api/oracles.py makes an oracle's virtualenv once, whichever test asks first: the last CI on a new
machine skipped 110 differential tests because the ones that looked first found no virtualenv, while a
later one made it. A script standing in for ../shared/nova-oracle's records how it is called."""

from __future__ import annotations

import stat
import threading

import pytest

import tests._shared as shared
from tests.api import oracles

FAKE = """#!/usr/bin/env bash
# start: make the virtualenv (slowly, as pip does) when absent; stop: nothing. Each call logged.
echo "$1 $NOVA_ORACLE_VENV" >> "$(dirname "$0")/calls.log"
if [ "$1" = start ]; then
    [ -n "${FAIL:-}" ] && { echo "pip: no network" >&2; exit 1; }
    if [ ! -x "$NOVA_ORACLE_VENV/bin/python" ]; then
        sleep 0.5; mkdir -p "$NOVA_ORACLE_VENV/bin"; ln -s /bin/true "$NOVA_ORACLE_VENV/bin/python"
    fi
fi
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A ../shared whose run-oracle.sh is the stand-in, and a virtualenv path that does not exist yet."""
    folder = tmp_path / "shared" / "nova-oracle"
    folder.mkdir(parents=True)
    script = folder / "run-oracle.sh"
    script.write_text(FAKE)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    venv = tmp_path / "cache" / "venv"
    monkeypatch.setattr(shared, "SHARED", tmp_path / "shared")
    monkeypatch.setitem(oracles._VENVS, "run-oracle.sh", (venv, "NOVA_ORACLE_VENV"))
    monkeypatch.delenv("FAIL", raising=False)
    return folder / "calls.log", venv


def test_the_virtualenv_is_made_once_while_the_other_workers_wait(fake):
    calls, venv = fake
    pythons: list[object] = []
    threads = [threading.Thread(target=lambda: pythons.append(oracles.oracle_python("run-oracle.sh")))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pythons == [venv / "bin" / "python"] * 3  # none went on before the virtualenv was there
    assert (venv / "bin" / "python").exists()
    lines = calls.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "stop"] and lines[0].endswith(str(venv))
    oracles.oracle_script("run-oracle.sh")  # made and marked: never started again for it
    assert len(calls.read_text().splitlines()) == 2


def test_a_virtualenv_that_cannot_be_made_skips_with_the_scripts_words(fake, monkeypatch):
    calls, venv = fake
    monkeypatch.setenv("FAIL", "1")
    monkeypatch.delenv("OPENKEEL_REQUIRE_SHARED", raising=False)
    with pytest.raises(pytest.skip.Exception, match="could not be made .*pip: no network"):
        oracles.oracle_script("run-oracle.sh")
    monkeypatch.setenv("OPENKEEL_REQUIRE_SHARED", "1")
    with pytest.raises(pytest.fail.Exception, match="pip: no network.* and OPENKEEL_REQUIRE_SHARED=1"):
        oracles.oracle_script("run-oracle.sh")
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["start", "stop"] * 2
    assert not (venv / oracles._READY).exists()  # the next test tries again
