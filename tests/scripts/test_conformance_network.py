"""The network phase of scripts/conformance: its list of the tests OpenKeel cannot pass yet, and its gate."""

from __future__ import annotations

import re

from tests.scripts import conformance_lists
from tests.scripts.checkout import ROOT


def test_every_expected_failure_names_a_network_test_and_why():
    # every test of the list passes since the tier plays the node's network agent (node_agent.py): none is
    # expected to fail, all gate
    assert not conformance_lists.checked("network")


def test_the_network_phase_gates_unless_told_not_to():
    script = (ROOT / "scripts/conformance").read_text()
    [gate] = re.findall(r"\$\{OPENKEEL_CONFORMANCE_NETWORK_GATE:-(\d)\}", script)
    assert gate == "1"
    assert "OPENKEEL_CONFORMANCE_NETWORK_GATE  1 (default)" in script
    [phases] = re.findall(r'^PHASES="([^"]+)"', script, re.MULTILINE)
    assert "network" in phases.split(",")  # on by default, in CI too
    # CI does not turn the gate off any more: the tier plays the node's network agent (node_agent.py)
    ci = (ROOT / ".ci/run").read_text()
    assert "OPENKEEL_CONFORMANCE_NETWORK_GATE" not in ci
    assert "OPENKEEL_CONFORMANCE_ADMIN_GATE" not in ci
    assert "start_node_agent\n  write_compute_tempest_conf tempest-network 1" in script
