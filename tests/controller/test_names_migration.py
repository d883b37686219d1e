"""Objects an earlier release named ``fl-<sha1>`` move to the readable name: create new, then delete old."""

from __future__ import annotations

import logging

import pytest

from openkeel_compute.emulator import Fault
from openkeel_compute.kubevirt.names import former_names, kubernetes_name
from tests.controller.helpers import CIT, CPREF, IT, MANAGED, PREF, add_namespaces

OLD = former_names("m1.small")[0]  # fl-83f488446f2fada0
NEW = kubernetes_name("m1.small")  # fl-m1.small
ENGINE_LOG = "openkeel_compute.controller.engine"


def as_an_earlier_release_left_it(apiserver, kinds_and_namespaces) -> None:
    """Rename the objects the controller just wrote to the name the previous contract gave them."""
    for kind, namespace in kinds_and_namespaces:
        obj = apiserver.handler.get(kind, NEW, namespace)
        apiserver.handler.remove(kind, NEW, namespace)
        obj["metadata"] = {k: v for k, v in obj["metadata"].items()
                           if k in ("name", "namespace", "labels", "annotations")}
        obj["metadata"]["name"] = OLD
        apiserver.handler.seed(obj)


def writes_path(writes: list[tuple[str, str]], plural: str) -> str:
    """The collection path of ``plural`` as the client wrote it."""
    return next(p for _m, p in writes if p.endswith("/" + plural))


def writes_to(apiserver, name: str) -> list[str]:
    return [method for method, path, _params in apiserver.handler.writes if path.rstrip("/").endswith("/" + name)]


@pytest.mark.parametrize("path", ["resync", "outbox"])
def test_objects_under_a_former_name_move_to_the_readable_name(ctl, cat, apiserver, caplog, path):
    assert OLD == "fl-83f488446f2fada0" and NEW == "fl-m1.small"
    add_namespaces(apiserver, "proj-a")
    cat.create("m1.small", vcpus=2)
    cat.create("gold.1", public=False, access=("proj-a",))
    ctl.resync()
    as_an_earlier_release_left_it(apiserver, [(CIT, None), (CPREF, None)])
    before = apiserver.handler.get(CIT, OLD)
    assert before is not None and apiserver.handler.get(CIT, NEW) is None
    apiserver.handler.writes.clear()
    if path == "outbox":
        cat.describe("m1.small", "moved")  # an outbox row for the flavor: row-by-row processing moves it too
    caplog.set_level(logging.INFO, logger=ENGINE_LOG)

    report = ctl.resync() if path == "resync" else ctl.process_outbox()

    assert apiserver.handler.get(CIT, OLD) is None and apiserver.handler.get(CPREF, OLD) is None
    moved = apiserver.handler.get(CIT, NEW)
    assert moved["spec"] == before["spec"] and moved["metadata"]["labels"] == MANAGED
    assert moved["metadata"]["annotations"]["openkeel.io/flavor-id"] == "m1.small"
    assert apiserver.handler.get(CPREF, NEW) is not None
    # Create first, then delete: the flavor is never without its objects.
    for plural in ("virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"):
        writes = [(m, p.rstrip("/")) for m, p, _ in apiserver.handler.writes]
        assert writes.index(("DELETE", f"{writes_path(writes, plural)}/{OLD}")) > writes.index(
            ("POST", writes_path(writes, plural))), writes
    lines = [r.getMessage() for r in caplog.records if r.name == ENGINE_LOG and r.getMessage().startswith("moved")]
    assert sorted(lines) == sorted([f"moved {CIT}/{OLD} -> {CIT}/{NEW} (flavor m1.small): readable names",
                                    f"moved {CPREF}/{OLD} -> {CPREF}/{NEW} (flavor m1.small): readable names"])
    assert report.problems == {} and report.transient is None
    # A flavor already under its readable name is left where it is.
    assert set(apiserver.handler.objects(IT)) == {("proj-a", kubernetes_name("gold.1"))}
    assert ctl.resync().total_writes == 0


def test_namespaced_copies_move_too(ctl, cat, apiserver):
    add_namespaces(apiserver, "proj-a")
    cat.create("m1.small", public=False, access=("proj-a",))
    ctl.resync()
    as_an_earlier_release_left_it(apiserver, [(IT, "proj-a"), (PREF, "proj-a")])
    ctl.resync()
    assert set(apiserver.handler.objects(IT)) == {("proj-a", NEW)}
    assert set(apiserver.handler.objects(PREF)) == {("proj-a", NEW)}


