"""The admin phase of scripts/conformance: its list of the tests OpenKeel cannot pass yet, and its gate."""

from __future__ import annotations

import re

from tests.scripts import conformance_lists
from tests.scripts.checkout import ROOT


def test_every_expected_failure_names_an_admin_test_and_why():
    conformance_lists.checked("admin")


def test_the_admin_phase_gates_and_shares_the_servers_phase_services():
    script = (ROOT / "scripts/conformance").read_text()
    [gate] = re.findall(r"\$\{OPENKEEL_CONFORMANCE_ADMIN_GATE:-(\d)\}", script)
    assert gate == "1"
    assert "OPENKEEL_CONFORMANCE_ADMIN_GATE    1 (default)" in script
    # it runs before the network phase restarts OpenKeel with Neutron, on the servers phase's workspace
    main = script[script.index("# ---------------------------------------------------------------- main"):]
    assert main.index("run_admin_phase") < main.index("run_network_phase")
    assert "ADMIN_OK == 1" in script
