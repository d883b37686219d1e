"""Removed operations, /extensions and the bare-metal proxy answer as the live Nova 34.0.0 does.

Every operation Nova's route table marks removed (api/data/nova_operations.json) is sent to a fresh
Nova (../shared/nova-oracle/run-oracle.sh: nova-api without Ironic) and to OpenKeel at several
microversions and on /v2: status, headers (version headers, Vary lines, content type) and body must
be equal. Nova's own 500s are not compared here: tests/api/test_removed_operations.py and
tests/api/test_baremetal_nodes.py pin what OpenKeel answers instead.
"""

from __future__ import annotations

import json

import pytest

from openkeel_compute.api import census
from tests.api import oracles

UNKNOWN_SERVER = "6a1d5f38-2b0e-4c56-9d8e-2f1f0b9c4e77"
VERSIONS = (None, "2.1", "2.6", "2.36", "latest")


@pytest.fixture(scope="module")
def nova():
    with oracles.flavor_oracle() as url:
        yield url


def _path(template: str) -> str:
    path = template.replace("{server_id}", UNKNOWN_SERVER)
    if path.startswith("/servers/{id}"):
        path = path.replace("{id}", UNKNOWN_SERVER)
    for name in ("{id}", "{domain_id}"):
        path = path.replace(name, "1")
    return path


def _body(row: census.Row) -> bytes | None:
    if row.action:
        return json.dumps({row.action: None}).encode()
    return b'{"anything": 1}' if row.method in ("POST", "PUT") else None


def _compare(nova: str, client, cases) -> list:
    differences = []
    for method, path, token, version, body in cases:
        theirs = oracles.ask_nova(nova, method, path, token=token, version=version, body=body)
        ours = oracles.ask_openkeel(client, method, path, token=token, version=version, body=body)
        if theirs.comparable() != ours.comparable():
            differences.append((method, path, token, version, body, theirs.comparable(), ours.comparable()))
    return differences


def test_every_removed_operation_answers_as_nova_at_every_microversion_and_on_v2(nova, client):
    cases = []
    for row in census.rows():
        if not row.nova_removed:
            continue
        for version in VERSIONS:
            cases.append((row.method, "/v2.1" + _path(row.path), "u:p", version, _body(row)))
        cases.append((row.method, "/v2" + _path(row.path), "admin:admin", None, _body(row)))
    assert len(cases) == 54 * (len(VERSIONS) + 1)
    assert _compare(nova, client, cases) == []


def test_removed_operations_answer_as_nova_to_odd_bodies(nova, client):
    cases = [("POST", "/v2.1/os-cells", "u:p", None, b"not json"),
             ("POST", "/v2.1/os-cells", "u:p", None, b"[1]"),
             ("POST", "/v2.1/os-cells", "u:p", None, None),
             ("PUT", "/v2.1/os-cloudpipe/1", "u:p", None, b'"x"'),
             ("POST", f"/v2.1/servers/{UNKNOWN_SERVER}/action", "u:p", None, b'{"resetNetwork": 1, "b": 2}'),
             ("POST", f"/v2.1/servers/{UNKNOWN_SERVER}/action", "u:p", "2.5", b'{"os-getRDPConsole": {}}'),
             ("POST", "/v2.1/os-fixed-ips/1/action", "u:p", None, b'{"bogus": null}'),
             ("POST", "/v2.1/os-networks/1/action", "u:p", None, b'{"associate_host": "h"}'),
             ("DELETE", "/v2.1/os-tenant-networks/1", "u:p", "2.36", None),
             ("PATCH", "/v2.1/os-agents/1", "u:p", None, b"{}")]
    assert _compare(nova, client, cases) == []


def test_extensions_answer_as_nova(nova, client):
    cases = []
    for version in (None, "2.1", "2.101", "2.102", "latest"):
        cases += [("GET", "/v2.1/extensions", "u:p", version, None),
                  ("GET", "/v2.1/extensions/os-server-external-events", "u:p", version, None),
                  ("GET", "/v2.1/extensions/os-assisted-volume-snapshots", "u:p", version, None),
                  ("GET", "/v2.1/extensions/OS-EXT-VIF-NET", "u:p", version, None),
                  ("GET", "/v2.1/extensions/nope", "u:p", version, None),
                  ("GET", "/v2.1/extensions?foo=1", "u:p", version, None),
                  ("GET", "/v2.1/extensions/os-volumes?foo=1", "u:p", version, None)]
    cases += [("GET", "/v2/extensions", "u:p", None, None), ("GET", "/v2/extensions/OS-EXT-VIF-NET", "u:p", None, None),
              ("GET", "/v2.1/extensions", "admin:admin", "2.104", None)]
    assert _compare(nova, client, cases) == []


def test_baremetal_nodes_answer_as_nova_without_ironic(nova, client):
    cases = []
    for version in (None, "2.35", "2.36"):
        for token in ("u:p", "admin:admin"):
            cases += [("POST", "/v2.1/os-baremetal-nodes", token, version, b'{"node": {}}'),
                      ("DELETE", "/v2.1/os-baremetal-nodes/1", token, version, None),
                      ("POST", "/v2.1/os-baremetal-nodes/1/action", token, version, b'{"add_interface": {}}'),
                      ("POST", "/v2.1/os-baremetal-nodes/1/action", token, version, b'{"remove_interface": null}'),
                      ("POST", "/v2.1/os-baremetal-nodes/1/action", token, version, b'{"nope": null}')]
        cases += [("GET", "/v2.1/os-baremetal-nodes", "u:p", version, None),
                  ("GET", "/v2.1/os-baremetal-nodes/1", "u:p", version, None)]
    cases += [("POST", "/v2/os-baremetal-nodes", "u:p", None, None),
              ("GET", "/v2/os-baremetal-nodes", "u:p", None, None)]
    assert _compare(nova, client, cases) == []


def test_the_usage_audit_log_answers_as_nova_before_any_audit_ran(nova, client):
    cases = []
    for version in (None, "2.101", "2.102"):
        cases += [("GET", "/v2.1/os-instance_usage_audit_log", "admin:admin", version, None),
                  ("GET", "/v2.1/os-instance_usage_audit_log?foo=1", "admin:admin", version, None),
                  ("GET", "/v2.1/os-instance_usage_audit_log/2026-03-01%2000:00:00", "admin:admin", version, None),
                  ("GET", "/v2.1/os-instance_usage_audit_log/2024-01-31%2012:00:00.25", "admin:admin", version, None),
                  ("GET", "/v2.1/os-instance_usage_audit_log/2026-03-01", "admin:admin", version, None),
                  ("GET", "/v2.1/os-instance_usage_audit_log/2026-03-01%2000:00:00?x=1", "admin:admin", version, None),
                  ("GET", "/v2.1/os-instance_usage_audit_log", "u:p", version, None),
                  ("GET", "/v2.1/os-instance_usage_audit_log/2026-03-01%2000:00:00", "u:p", version, None)]
    cases.append(("GET", "/v2/os-instance_usage_audit_log", "admin:admin", None, None))
    assert _compare(nova, client, cases) == []
