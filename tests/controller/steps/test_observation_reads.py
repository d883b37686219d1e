"""What one pass reads: a pass's servers read together (``read_servers``, as ``read_server`` reads each), and
an observation that asks the cluster only where the watches may lag an object the controller made. A
build whose create row has not run is observed as the watch cache shows it, with no read of the cluster:
a thousand builds waiting for their rows would otherwise list the whole cluster on every pass."""

from __future__ import annotations

import dataclasses
from typing import Any

from openkeel_compute.compute import working_state
from openkeel_compute.compute.instances import cas
from openkeel_compute.controller.observe import Observer, utc_now
from openkeel_compute.controller.steps.base import read_server, read_servers
from openkeel_compute.controller.watch import Snapshot
from openkeel_compute.db import api as db_api
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states
from tests.controller.helpers import boot, row_of


class _Counting:
    """The fake cluster, counting what the observation reads from it."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def look(self, namespace: str, uuid: str) -> Any:
        self.reads.append(f"look {uuid}")
        return self.cluster.look(namespace, uuid)

    def leftovers(self, namespace: str, uuid: str) -> list[str]:
        return []  # nothing of a deleted server is left: its delete completes

    def snapshot(self) -> Snapshot:
        self.reads.append("snapshot")
        return Snapshot({}, {}, {})


def test_a_pass_reads_its_servers_together_as_one_read_each(db):
    first, second, gone = boot(db, image_hw_disk_bus="scsi"), boot(db), boot(db)
    with db_api.transaction(db) as conn:
        working_state.put(conn, first, sysmeta.TRIED_NODES, "node-1")
        cas.save_state(conn, gone, deleted=1)
    together = read_servers(db, [second, gone, first, second])
    assert list(together) == [second, first]  # in the order asked, once each; a deleted one is not there
    for uuid in (first, second):
        assert together[uuid] == read_server(db, uuid)
    assert together[first]["working_state"] == {sysmeta.TRIED_NODES: "node-1"}
    assert together[first]["system_metadata"]["image_hw_disk_bus"] == "scsi"
    assert read_servers(db, []) == {}


def test_a_build_whose_objects_were_never_made_is_observed_without_reading_the_cluster(ctx, db, cluster):
    counting = _Counting(cluster)
    ctx = dataclasses.replace(ctx, cluster=counting, now=utc_now)  # no build has timed out
    waiting = boot(db)  # its create row has not run: no vm_name
    made = boot(db)
    with db_api.transaction(db) as conn:
        cas.save_state(conn, made, namespace="p", vm_name=made)  # made by an earlier pass
    cached = Snapshot({}, {}, {}, cached=True)  # the watches show neither VM yet
    Observer(lambda: 0.0).observe_all(ctx, lambda: cached, {}, set())
    assert counting.reads and set(counting.reads) == {f"look {made}"}  # only the one the controller made
    assert (row_of(db, waiting)["vm_state"], row_of(db, waiting)["task_state"]) == (
        states.BUILDING, task_states.SCHEDULING)


def test_a_deleted_build_is_still_asked_for(ctx, db, cluster):
    counting = _Counting(cluster)
    ctx = dataclasses.replace(ctx, cluster=counting, now=utc_now)
    deleting = boot(db)
    with db_api.transaction(db) as conn:
        cas.save_state(conn, deleting, task_state=task_states.DELETING)
    Observer(lambda: 0.0).observe_all(ctx, lambda: Snapshot({}, {}, {}, cached=True), {}, set())
    assert counting.reads and set(counting.reads) == {f"look {deleting}"}  # its objects may be there


def test_the_events_of_a_pass_are_started_with_one_read_for_all_its_rows(db):
    """tasks.start_all: what every row reads first is read once for the pass; a server's second row in the
    same pass still sees the event its first row started (a delete ends it as "Error"), a row started by
    an earlier attempt starts nothing again, and a server never created starts nothing."""
    from openkeel_compute.compute.instances import instance_actions, instance_sysmeta
    from openkeel_compute.controller import tasks
    from openkeel_compute.model import events
    from tests.controller.helpers import OWNER

    first, second = boot(db), boot(db)
    with db_api.transaction(db) as conn:
        tasks.start_all(conn, [(7, first, OWNER.request_id, events.BUILD), (8, second, OWNER.request_id, events.BUILD),
                               (9, first, OWNER.request_id, events.TERMINATE), (10, "never-made", "req-x", events.BUILD)])
    with db_api.transaction(db) as conn:
        tasks.start_all(conn, [(8, second, OWNER.request_id, events.BUILD)])  # tried again: nothing new
    with db_api.reader(db) as conn:
        built = instance_actions.get_action(conn, first, OWNER.request_id)["events"]
        assert sorted((e["event"], e["result"]) for e in built) == [
            (events.BUILD, "Error"), (events.TERMINATE, None)]
        terminate = next(e for e in built if e["event"] == events.TERMINATE)
        assert instance_sysmeta.system_metadata_item(conn, first, sysmeta.TASK_EVENT) == f"9:{terminate['id']}"
        assert [e["event"] for e in instance_actions.get_action(conn, second, OWNER.request_id)["events"]] == [
            events.BUILD]
        assert instance_sysmeta.system_metadata_item(conn, second, sysmeta.TASK_EVENT).startswith("8:")
