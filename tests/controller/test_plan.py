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


def test_a_servers_own_instancetype_is_never_the_catalogues():
    """A server's own instancetype (labelled with the server) is not a flavor's: never deleted, never moved,
    even when it carries a flavor's annotations."""
    server = obj("1b4c2a3e-0000-4000-8000-00000000abcd-0123456789", ns="p1",
                 labels={**MANAGED, "openkeel.io/server-id": "1b4c2a3e-0000-4000-8000-00000000abcd"},
                 annotations={"openkeel.io/flavor-id": "a"})
    desired = obj("a", ns="p1", annotations={"openkeel.io/flavor-id": "a"})
    result = plan(by_key(desired), by_key(server, desired))
    assert result.actions == [] and result.problems == [] and result.in_sync == [key_of(desired)]
    assert plan({}, by_key(server)).actions == []


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


def _of(flavor_id, name, ns=None, labels=MANAGED):
    return obj(name, ns=ns, labels=labels, annotations={"openkeel.io/flavor-id": flavor_id})


def test_an_object_under_a_former_name_is_moved_create_first_delete_last():
    new, old = _of("m1.small", "fl-m1.small"), _of("m1.small", "fl-83f488446f2fada0")
    other_old = _of("gone", "fl-0000000000000000")  # a deleted flavor: a plain delete
    result = plan(by_key(new), by_key(old, other_old))
    assert [(a.verb, a.key.name, a.moved_to) for a in result.actions] == [
        (CREATE, "fl-m1.small", None), (DELETE, "fl-0000000000000000", None),
        (DELETE, "fl-83f488446f2fada0", key_of(new))]
    assert result.problems == []


def test_a_move_is_finished_when_the_new_object_already_exists():
    new, old = _of("m1.small", "fl-m1.small"), _of("m1.small", "fl-83f488446f2fada0")
    result = plan(by_key(new), by_key(new, old))
    assert [(a.verb, a.moved_to) for a in result.actions] == [(DELETE, key_of(new))]
    assert result.in_sync == [key_of(new)]


def test_moves_stay_within_their_kind_and_namespace():
    new = _of("m1.small", "fl-m1.small", ns="p1")
    old_elsewhere = _of("m1.small", "fl-83f488446f2fada0", ns="p2")  # access removed from p2: deleted, not moved
    result = plan(by_key(new), by_key(old_elsewhere), namespaces={"p1", "p2"})
    assert [(a.verb, a.key.namespace, a.moved_to) for a in result.actions] == [
        (CREATE, "p1", None), (DELETE, "p2", None)]


def test_no_move_onto_a_foreign_object_and_no_move_of_a_foreign_object():
    new, old = _of("m1.small", "fl-m1.small"), _of("m1.small", "fl-83f488446f2fada0")
    foreign_new = _of("m1.small", "fl-m1.small", labels={})
    result = plan(by_key(new), by_key(foreign_new, old))
    assert result.actions == []
    assert sorted(p.kind for p in result.problems) == [CONFLICT, CONFLICT]
    assert any("keeps its former name fl-83f488446f2fada0" in p.message for p in result.problems)

    foreign_old = _of("m1.small", "fl-83f488446f2fada0", labels={})
    result = plan(by_key(new), by_key(foreign_old))
    assert [(a.verb, a.key.name) for a in result.actions] == [(CREATE, "fl-m1.small")]


def test_a_missing_namespace_says_why_when_namespaces_are_not_created():
    from openkeel_compute.controller.plan import NAMESPACES_OFF

    [problem] = plan(by_key(obj("p", ns="nope")), {}, namespaces=set(), namespace_hint=NAMESPACES_OFF).problems
    assert problem.message == ("namespace nope does not exist "
                               "([controller] create_namespaces is off: create it, or turn the option on)")
