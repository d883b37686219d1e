"""Differential check: our FlavorPayload against the one Nova 34.0.0 itself builds.

Runs ``nova_oracle_payloads.py`` with the oracle venv's Python (NOVA_ORACLE_VENV, by
default /root/.cache/nova-oracle/venv) and skips with the reason when that venv is absent.
"""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from openkeel_compute.notifications import FlavorAction, build_flavor_payload
from tests.api.oracles import oracle_python
from tests.notifications.conftest import SAMPLE_FLAVOR, SAMPLE_FLAVOR_AFTER_UPDATES

ORACLE_SCRIPT = pathlib.Path(__file__).with_name("nova_oracle_payloads.py")

UNUSUAL_FLAVOR = {
    "flavorid": "42",
    "name": "odd one",
    "memory_mb": 2048,
    "vcpus": 4,
    "root_gb": 0,
    "ephemeral_gb": 5,
    "swap": 512,
    "rxtx_factor": 1,
    "vcpu_weight": 3,
    "disabled": True,
    "is_public": False,
    "description": "GPU nodes only",
    "extra_specs": {"hw:cpu_policy": "dedicated", "trait:CUSTOM_GPU": "required"},
    "projects": ["p1", "p2"],
}

CASES = [
    (action, flavor)
    for flavor in (SAMPLE_FLAVOR, SAMPLE_FLAVOR_AFTER_UPDATES, UNUSUAL_FLAVOR)
    for action in FlavorAction
]


@pytest.mark.oracle
def test_payloads_match_what_nova_builds_for_the_same_flavor() -> None:
    nova_python = oracle_python("run-oracle.sh")
    request = [{"action": action.value, "flavor": flavor} for action, flavor in CASES]
    completed = subprocess.run(
        [str(nova_python), "-W", "ignore", str(ORACLE_SCRIPT)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, f"oracle script failed:\n{completed.stderr[-3000:]}"
    nova_payloads = json.loads(completed.stdout)
    for (action, flavor), nova_payload in zip(CASES, nova_payloads, strict=True):
        ours = json.loads(json.dumps(build_flavor_payload(flavor, action)))
        assert ours == nova_payload, f"{action.event_type} for {flavor['flavorid']}: {ours} != {nova_payload}"
