"""Where a server runs (controller/steps/placing.py) on its own: a fake of the Placement claims, the fake
cluster and the steps' context (this folder's conftest.py). What each function writes to the server's row,
asks of the cluster and answers. tests/controller/test_server_placement*.py drive it end to end."""

from __future__ import annotations

import dataclasses
from typing import Any

from openkeel_compute.compute import working_state
from openkeel_compute.compute.host_filters import FilterOptions
from openkeel_compute.compute.instances import cas, instance_faults
from openkeel_compute.controller.claims import NoValidHost
from openkeel_compute.controller.steps import placing
from openkeel_compute.controller.steps.base import read_server
from openkeel_compute.db import api as db_api
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.model import states, sysmeta
from openkeel_compute.model.states import task_states
from tests.controller.helpers import boot, row_of


class FakeClaims:
    """Placement's claims at the interface the placing functions use."""

    def __init__(self, node: str | None = "node-1", moves: list[str | None] | None = None,
                 max_attempts: int = 3) -> None:
        self.node = node  # what ``claim`` answers (None: NoValidHost)
        self.moves = list(moves or [])  # what each ``move`` answers, in turn
        self.max_attempts = max_attempts
        self.excluded: list[set[str]] = []

    def claim(self, server: dict[str, Any]) -> tuple[str, list]:
        if self.node is None:
            raise NoValidHost("no node has room")
        return self.node, []

    def move(self, server: dict[str, Any], exclude: set[str], usable=None) -> str | None:
        """Records the nodes refused: those excluded and those of node-1..3 ``usable`` refuses."""
        refused = {n for n in ("node-1", "node-2", "node-3") if usable is not None and not usable(n)}
        self.excluded.append(set(exclude) | refused)
        return self.moves.pop(0)


def _server(db, uuid: str, **state: Any) -> dict[str, Any]:
    if state:
        with db_api.transaction(db) as conn:
            cas.save_state(conn, uuid, **state)
    server = read_server(db, uuid)
    assert server is not None
    return server


def _faults(db, uuid: str) -> dict | None:
    with db_api.reader(db) as conn:
        return instance_faults.latest_faults(conn, [uuid]).get(uuid)


def _vm(cluster, uuid: str) -> None:
    cluster.vms[uuid] = {"metadata": {"name": server_vm_name(uuid), "uid": "vm-1"}, "spec": {}}


# -- claim --------------------------------------------------------------------------------------------

def test_a_claim_names_the_node_as_the_servers_host_and_node(ctx, db, cluster):
    uuid = boot(db)
    server = _server(db, uuid, task_state=task_states.SCHEDULING)
    assert placing.claim(dataclasses.replace(ctx, claims=FakeClaims("node-7")), server) is None
    assert (server["host"], server["node"]) == ("node-7", "node-7")
    assert (row_of(db, uuid)["host"], row_of(db, uuid)["node"]) == ("node-7", "node-7")
    assert cluster.calls == []


def test_a_claim_no_node_can_take_ends_the_build_in_error_with_no_valid_host(ctx, db, cluster):
    uuid = boot(db)
    server = _server(db, uuid, task_state=task_states.SCHEDULING)
    fault = placing.claim(dataclasses.replace(ctx, claims=FakeClaims(None)), server)
    assert fault is not None and fault.code == 500 and fault.message == "No valid host was found. "
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"], row["node"]) == (states.ERROR, None, None)
    recorded = _faults(db, uuid)
    assert recorded is not None and recorded["message"] == fault.message and recorded["code"] == 500
    assert cluster.calls == []


# -- start where it can run ---------------------------------------------------------------------------

def test_a_start_on_a_node_that_exists_moves_nothing(ctx, db, cluster):
    uuid = boot(db)
    cluster.nodes.add("node-1")
    claims = FakeClaims(moves=["node-2"])
    server = _server(db, uuid, vm_state=states.STOPPED, task_state=task_states.POWERING_ON, host="node-1",
                     node="node-1")
    assert placing.start_where_it_can_run(dataclasses.replace(ctx, claims=claims), server) is None
    assert claims.excluded == [] and cluster.calls == [] and row_of(db, uuid)["node"] == "node-1"


def test_a_start_of_a_server_whose_node_is_gone_pins_it_to_the_node_placement_gives(ctx, db, cluster):
    uuid = boot(db)
    _vm(cluster, uuid)
    claims = FakeClaims(moves=["node-2"])
    server = _server(db, uuid, vm_state=states.STOPPED, task_state=task_states.POWERING_ON, host="node-1",
                     node="node-1")
    assert placing.start_where_it_can_run(dataclasses.replace(ctx, claims=claims), server) is None
    assert claims.excluded == [{"node-1"}]
    assert "VirtualMachine" in [c[1] for c in cluster.calls if c[0] == "apply"]  # the VM pinned again
    assert (server["node"], row_of(db, uuid)["host"], row_of(db, uuid)["node"]) == ("node-2", "node-2", "node-2")


