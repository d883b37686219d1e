"""The census: every operation of Nova 34.0.0's route table is known to OpenKeel.

Nova's operations (265: one per URI template and method, one per body action) are read from
Nova's installed source by tools/nova_operations.py into src/openkeel_compute/api/data/
nova_operations.json; api/census.py looks each up in api/router.py. An operation is served,
answered as Nova's removed handler answers it, or answered as Nova answers without the service
behind it, or still to come: then it must be on TO_COME below, which only shrinks (an operation
on it that is now routed fails the test, so the entry must go).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from openkeel_compute.api import census, microversion, router
from tests.api import oracles

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The operations other issues were to bring: every one is routed now, so none may answer the 404 of an
# unknown route (the list stays, empty, for the rule above).
TO_COME: set[str] = set()


def _nova_python() -> pathlib.Path:
    """Nova's installed source: the flavor oracle's virtualenv (made by its script when absent)."""
    return oracles.oracle_python("run-oracle.sh")


def test_the_committed_table_is_what_novas_route_table_says():
    python = _nova_python()
    completed = subprocess.run([sys.executable, str(ROOT / "tools" / "nova_operations.py")], capture_output=True,
                               text=True, timeout=300, check=False, env={**os.environ, "NOVA_ORACLE_VENV": str(
                                   python.parent.parent)})
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout == census.TABLE.read_text(), (
        "src/openkeel_compute/api/data/nova_operations.json is stale: run tools/nova_operations.py --write")


def test_the_table_holds_every_operation_nova_routes():
    rows = census.rows()
    assert len(rows) == 265
    assert len({row.key for row in rows}) == 265, "each operation once"
    assert sum(row.nova_removed for row in rows) == 54


def test_every_nova_operation_is_routed_or_still_to_come():
    not_routed = {row.key for row in census.rows() if row.standing == census.NOT_YET}
    assert sorted(not_routed - TO_COME) == [], "answered 404 as an unknown route: route them or list them"
    assert sorted(TO_COME - not_routed) == [], "routed now: take them off TO_COME"


def test_openkeel_routes_only_novas_operations():
    nova = {(census.shape(row.path), row.method, row.action) for row in census.rows()}
    ours = []
    for template, methods in router.ROUTES.items():
        for method, target in methods.items():
            for action in (target if isinstance(target, dict) else (None,)):
                if (census.shape(template), method, action) not in nova:
                    ours.append(f"{method} {template} {action or ''}")
    assert ours == []


def test_every_routed_operation_exists_at_novas_microversions_only():
    wrong = [(row.key, row.operation.versions, row.nova_versions) for row in census.rows()
             if row.operation is not None and row.operation.versions != row.nova_versions]
    assert wrong == []


def test_what_nova_removed_is_answered_as_removed_and_nothing_else():
    assert [row.key for row in census.rows() if row.operation is not None
            and row.nova_removed != (row.standing == census.REMOVED)] == []


def test_novas_v2_is_its_2_1():
    assert census.nova_versions(None, None) == (microversion.LEGACY_V2, microversion.MAX_VERSION)
    assert census.nova_versions("2.1", "2.35") == (microversion.LEGACY_V2, microversion.Version(2, 35))
    assert census.nova_versions("2.26", None) == (microversion.Version(2, 26), microversion.MAX_VERSION)


def test_every_routed_operation_reaches_its_handler(client):
    """Routed, not only listed: at a microversion of its range, no operation gets the unknown-route page."""
    unknown_route = []
    for row in census.rows():
        if row.operation is None:
            continue
        low, _ = row.operation.versions
        version = "2.1" if low == microversion.LEGACY_V2 else str(low)
        path = "/v2.1" + census.shape(row.path).replace("{}", "x")
        body = {row.action: None} if row.action else ({} if row.method in ("POST", "PUT") else None)
        got = client.request(row.method, path, headers={"X-Auth-Token": "admin:admin",
                                                        "OpenStack-API-Version": f"compute {version}"},
                             json_body=body)
        if got.status_code == 404 and not (got.header("Content-Type") or "").startswith("application/json"):
            unknown_route.append(row.key)
    assert unknown_route == []


def test_docs_api_md_table_is_current():
    docs = (ROOT / "docs" / "api.md").read_text()
    assert census.BEGIN in docs and census.END in docs
    assert census.splice(docs) == docs, "docs/api.md is stale: run .venv/bin/python tools/nova_operations.py --docs"
