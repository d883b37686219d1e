"""The admin phase of scripts/conformance: its list of the tests OpenKeel cannot pass yet, and its gate."""

from __future__ import annotations

import re

from tests._shared import shared_path
from tests.scripts.checkout import ROOT

EXPECTED = ROOT / "tests/conformance/tempest-admin-expected.txt"


def _expected():
    for line in EXPECTED.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            uuid, test, reason = (part.strip() for part in line.split("|", 2))
            yield uuid, test, reason


def test_every_expected_failure_names_an_admin_test_and_why():
    listed = [line.strip() for line in
              shared_path("reference/tempest/tempest-compute-admin.txt").read_text().splitlines() if line.strip()]
    seen = set()
    for uuid, test, reason in _expected():
        assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", uuid), uuid
        assert uuid not in seen, f"{uuid} twice"
        seen.add(uuid)
        [full] = [t for t in listed if f"id-{uuid}" in t]
        assert full.startswith(f"tempest.api.compute.{test}["), (test, full)
        assert len(reason) > 30, reason


def test_the_admin_phase_gates_and_shares_the_servers_phase_services():
    script = (ROOT / "scripts/conformance").read_text()
    [gate] = re.findall(r"\$\{OPENKEEL_CONFORMANCE_ADMIN_GATE:-(\d)\}", script)
    assert gate == "1"
    assert "OPENKEEL_CONFORMANCE_ADMIN_GATE    1 (default)" in script
    # it runs before the network phase restarts OpenKeel with Neutron, on the servers phase's workspace
    main = script[script.index("# ---------------------------------------------------------------- main"):]
    assert main.index("run_admin_phase") < main.index("run_network_phase")
    assert "ADMIN_OK == 1" in script