def test_a_start_no_other_node_can_take_fails_as_nova_s_start_and_moves_nothing(ctx, db, cluster):
    uuid = boot(db)
    server = _server(db, uuid, vm_state=states.STOPPED, task_state=task_states.POWERING_ON, host="node-1",
                     node="node-1")
    fault = placing.start_where_it_can_run(dataclasses.replace(ctx, claims=FakeClaims(moves=[None])), server)
    assert fault is not None and fault.message == "No valid host was found. "
    assert "node-1" in fault.details
    row = row_of(db, uuid)
    assert (row["vm_state"], row["task_state"], row["node"]) == (states.STOPPED, None, "node-1")
    assert _faults(db, uuid)["message"] == fault.message and cluster.calls == []


def test_without_placement_a_start_is_not_moved(ctx, db, cluster):
    uuid = boot(db)
    server = _server(db, uuid, vm_state=states.STOPPED, host="node-1", node="node-1")
    assert placing.start_where_it_can_run(ctx, server) is None and cluster.calls == []


# -- make again ---------------------------------------------------------------------------------------

def test_a_server_whose_vm_exists_is_not_made_again(ctx, db, cluster):
    uuid = boot(db)
    _vm(cluster, uuid)
    assert placing.make_again(ctx, _server(db, uuid)) is False and cluster.calls == []


def test_a_server_whose_vm_is_gone_gets_its_objects_again_but_is_not_started(ctx, db, cluster):
    uuid = boot(db)
    assert placing.make_again(ctx, _server(db, uuid)) is True
    kinds = [c[1] for c in cluster.calls if c[0] == "apply"]
    assert cluster.calls[0][0] == "namespace" and "Secret" in kinds and "VirtualMachine" in kinds
    assert cluster.verbs() == []


# -- alternates ---------------------------------------------------------------------------------------

def test_a_build_that_cannot_run_moves_to_an_alternate_and_restarts_there(ctx, db, cluster):
    uuid = boot(db)
    _vm(cluster, uuid)
    claims = FakeClaims(moves=["node-2", "node-3"], max_attempts=3)
    server = _server(db, uuid, host="node-1", node="node-1")
    assert placing.try_alternate(dataclasses.replace(ctx, claims=claims), server, "project-1") is True
    assert claims.excluded == [{"node-1"}] and cluster.verbs() == ["restart"]
    assert row_of(db, uuid)["node"] == "node-2"
    with db_api.reader(db) as conn:
        assert working_state.get(conn, uuid, sysmeta.TRIED_NODES) == "node-1,node-2"
    # the next try excludes every node tried; then max_attempts nodes were tried: no more
    assert placing.try_alternate(dataclasses.replace(ctx, claims=claims), _server(db, uuid), "project-1") is True
    assert claims.excluded[-1] == {"node-1", "node-2"} and row_of(db, uuid)["node"] == "node-3"
    calls = len(cluster.calls)
    assert placing.try_alternate(dataclasses.replace(ctx, claims=claims), _server(db, uuid), "project-1") is False
    assert len(claims.excluded) == 2 and len(cluster.calls) == calls


def test_a_build_no_other_node_can_take_stays_where_it_is(ctx, db, cluster):
    uuid = boot(db)
    server = _server(db, uuid, host="node-1", node="node-1")
    claims = FakeClaims(moves=[None])
    assert placing.try_alternate(dataclasses.replace(ctx, claims=claims), server, "project-1") is False
    assert row_of(db, uuid)["node"] == "node-1" and cluster.calls == []
    with db_api.reader(db) as conn:
        assert working_state.get(conn, uuid, sysmeta.TRIED_NODES) is None


def _isolating(ctx, claims):
    """The context with IsolatedHostsFilter keeping node-2 for isolated images (none is: it takes nothing)."""
    settings = dataclasses.replace(ctx.settings, enabled_filters=("ComputeFilter", "IsolatedHostsFilter"),
                                   filter_options=FilterOptions(isolated_hosts=("node-2",)))
    return dataclasses.replace(ctx, claims=claims, settings=settings)