@pytest.mark.parametrize("path", ["resync", "outbox"])
def test_a_foreign_object_under_the_new_name_is_never_touched_and_the_old_one_stays(ctl, cat, apiserver, path):
    cat.create("m1.small")
    ctl.resync()
    as_an_earlier_release_left_it(apiserver, [(CIT, None), (CPREF, None)])
    foreign = apiserver.handler.seed({"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": CIT,
                                      "metadata": {"name": NEW}, "spec": {"cpu": {"guest": 8}}})
    if path == "outbox":
        cat.describe("m1.small", "again")
    report = ctl.resync() if path == "resync" else ctl.process_outbox()
    assert apiserver.handler.get(CIT, NEW) == foreign  # not ours: neither changed nor deleted
    assert apiserver.handler.get(CIT, OLD) is not None  # kept: the flavor must not lose its instancetype
    assert apiserver.handler.get(CPREF, OLD) is None and apiserver.handler.get(CPREF, NEW) is not None
    assert "not ours" in report.problems["m1.small"] and f"keeps its former name {OLD}" in report.problems["m1.small"]


def test_a_foreign_object_under_the_former_name_is_never_deleted(ctl, cat, apiserver):
    foreign = apiserver.handler.seed({"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": CIT,
                                      "metadata": {"name": OLD, "annotations": {"openkeel.io/flavor-id": "m1.small"}},
                                      "spec": {"cpu": {"guest": 8}}})
    cat.create("m1.small")
    ctl.process_outbox()
    ctl.resync()
    assert apiserver.handler.get(CIT, OLD) == foreign
    assert apiserver.handler.get(CIT, NEW) is not None
    assert writes_to(apiserver, OLD) == []


@pytest.mark.parametrize("path", ["resync", "outbox"])
def test_a_failure_between_create_and_delete_converges_on_the_next_pass(ctl, cat, apiserver, path):
    cat.create("m1.small")
    ctl.resync()
    as_an_earlier_release_left_it(apiserver, [(CIT, None), (CPREF, None)])
    apiserver.handler.faults.append(Fault(503, method="DELETE", times=100))  # more than the retries
    if path == "outbox":
        cat.describe("m1.small", "again")
    report = ctl.resync() if path == "resync" else ctl.process_outbox()
    assert report.transient is not None and report.transient.startswith("delete"), report.transient
    assert apiserver.handler.get(CIT, NEW) is not None  # created before the delete failed
    assert apiserver.handler.get(CIT, OLD) is not None or apiserver.handler.get(CPREF, OLD) is not None
    apiserver.handler.faults.clear()
    report = ctl.resync() if path == "resync" else ctl.process_outbox()
    assert report.transient is None and report.problems == {}
    assert apiserver.handler.get(CIT, OLD) is None and apiserver.handler.get(CPREF, OLD) is None
    assert apiserver.handler.get(CIT, NEW) is not None and apiserver.handler.get(CPREF, NEW) is not None
    assert ctl.resync().total_writes == 0


def test_a_deleted_flavor_left_under_its_former_name_is_deleted(ctl, cat, apiserver):
    cat.create("m1.small")
    ctl.resync()
    as_an_earlier_release_left_it(apiserver, [(CIT, None), (CPREF, None)])
    cat.delete("m1.small")
    ctl.process_outbox()
    assert apiserver.handler.objects(CIT) == {} and apiserver.handler.objects(CPREF) == {}


def test_status_shows_a_pending_move(ctl, cat, apiserver, db, conf):
    from openkeel_compute.conf.kubevirt import mapping_options
    from openkeel_compute.controller.status import flavor_statuses

    cat.create("m1.small")
    ctl.resync()
    as_an_earlier_release_left_it(apiserver, [(CIT, None)])
    [status] = flavor_statuses(db, ctl.backend, mapping_options(conf), flavor_id="m1.small")
    assert not status.in_sync
    assert any(f"{CIT}/{OLD}" in r and f"moves to {NEW}" in r for r in status.reasons), status.reasons
    assert [s.flavor_id for s in flavor_statuses(db, ctl.backend, mapping_options(conf))] == ["m1.small"]
