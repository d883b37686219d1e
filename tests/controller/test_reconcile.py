"""The controller against the API-server emulator over real HTTP: what ends up in the cluster."""

from __future__ import annotations

from openkeel_compute.controller.status import flavor_statuses
from openkeel_compute.kubevirt.mapping import ANN_DESCRIPTION
from openkeel_compute.kubevirt.names import hashed_name
from tests.controller.helpers import CIT, CPREF, IT, MANAGED, PREF, add_namespaces


def test_public_flavor_becomes_cluster_instancetype_and_preference(ctl, cat, apiserver):
    cat.create("m1-small", vcpus=2, ram=2048)
    report = ctl.process_outbox()
    it = apiserver.handler.get(CIT, "m1-small")
    assert it["spec"] == {"cpu": {"guest": 2}, "memory": {"guest": "2048Mi"}}
    assert it["metadata"]["labels"] == MANAGED
    assert apiserver.handler.get(CPREF, "m1-small") is not None
    assert report.rows_done == 1 and cat.pending() == []
    for _method, _path, params in apiserver.handler.writes:
        assert params["fieldManager"] == "openkeel" and params["fieldValidation"] == "Strict"


def test_private_flavor_gets_one_copy_per_project_namespace(ctl, cat, apiserver):
    add_namespaces(apiserver, "proj-a", "proj-b", "proj-c")
    cat.create("gold", public=False, access=("proj-a", "proj-b"))
    ctl.process_outbox()
    assert set(apiserver.handler.objects(IT)) == {("proj-a", "gold"), ("proj-b", "gold")}
    assert set(apiserver.handler.objects(PREF)) == {("proj-a", "gold"), ("proj-b", "gold")}
    assert apiserver.handler.objects(CIT) == {}

    cat.add_access("gold", "proj-c")
    cat.remove_access("gold", "proj-a")
    ctl.process_outbox()
    assert set(apiserver.handler.objects(IT)) == {("proj-b", "gold"), ("proj-c", "gold")}
    assert set(apiserver.handler.objects(PREF)) == {("proj-b", "gold"), ("proj-c", "gold")}
    assert cat.pending() == []


def test_deleting_a_flavor_deletes_its_objects_and_never_a_virtual_machine(ctl, cat, apiserver):
    add_namespaces(apiserver, "proj-a")
    cat.create("tiny")
    cat.create("secret", public=False, access=("proj-a",))
    ctl.process_outbox()
    vm = apiserver.handler.seed({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                                 "metadata": {"name": "tiny", "namespace": "proj-a", "labels": MANAGED},
                                 "spec": {"instancetype": {"kind": CIT, "name": "tiny"}}})
    cat.delete("tiny")
    cat.delete("secret")
    ctl.process_outbox()
    assert apiserver.handler.objects(CIT) == {} and apiserver.handler.objects(CPREF) == {}
    assert apiserver.handler.objects(IT) == {} and apiserver.handler.objects(PREF) == {}
    kept = apiserver.handler.get("VirtualMachine", "tiny", "proj-a")  # KubeVirt's controller adds status
    assert kept["metadata"]["uid"] == vm["metadata"]["uid"] and kept["spec"] == vm["spec"]
    assert not any("virtualmachines" in path for _m, path, _p in apiserver.handler.writes)


def test_description_change_touches_annotations_only(ctl, cat, apiserver):
    cat.create("m1", description="old")
    ctl.process_outbox()
    before = apiserver.handler.get(CIT, "m1")
    writes = len(apiserver.handler.writes)
    cat.describe("m1", "new text")
    ctl.process_outbox()
    after = apiserver.handler.get(CIT, "m1")
    assert after["metadata"]["annotations"][ANN_DESCRIPTION] == "new text"
    assert after["spec"] == before["spec"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]  # no new ControllerRevision
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert len(apiserver.handler.writes) == writes + 2  # the instancetype and the preference, nothing else

    cat.describe("m1", None)  # removing the description removes the annotation
    ctl.process_outbox()
    assert ANN_DESCRIPTION not in apiserver.handler.get(CIT, "m1")["metadata"]["annotations"]
    assert apiserver.handler.get(CIT, "m1")["metadata"]["generation"] == before["metadata"]["generation"]


