"""The network phase of scripts/conformance: its list of the tests OpenKeel cannot pass yet, and its gate."""

from __future__ import annotations

import re

from tests._shared import shared_path
from tests.scripts.checkout import ROOT

EXPECTED = ROOT / "tests/conformance/tempest-network-expected.txt"


def _expected():
    for line in EXPECTED.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            uuid, test, reason = (part.strip() for part in line.split("|", 2))
            yield uuid, test, reason


def test_every_expected_failure_names_a_network_test_and_why():
    listed = [line.strip() for line in
              shared_path("reference/tempest/tempest-compute-network.txt").read_text().splitlines() if line.strip()]
    seen = set()
    for uuid, test, reason in _expected():
        assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", uuid), uuid
        assert uuid not in seen, f"{uuid} twice"
        seen.add(uuid)
        [full] = [t for t in listed if f"id-{uuid}" in t]
        assert full.startswith(f"tempest.api.compute.{test}["), (test, full)
        assert len(reason) > 30, reason
    # every test of the list passes since the tier plays the node's network agent (node_agent.py): none is
    # expected to fail, all gate
    assert not seen


def test_the_network_phase_gates_unless_told_not_to():
    script = (ROOT / "scripts/conformance").read_text()
    [gate] = re.findall(r"\$\{OPENKEEL_CONFORMANCE_NETWORK_GATE:-(\d)\}", script)
    assert gate == "1"
    assert "OPENKEEL_CONFORMANCE_NETWORK_GATE  1 (default)" in script
    assert 'PHASES="tempest,personas,clients,servers,admin,network,volume"' in script  # on by default, in CI too
    # CI does not turn the gate off any more: the tier plays the node's network agent (node_agent.py)
    ci = (ROOT / ".ci/run").read_text()
    assert "OPENKEEL_CONFORMANCE_NETWORK_GATE" not in ci
    assert "OPENKEEL_CONFORMANCE_ADMIN_GATE" not in ci
    assert "start_node_agent\n  write_compute_tempest_conf tempest-network 1" in script
