"""The controller's RBAC, and the console proxy's, allow exactly the calls each makes.

tests/deploy/controller-calls.json holds every distinct Kubernetes API call the controller's client
made while the controller's tests ran against the emulated cluster (tools/rbac_calls.py records it
through the emulator's audit log). Each must be allowed by the rendered ClusterRole (any namespace)
or Role (the controller's own namespace), and each rule must be used by at least one of them.
tests/deploy/console-proxy-calls.json is the console proxy's record (`tools/rbac_calls.py --component
console-proxy`, its tests against the emulated cluster), checked the same way against its own ClusterRole.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from tests.deploy.conftest import NAMESPACE, find

HERE = pathlib.Path(__file__).parent
CONTROLLER = "openkeel-compute-controller"
PROXY = "openkeel-compute-console-proxy"

Call = tuple[str, str, str, str]  # verb, API group, resource[/subresource], scope


def _calls(name: str) -> list[dict[str, Any]]:
    return json.loads((HERE / name).read_text())


def _key(call: dict[str, Any]) -> Call:
    resource = call["resource"] + (f"/{call['subresource']}" if call["subresource"] else "")
    return call["verb"], call["apiGroup"], resource, call["scope"]


RECORDED = [_key(c) for c in _calls("controller-calls.json")]
PROXY_RECORDED = [_key(c) for c in _calls("console-proxy-calls.json")]


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(verb, group, resource) triples a list of rules grants; wildcards and resourceNames are refused."""
    granted = set()
    for rule in rules:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule, rule
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        granted |= {(v, g, r) for v in rule["verbs"] for g in rule["apiGroups"] for r in rule["resources"]}
    return granted


def _controller_rbac(objects, account: str = CONTROLLER) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(cluster-wide grants, grants in its own namespace) of a service account (by default the controller's)."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
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


def unused(cluster, own, recorded=RECORDED) -> set[tuple[str, str, str]]:
    """Grants no recorded call needs: cluster-wide ones, and the Role's outside its Lease calls."""
    made = {c[:3] for c in recorded}
    made_own = {c[:3] for c in recorded if c[3] == "own"}
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


@pytest.mark.parametrize("render", ["production", "dev"])
def test_the_console_proxy_may_make_every_recorded_call_and_nothing_more(rendered, render):
    cluster, own = _controller_rbac(rendered[render], PROXY)
    refused = [c for c in PROXY_RECORDED if not allowed(c, cluster, own)]
    assert refused == [], f"the console proxy's RBAC refuses calls it makes: {refused}"
    assert unused(cluster, own, PROXY_RECORDED) == set(), "the console proxy's RBAC grants what it never does"
    assert own == set()


def test_the_console_proxy_only_opens_consoles():
    """What `virtctl vnc` and `virtctl console` need, in the projects' namespaces; it reads nothing else."""
    assert set(PROXY_RECORDED) == {("get", "subresources.kubevirt.io", "virtualmachineinstances/vnc", "project"),
                                   ("get", "subresources.kubevirt.io", "virtualmachineinstances/console", "project")}


def test_the_console_proxy_and_the_controller_share_no_account(rendered):
    objects = rendered["production"]
    pods = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Deployment"}
    assert pods[PROXY]["serviceAccountName"] == PROXY
    # Neither's calls are allowed by the other's rights: each account holds only its own.
    proxy_cluster, _ = _controller_rbac(objects, PROXY)
    controller_cluster, _ = _controller_rbac(objects)
    assert not any(allowed(c, controller_cluster, set()) for c in PROXY_RECORDED)
    assert proxy_cluster & controller_cluster == set()


def test_a_missing_or_an_extra_console_proxy_rule_is_caught(rendered):
    objects = rendered["production"]
    cluster, own = _controller_rbac(objects, PROXY)
    vnc = ("get", "subresources.kubevirt.io", "virtualmachineinstances/vnc")
    assert any(not allowed(c, cluster - {vnc}, own) for c in PROXY_RECORDED)
    extra = ("get", "kubevirt.io", "virtualmachineinstances")
    assert unused(cluster | {extra}, own, PROXY_RECORDED) == {extra}