def test_resync_with_nothing_to_do_sends_no_writes(ctl, cat, apiserver):
    add_namespaces(apiserver, "proj-a")
    cat.create("a")
    cat.create("b", public=False, access=("proj-a",), specs={"hw:cpu_policy": "dedicated"})
    ctl.resync()
    writes = len(apiserver.handler.writes)
    report = ctl.resync()
    assert report.total_writes == 0 and len(apiserver.handler.writes) == writes
    assert ctl.process_outbox().total_writes == 0


def test_resync_restores_objects_edited_or_deleted_by_hand(ctl, cat, apiserver):
    cat.create("m1", vcpus=2)
    cat.create("m2")
    ctl.resync()
    edited = apiserver.handler.get(CIT, "m1")
    edited["spec"]["cpu"]["guest"] = 64
    edited["spec"]["cpu"]["model"] = "host-passthrough"  # a field we never write: needs a replace
    apiserver.handler.seed(edited)
    apiserver.handler.remove(CPREF, "m2")
    report = ctl.resync()
    assert apiserver.handler.get(CIT, "m1")["spec"] == {"cpu": {"guest": 2}, "memory": {"guest": "512Mi"}}
    assert apiserver.handler.get(CPREF, "m2") is not None
    assert report.writes == {"replace": 1, "create": 1}
    assert ctl.resync().total_writes == 0


def test_foreign_object_with_our_name_is_a_conflict_never_overwritten(ctl, cat, apiserver, db, conf):
    foreign = apiserver.handler.seed({"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": CIT,
                                      "metadata": {"name": "u1"}, "spec": {"cpu": {"guest": 8}}})
    cat.create("u1")
    report = ctl.process_outbox()
    assert apiserver.handler.get(CIT, "u1") == foreign
    assert "not ours" in report.problems["u1"]
    [row] = cat.pending()
    assert row.attempts == 1 and "not ours" in row.last_error
    assert apiserver.handler.get(CPREF, "u1") is not None  # the rest of the flavor went through
    cat.delete("u1")
    ctl.resync()
    assert apiserver.handler.get(CIT, "u1") == foreign  # not ours: not deleted either
    from openkeel_compute.conf.kubevirt import mapping_options

    [status] = flavor_statuses(db, ctl.backend, mapping_options(conf), flavor_id="u1")
    assert status.in_sync  # u1 no longer exists and nothing of ours is left


def test_without_create_namespaces_a_missing_namespace_is_reported_and_retried(conf, apiserver, cat, db, tmp_path):
    from openkeel_compute.conf.kubevirt import mapping_options
    from tests.conftest import make_conf
    from tests.controller.helpers import controller_for

    # A conf of its own (same database): oslo.config overrides leak between ConfigOpts sharing a group.
    ctl = controller_for(make_conf(tmp_path, controller={"create_namespaces": "false"},
                                   database={"connection": conf.database.connection}), apiserver)
    cat.create("p1", public=False, access=("later",))
    report = ctl.process_outbox()
    assert report.problems["p1"] == ("namespace later does not exist "
                                     "([controller] create_namespaces is off: create it, or turn the option on)")
    assert [row.attempts for row in cat.pending()] == [1, 1]  # create + addTenantAccess, both kept
    assert apiserver.handler.get("Namespace", "later") is None
    [status] = flavor_statuses(db, ctl.backend, mapping_options(conf), create_namespaces=False, flavor_id="p1")
    assert not status.in_sync and any("namespace later" in r and "create_namespaces is off" in r
                                      for r in status.reasons)
    add_namespaces(apiserver, "later")
    ctl.resync()
    assert apiserver.handler.get(IT, "p1", "later") is not None and cat.pending() == []


