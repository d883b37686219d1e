"""The pure reconcile decision, with plain dictionaries."""

from __future__ import annotations

from openkeel_compute.controller.desired import ObjectKey, key_of
from openkeel_compute.controller.metrics import Metrics
from openkeel_compute.controller.plan import APPLY, CONFLICT, CREATE, DELETE, NAMESPACE_MISSING, REPLACE, plan

MANAGED = {"app.kubernetes.io/managed-by": "openkeel"}


def obj(name, ns=None, spec=None, labels=MANAGED, annotations=None, rv="7"):
    meta = {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {}), "resourceVersion": rv}
    if ns:
        meta["namespace"] = ns
    return {"kind": "VirtualMachineInstancetype" if ns else "VirtualMachineClusterInstancetype",
            "metadata": meta, "spec": spec or {"cpu": {"guest": 1}}}


def by_key(*objs):
    return {key_of(o): o for o in objs}


def test_identical_objects_need_nothing():
    desired = obj("a", annotations={"openkeel.io/flavor-id": "a"})
    observed = obj("a", annotations={"openkeel.io/flavor-id": "a", "someone/else": "x"}, labels={**MANAGED, "x": "y"})
    result = plan(by_key(desired), by_key(observed))
    assert result.actions == [] and result.in_sync == [key_of(desired)]


def test_changed_annotation_is_applied_pinned_to_the_observed_version():
    [action] = plan(by_key(obj("a", annotations={"openkeel.io/flavor-description": "new"})),
                    by_key(obj("a", annotations={"openkeel.io/flavor-description": "old"}, rv="42"))).actions
    assert action.verb == APPLY and action.body["metadata"]["resourceVersion"] == "42"
    assert "annotation openkeel.io/flavor-description" in action.reason


def test_removals_need_a_replace_that_keeps_foreign_metadata():
    desired = obj("a")
    observed = obj("a", spec={"cpu": {"guest": 1, "model": "x"}},
                   annotations={"openkeel.io/flavor-description": "gone", "other/key": "kept"})
    [action] = plan(by_key(desired), by_key(observed)).actions
    assert action.verb == REPLACE
    assert action.body["spec"] == desired["spec"]
    assert action.body["metadata"]["annotations"] == {"other/key": "kept"}


def test_foreign_objects_are_conflicts_and_never_deleted():
    foreign = obj("a", labels={})
    result = plan(by_key(obj("a")), by_key(foreign))
    assert result.actions == [] and result.problems[0].kind == CONFLICT
    assert plan({}, by_key(foreign)).actions == []


def test_missing_creates_unwanted_managed_deletes_missing_namespace_reports():
    result = plan(by_key(obj("new"), obj("p", ns="nope")), by_key(obj("old")), namespaces={"default"})
    assert [(a.verb, a.key.name) for a in result.actions] == [(CREATE, "new"), (DELETE, "old")]
    assert result.problems[0].kind == NAMESPACE_MISSING


def test_namespaces_are_created_first_and_never_deleted():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "p", "labels": MANAGED}}
    result = plan(by_key(obj("x", ns="p"), ns), {}, namespaces=set())
    assert [a.verb for a in result.actions] == [CREATE, CREATE] and result.actions[0].key.kind == "Namespace"
    assert plan({}, {ObjectKey("Namespace", None, "p"): ns}).actions == []


def test_metrics_have_their_own_registry():
    m1, m2 = Metrics(), Metrics()
    m1.writes.labels("create").inc()
    assert m1.registry.get_sample_value("openkeel_controller_writes_total", {"verb": "create"}) == 1
    assert m2.registry.get_sample_value("openkeel_controller_writes_total", {"verb": "create"}) is None
