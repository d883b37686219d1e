"""scripts/test runs the tests on two workers with ``--dist loadgroup``: the tests of one ``xdist_group`` (a real
Neutron's, a real Cinder's, and those of a module sharing a module-scoped fixture: tests/conftest.py) must
run on one worker, or each worker starts the group's services again and two bring-ups race for one
virtualenv. pytest 9.2 ids its nodes in a way pytest-xdist 3.8's grouping does not change, and the groups
were silently ignored: this runs two workers on a group and checks that one ran it all."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import _one_worker_per_module_fixture

GROUPED = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("n", range(8))
def test_where(n, tmp_path_factory):
    with open(os.environ["WHERE"], "a") as out:
        out.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
'''


def test_one_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    where = tmp_path / "where.txt"
    got = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--dist",
                          "loadgroup", "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_grouped.py")],
                         env={**os.environ, "WHERE": str(where)}, capture_output=True, text=True, timeout=120,
                         check=False)
    assert got.returncode == 0, got.stdout + got.stderr
    workers = where.read_text().split()
    assert len(workers) == 8 and len(set(workers)) == 1, workers


def test_a_module_fixture_puts_its_module_in_one_group(request):
    class Def:
        def __init__(self, scope):
            self.scope = scope

    class Item:
        def __init__(self, scope, marked=None):
            self.module = request.module
            self._fixtureinfo = type("Info", (), {"name2fixturedefs": {"f": [Def(scope)]}})()
            self.marks = [marked] if marked else []

        def get_closest_marker(self, name):
            return next((m for m in self.marks if m.name == name), None)

        def add_marker(self, mark):
            self.marks.append(mark.mark)

    import pytest

    shared, own, apart = Item("module"), Item("function"), Item("module", pytest.mark.xdist_group("real").mark)
    _one_worker_per_module_fixture([shared, own, apart])
    assert [m.args for m in shared.marks] == [(request.module.__name__,)]
    assert own.marks == [] and [m.args for m in apart.marks] == [("real",)]