def test_an_alternate_is_one_the_scheduler_filters_let_pass(ctx, db, cluster):
    uuid = boot(db)
    _vm(cluster, uuid)
    claims = FakeClaims(moves=["node-3"])
    assert placing.try_alternate(_isolating(ctx, claims), _server(db, uuid, host="node-1", node="node-1"),
                                 "project-1") is True
    assert claims.excluded == [{"node-1", "node-2"}]  # node-2 refused by the filter


def test_a_start_away_from_a_gone_node_goes_where_the_filters_let_it(ctx, db, cluster):
    uuid = boot(db)
    _vm(cluster, uuid)
    claims = FakeClaims(moves=["node-3"])
    server = _server(db, uuid, vm_state=states.STOPPED, task_state=task_states.POWERING_ON, host="gone-node",
                     node="gone-node")
    assert placing.start_where_it_can_run(_isolating(ctx, claims), server) is None
    assert claims.excluded == [{"gone-node", "node-2"}] and row_of(db, uuid)["node"] == "node-3"


# -- server groups ------------------------------------------------------------------------------------

class GroupClaims(FakeClaims):
    def __init__(self, node: str | None = "node-1", moves: list[str | None] | None = None) -> None:
        super().__init__(node, moves)
        self.released: list[str] = []

    def release(self, uuid: str) -> bool:
        self.released.append(uuid)
        return True


def _group(db, policy: str, *members: tuple[str, str | None], rules: dict | None = None) -> list[str]:
    """A group with ``members`` (server uuid, node) plus a new member, whose uuid is returned last."""
    from openkeel_compute.compute import server_groups

    with db_api.transaction(db) as conn:
        group = server_groups.create(conn, name="g", project_id="p", user_id="u", policy=policy, rules=rules)
    uuids = []
    for node in [m[1] for m in members] + [None]:
        uuid = boot(db)
        if node:
            _server(db, uuid, host=node, node=node)
        with db_api.transaction(db) as conn:
            server_groups.add_member(conn, group["id"], uuid)
        uuids.append(uuid)
    return uuids


def test_an_anti_affinity_member_claimed_beside_another_moves_to_a_free_node(ctx, db):
    *_, uuid = _group(db, "anti-affinity", ("x", "node-1"))
    claims = GroupClaims("node-1", moves=["node-2"])
    server = _server(db, uuid, task_state=task_states.SCHEDULING)
    assert placing.claim(dataclasses.replace(ctx, claims=claims), server) is None
    assert row_of(db, uuid)["node"] == "node-2" and claims.excluded == [{"node-1"}]


def test_max_server_per_host_lets_two_share_a_node(ctx, db):
    *_, uuid = _group(db, "anti-affinity", ("x", "node-1"), rules={"max_server_per_host": 2})
    claims = GroupClaims("node-1")
    assert placing.claim(dataclasses.replace(ctx, claims=claims), _server(db, uuid)) is None
    assert row_of(db, uuid)["node"] == "node-1" and claims.excluded == []


def test_a_hard_policy_no_node_satisfies_gives_the_claim_back_and_fails_the_build(ctx, db):
    *_, uuid = _group(db, "anti-affinity", ("x", "node-1"))
    claims = GroupClaims("node-1", moves=[None])
    fault = placing.claim(dataclasses.replace(ctx, claims=claims), _server(db, uuid, task_state=task_states.SCHEDULING))
    assert fault is not None and fault.message == "No valid host was found. "
    assert claims.released == [uuid] and row_of(db, uuid)["vm_state"] == states.ERROR


def test_a_soft_policy_keeps_the_node_when_no_other_satisfies_it(ctx, db):
    *_, uuid = _group(db, "soft-anti-affinity", ("x", "node-1"))
    claims = GroupClaims("node-1", moves=[None])
    assert placing.claim(dataclasses.replace(ctx, claims=claims), _server(db, uuid)) is None
    assert row_of(db, uuid)["node"] == "node-1" and claims.released == []


def test_an_affinity_member_follows_the_others(ctx, db):
    from openkeel_compute.db import models

    with db_api.transaction(db) as conn:
        for node in ("node-1", "node-2", "node-3"):
            conn.execute(models.COMPUTE_SERVICES.insert().values(
                uuid=node + "-uuid", host=node, binary="nova-compute", vcpus=0, memory_mb=0, local_gb=0,
                hypervisor_version=0, created_at=models.utcnow()))
    *_, uuid = _group(db, "affinity", ("x", "node-2"))
    claims = GroupClaims("node-1", moves=["node-2"])
    assert placing.claim(dataclasses.replace(ctx, claims=claims), _server(db, uuid)) is None
    assert row_of(db, uuid)["node"] == "node-2" and claims.excluded == [{"node-1", "node-3"}]
