"""How the session's real Neutron (tests/network/shared_neutron.py) decides between using one, starting
one, skipping and failing: absent recipes skip even under OPENKEEL_REQUIRE_SHARED=1; recipes that cannot
start skip with the reason, and fail under OPENKEEL_REQUIRE_SHARED=1; a given services dir is used as is."""

from __future__ import annotations

import pytest

from tests.network import shared_neutron


def _first(monkeypatch, tmp_path, *, required: bool, scripts: bool, why: str | None):
    monkeypatch.delenv("OPENKEEL_TEST_NEUTRON_DIR", raising=False)
    monkeypatch.setenv("OPENKEEL_REQUIRE_SHARED", "1" if required else "0")
    if scripts:
        for name in ("keystone-up.sh", "neutron-up.sh"):
            (tmp_path / name).write_text("#!/bin/sh\nexit 1\n")
            (tmp_path / name).chmod(0o755)
    monkeypatch.setattr(shared_neutron, "RECIPES", tmp_path)
    monkeypatch.setattr(shared_neutron, "missing_prerequisite", lambda: why)
    return next(shared_neutron.session_neutron())


def test_absent_recipes_skip_even_when_shared_is_required(monkeypatch, tmp_path):
    with pytest.raises(pytest.skip.Exception, match="no real Neutron: .* has no keystone-up.sh and neutron-up.sh"):
        _first(monkeypatch, tmp_path, required=True, scripts=False, why=None)


def test_missing_prerequisite_skips_or_fails(monkeypatch, tmp_path):
    with pytest.raises(pytest.skip.Exception, match="cannot start here: RabbitMQ"):
        _first(monkeypatch, tmp_path, required=False, scripts=True, why="RabbitMQ (rabbitmqctl) is not installed")
    with pytest.raises(pytest.fail.Exception, match="OPENKEEL_REQUIRE_SHARED=1"):
        _first(monkeypatch, tmp_path, required=True, scripts=True, why="RabbitMQ (rabbitmqctl) is not installed")


def test_a_failing_start_skips_with_the_log_or_fails(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENKEEL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(pytest.skip.Exception, match="did not start"):
        _first(monkeypatch, tmp_path, required=False, scripts=True, why=None)
    with pytest.raises(pytest.fail.Exception, match="did not start"):
        _first(monkeypatch, tmp_path, required=True, scripts=True, why=None)


def test_a_given_services_dir_is_used_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENKEEL_TEST_NEUTRON_DIR", str(tmp_path))
    assert next(shared_neutron.session_neutron()) == tmp_path
