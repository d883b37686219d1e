"""The moves, images and consoles phases of scripts/conformance (and its masakari phase): their lists of the
tests OpenKeel cannot pass yet, their gate and where they run (the tests that need Neutron: the network phase;
the console proxy: from the moves phase on)."""

from __future__ import annotations

import re

import pytest

from tests._shared import shared_path
from tests.scripts import conformance_lists
from tests.scripts.checkout import ROOT

AREAS = ("moves", "images", "consoles")


@pytest.mark.parametrize("area", AREAS)
def test_every_expected_failure_names_a_test_of_its_area_and_why(area):
    conformance_lists.checked(area)


def test_the_area_phases_gate_run_by_default_and_share_the_admin_phase_openkeel():
    script = (ROOT / "scripts/conformance").read_text()
    [phases] = re.findall(r'^PHASES="([^"]+)"', script, re.MULTILINE)
    assert {*AREAS, "masakari"} <= set(phases.split(","))
    assert 'gate_var=OPENKEEL_CONFORMANCE_${area^^}_GATE' in script and "${!gate_var:-1} == 1" in script
    assert '[[ ${AREA_OK[$area]:-0} == 1 ]] || exit 1' in script
    main = script[script.index("# ---------------------------------------------------------------- main"):]
    # after the admin phase, on its two-node OpenKeel, before the network phase restarts it with Neutron
    assert main.index("run_admin_phase") < main.index("run_area_phase") < main.index("run_network_phase")
    body = script[script.index("run_area_phase() {"):]
    assert body.index("two_node_openkeel") < body.index("tempest\" run")
    # the masakari phase runs last, after the pytest phases
    assert main.index("run_pytest_phase clients") < main.index("run_pytest_phase masakari")


def test_the_areas_tests_that_need_neutron_run_in_the_network_phase_with_their_features():
    lists = {area: shared_path(f"reference/tempest/tempest-compute-{area}.txt").read_text() for area in AREAS}
    conf_keys = re.findall(r"^(\w+) = ", (ROOT / "scripts/conformance").read_text(), re.MULTILINE)
    extra = [[part.strip() for part in line.split("|")] for line in
             (ROOT / "tests/conformance/tempest-network-extra.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert extra
    expected = {uuid for area in AREAS for uuid, _, _ in conformance_lists.expected(area)}
    for uuid, test, reason, features in extra:
        assert sum(f"tempest.api.compute.{test}[id-{uuid}" in text for text in lists.values()) == 1, test
        assert uuid not in expected and len(reason) > 30, (uuid, reason)
        for kv in features.split():
            key, value = kv.split("=")
            assert key in conf_keys and value in ("true", "false"), kv
    script = (ROOT / "scripts/conformance").read_text()
    area = script[script.index("run_area_phase() {"):script.index("# ---------------------------------------------------------------- neutron")]
    network = script[script.index("run_network_phase() {"):]
    # left out of their area's run, run with the network list, with their feature keys
    assert 'grep -vE "\\[id-($extra)[],]"' in area
    assert "network_extra_tests > \"$RUN/network-extra-list.txt\"" in network
    assert 'write_compute_tempest_conf tempest-network 1 "$(network_extra_features' in network


def test_the_console_proxy_serves_the_moves_phase_too():
    """test_live_migration_serial_console (moves) opens the serial console before and after a live migration."""
    script = (ROOT / "scripts/conformance").read_text()
    body = script[script.index("run_area_phase() {"):]
    assert "[[ $area == moves || $area == consoles ]] && start_console_proxy" in body
    moves = [line for line in (ROOT / "tests/conformance/tempest-moves-expected.txt").read_text().splitlines()
             if not line.startswith("#")]
    assert not [line for line in moves if "test_live_migration_serial_console" in line]
    [suspended] = [line for line in moves if "test_live_block_migration_suspended" in line]
    assert "KubeVirt has no suspend" in suspended
