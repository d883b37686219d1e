"""scripts/serve writes devstack's flavors into a new database of its embedded defaults, and only there.

scripts/_database.py (what scripts/serve runs before anything starts) is run in this process, from a
directory standing for the checkout (the embedded defaults' database is ./var/openkeel.sqlite).
"""

from __future__ import annotations

import importlib.util

import pytest
from sqlalchemy import text

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.db import api as db_api
from tests.conftest import make_conf
from tests.scripts.checkout import ROOT

DEFAULTS = str(ROOT / "etc/openkeel-compute-serve.conf")
# devstack's lib/nova create_flavors (id, name, RAM MiB, vCPUs, disk GiB), each with hw_rng:allowed=True
DEVSTACK = [("1", "m1.tiny", 512, 1, 1), ("2", "m1.small", 2048, 1, 20), ("3", "m1.medium", 4096, 2, 40),
            ("4", "m1.large", 8192, 4, 80), ("5", "m1.xlarge", 16384, 8, 160)]


@pytest.fixture
def database():
    spec = importlib.util.spec_from_file_location("serve_database", ROOT / "scripts/_database.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _flavors(path) -> list[tuple]:
    engine = db_api.get_engine(make_conf(path.parent, database={"connection": f"sqlite:///{path}"}))
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT f.flavorid, f.name, f.memory_mb, f.vcpus, f.root_gb, f.ephemeral_gb, f.swap, f.is_public, "
                "s.key, s.value FROM flavors f LEFT JOIN flavor_extra_specs s ON s.flavor_id = f.id "
                "ORDER BY f.flavorid")).all()
            outbox = conn.execute(text("SELECT DISTINCT object_id FROM outbox WHERE kind = 'flavor'")).all()
    finally:
        db_api.dispose_all()
    assert {r[0] for r in outbox} >= {r[0] for r in rows}  # the controller is told of each
    return [tuple(r) for r in rows]


def _destroy(path, *ids: str) -> None:
    engine = db_api.get_engine(make_conf(path.parent, database={"connection": f"sqlite:///{path}"}))
    try:
        for flavorid in ids:
            with db_api.transaction(engine) as conn:
                catalog.destroy(conn, flavorid)
    finally:
        db_api.dispose_all()


SEEDED = [(i, n, ram, cpu, disk, 0, 0, 1, "hw_rng:allowed", "True") for i, n, ram, cpu, disk in DEVSTACK]


def test_a_new_database_of_the_embedded_defaults_gets_devstacks_flavors(database, checkout, capsys):
    assert database.run(["--config-file", DEFAULTS]) == 0
    assert _flavors(checkout / "var/openkeel.sqlite") == SEEDED
    assert "flavors m1.tiny, m1.small, m1.medium, m1.large, m1.xlarge written" in capsys.readouterr().err
    assert not (checkout / "var/serve-flavors.pending").exists()


def test_deleted_flavors_never_come_back(database, checkout, capsys):
    assert database.run(["--config-file", DEFAULTS]) == 0
    _destroy(checkout / "var/openkeel.sqlite", "1", "3")
    assert database.run(["--config-file", DEFAULTS]) == 0
    assert _flavors(checkout / "var/openkeel.sqlite") == [SEEDED[1], *SEEDED[3:]]
    assert capsys.readouterr().err.count("written") == 1


def test_a_configuration_that_keeps_the_default_database_gets_them(database, checkout):
    (checkout / "mine.conf").write_text("[wsgi]\nport = 9000\n[DEFAULT]\nstate_path = ./var/\n")
    assert database.run(["--config-file", DEFAULTS, "--config-file", str(checkout / "mine.conf")]) == 0
    assert _flavors(checkout / "var/openkeel.sqlite") == SEEDED


@pytest.mark.parametrize("elsewhere", ["[DEFAULT]\nstate_path = {tmp}/state\n",
                                       "[database]\nconnection = sqlite:///{tmp}/mine.sqlite\n"])
def test_a_database_elsewhere_gets_none(database, checkout, elsewhere, capsys):
    (checkout / "mine.conf").write_text(elsewhere.format(tmp=checkout))
    assert database.run(["--config-file", DEFAULTS, "--config-file", str(checkout / "mine.conf")]) == 0
    path = checkout / ("state/openkeel.sqlite" if "state_path" in elsewhere else "mine.sqlite")
    assert _flavors(path) == []
    assert "a new database, not the embedded defaults' own: no flavors written" in capsys.readouterr().err
    assert not (checkout / "var").exists()


def test_a_seeding_interrupted_part_way_is_finished_at_the_next_start(database, checkout, monkeypatch):
    real = catalog.set_extra_specs
    calls = []

    def stopped_at_the_third(conn, flavor, specs):
        calls.append(flavor["flavorid"])
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the third is written: its transaction rolls back
        real(conn, flavor, specs)

    monkeypatch.setattr(catalog, "set_extra_specs", stopped_at_the_third)
    assert database.run(["--config-file", DEFAULTS]) == 130
    assert [f[0] for f in _flavors(checkout / "var/openkeel.sqlite")] == ["1", "2"]
    monkeypatch.setattr(catalog, "set_extra_specs", real)
    assert database.run(["--config-file", DEFAULTS]) == 0
    assert _flavors(checkout / "var/openkeel.sqlite") == SEEDED