def test_a_project_namespace_is_created_on_demand_by_default(ctl, cat, apiserver, db, conf):
    from openkeel_compute.conf.kubevirt import mapping_options

    assert conf.controller.create_namespaces is True
    cat.create("p1", public=False, access=("new-project",))
    report = ctl.process_outbox()
    assert report.problems == {} and cat.pending() == []
    ns = apiserver.handler.get("Namespace", "new-project")
    assert ns["metadata"]["labels"] == MANAGED
    assert ns["metadata"]["annotations"] == {"openkeel.io/project-id": "new-project"}
    assert apiserver.handler.get(IT, "p1", "new-project") is not None
    assert apiserver.handler.get(PREF, "p1", "new-project") is not None
    [status] = flavor_statuses(db, ctl.backend, mapping_options(conf), create_namespaces=True, flavor_id="p1")
    assert status.in_sync, status.reasons

    cat.add_access("p1", "second")  # the full resync creates them too
    ctl.resync()
    assert apiserver.handler.get("Namespace", "second")["metadata"]["labels"] == MANAGED
    assert apiserver.handler.get(IT, "p1", "second") is not None


def test_namespaces_are_never_deleted_and_foreign_ones_never_touched(ctl, cat, apiserver):
    foreign = apiserver.handler.seed({"apiVersion": "v1", "kind": "Namespace",
                                      "metadata": {"name": "theirs", "labels": {"team": "x"}}})
    cat.create("p1", public=False, access=("ours", "theirs"))
    ctl.process_outbox()
    assert apiserver.handler.get("Namespace", "theirs") == foreign  # existed: used as it is
    assert apiserver.handler.get(IT, "p1", "theirs") is not None
    assert apiserver.handler.get("Namespace", "ours")["metadata"]["labels"] == MANAGED
    cat.remove_access("p1", "ours")
    cat.delete("p1")
    ctl.process_outbox()
    ctl.resync()
    assert apiserver.handler.objects(IT) == {} and apiserver.handler.objects(PREF) == {}
    # Emptied of our objects, both stay: servers and other people's objects may live there.
    assert apiserver.handler.get("Namespace", "ours") is not None
    assert apiserver.handler.get("Namespace", "theirs") == foreign
    assert not any(p.rstrip("/").endswith(("/namespaces/ours", "/namespaces/theirs"))
                   for _m, p, _ in apiserver.handler.writes), apiserver.handler.writes


def test_a_refused_namespace_is_reported(ctl, cat, apiserver):
    from openkeel_compute.emulator import Fault

    apiserver.handler.faults.append(Fault(403, method="POST", plural="namespaces", times=5))
    cat.create("p1", public=False, access=("forbidden",))
    report = ctl.process_outbox()
    assert "create Namespace/forbidden refused" in report.problems["p1"]
    assert apiserver.handler.objects(IT) == {}
    apiserver.handler.faults.clear()
    ctl.resync()
    assert apiserver.handler.get(IT, "p1", "forbidden") is not None


def test_flavor_id_that_is_not_a_dns_label_is_hashed(ctl, cat, apiserver):
    cat.create("Flavor_1")
    ctl.process_outbox()
    assert apiserver.handler.get(CIT, hashed_name("Flavor_1")) is not None


def test_status_lists_out_of_sync_and_leftover_objects(ctl, cat, apiserver, db, conf):
    from openkeel_compute.conf.kubevirt import mapping_options

    cat.create("a")
    cat.create("b")
    ctl.process_outbox()
    edited = apiserver.handler.get(CIT, "a")
    edited["spec"]["cpu"]["guest"] = 3
    apiserver.handler.seed(edited)
    apiserver.handler.seed({"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": CIT,
                            "metadata": {"name": "gone", "labels": MANAGED,
                                         "annotations": {"openkeel.io/flavor-id": "gone"}}, "spec": {}})
    statuses = {s.flavor_id: s for s in flavor_statuses(db, ctl.backend, mapping_options(conf))}
    assert statuses["b"].in_sync
    assert any("spec.cpu.guest" in r for r in statuses["a"].reasons)
    assert not statuses["gone"].exists and not statuses["gone"].in_sync
