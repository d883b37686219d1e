"""The controller's RBAC allows exactly the calls it makes.

tests/deploy/controller-calls.json holds every distinct Kubernetes API call the controller's client
made while the controller's tests ran against the emulated cluster (tools/rbac_calls.py records it
through the emulator's audit log). Each must be allowed by the rendered ClusterRole (any namespace)
or Role (the controller's own namespace), and each rule must be used by at least one of them.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from tests.deploy.conftest import NAMESPACE, find

HERE = pathlib.Path(__file__).parent
CONTROLLER = "openkeel-compute-controller"

Call = tuple[str, str, str, str]  # verb, API group, resource[/subresource], scope


def _calls(name: str) -> list[dict[str, Any]]:
    return json.loads((HERE / name).read_text())


def _key(call: dict[str, Any]) -> Call:
    resource = call["resource"] + (f"/{call['subresource']}" if call["subresource"] else "")
    return call["verb"], call["apiGroup"], resource, call["scope"]


RECORDED = [_key(c) for c in _calls("controller-calls.json")]


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(verb, group, resource) triples a list of rules grants; wildcards and resourceNames are refused."""
    granted = set()
    for rule in rules:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule, rule
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        granted |= {(v, g, r) for v in rule["verbs"] for g in rule["apiGroups"] for r in rule["resources"]}
    return granted


def _controller_rbac(objects) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(cluster-wide grants, grants in the controller's namespace) of the controller's service account."""
    subject = {"kind": "ServiceAccount", "name": CONTROLLER, "namespace": NAMESPACE}
    cluster: set[tuple[str, str, str]] = set()
    own: set[tuple[str, str, str]] = set()
    for binding in (o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        if subject not in binding["subjects"]:
            continue
        ref = binding["roleRef"]
        role = find(objects, ref["kind"], ref["name"])
        if binding["kind"] == "ClusterRoleBinding":
            cluster |= _grants(role["rules"])
        else:
            assert binding["metadata"]["namespace"] == role["metadata"]["namespace"] == NAMESPACE
            own |= _grants(role["rules"])
    return cluster, own


def allowed(call: Call, cluster, own) -> bool:
    verb, group, resource, scope = call
    return (verb, group, resource) in cluster or (scope == "own" and (verb, group, resource) in own)


@pytest.mark.parametrize("render", ["production", "dev"])
def test_every_recorded_call_is_allowed(rendered, render):
    cluster, own = _controller_rbac(rendered[render])
    refused = [c for c in RECORDED if not allowed(c, cluster, own)]
    assert refused == [], f"the controller's RBAC refuses calls it makes: {refused}"


def unused(cluster, own) -> set[tuple[str, str, str]]:
    """Grants no recorded call needs: cluster-wide ones, and the Role's outside its Lease calls."""
    made = {c[:3] for c in RECORDED}
    made_own = {c[:3] for c in RECORDED if c[3] == "own"}
    return (cluster - made) | (own - made_own)


@pytest.mark.parametrize("render", ["production", "dev"])
def test_no_rule_is_unused(rendered, render):
    cluster, own = _controller_rbac(rendered[render])
    assert unused(cluster, own) == set(), "the controller's RBAC grants what the controller never does"
    # What the Role grants in the controller's namespace is not also granted everywhere.
    assert own & cluster == set()


def test_the_lease_is_the_only_thing_in_the_controllers_namespace():
    assert {c[2] for c in RECORDED if c[3] == "own"} == {"leases"}
    assert {c[2] for c in RECORDED if c[2] == "leases"} == {"leases"}
    assert all(c[3] == "own" for c in RECORDED if c[2] == "leases")


def test_the_record_holds_verbs_and_scopes_rbac_knows():
    assert {c[0] for c in RECORDED} <= {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert {c[3] for c in RECORDED} <= {"cluster", "own", "project"}


def test_a_missing_or_an_extra_rule_is_caught(rendered):
    """The two checks can fail: without the first rule a recorded call is refused; one verb more is unused."""
    objects = rendered["production"]
    role = find(objects, "ClusterRole", CONTROLLER)
    cluster, own = _controller_rbac(objects)
    dropped = cluster - _grants(role["rules"][:1])
    assert any(not allowed(c, dropped, own) for c in RECORDED)
    assert unused(cluster | {("deletecollection", "", "secrets")}, own) == {("deletecollection", "", "secrets")}
    assert unused(cluster, own | {("delete", "coordination.k8s.io", "leases")}) != set()
