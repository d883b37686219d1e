"""Live migrations under way while the controller process is killed (SIGKILL) and started again, each time
at another step of them: once a restarted controller leads again (its Lease), each migration is picked up
from the database and KubeVirt's VirtualMachineInstanceMigration and ends as it would have, completed or
rolled back, with nothing leaked or doubled.

Three servers on two nodes are live migrated together, one of them bound to fail in KubeVirt's transfer;
the controller is killed while the migrations are claimed or queued, again while KubeVirt prepares or runs
them, and again while they end. Then: every server ACTIVE with no task, on the node its VMI runs on; the
migrations ``completed`` (the failed one ``error``, its server on its source); Placement holds one
allocation per server, its flavor's, on the server's node, and none of a migration; one
VirtualMachineInstanceMigration per migration, each final; no live migration under way in the database."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from openkeel_compute.db import api as db_api
from openkeel_compute.db import models
from openkeel_compute.emulator.faults import Fault
from tests.conftest import admin
from tests.databases import ENGINES
from tests.reliability import test_killed_controller as killed

LIVE = {"host": None, "block_migration": "auto"}


def _statuses(engine) -> dict[str, str]:
    with db_api.reader(engine) as conn:
        return {m.instance_uuid: m.status for m in conn.execute(sa.select(
            models.MIGRATIONS.c.instance_uuid, models.MIGRATIONS.c.status).where(
            models.MIGRATIONS.c.migration_type == "live-migration"))}


def _kill_when(controller, engine, reached, timeout: float = 30.0) -> dict[str, str]:
    """Kill the controller once the live migrations' statuses satisfy ``reached``, and start another."""
    deadline = time.monotonic() + timeout
    while not reached(seen := _statuses(engine)):
        assert controller.process.poll() is None, f"the controller exited:\n{controller.tail()}"
        assert time.monotonic() < deadline, f"never reached: {seen}\n{controller.tail()}"
        time.sleep(0.01)
    controller.kill()
    controller.start()
    return seen


def _vmi_node(cluster, uuid):
    (vmi,) = [v for k, v in cluster.objects("VirtualMachineInstance").items() if k[1] == uuid]
    return vmi["status"].get("nodeName")


@pytest.mark.parametrize("engine_name", ENGINES)
def test_live_migrations_survive_a_killed_controller(engine_name, tmp_path, placement_service):
    with killed._world(engine_name, tmp_path, placement_service, nodes=2) as (client, controller, cluster, placement,
                                                                              engine):
        live = {killed._boot(client, f"kl-{i}"): "kc-small" for i in range(3)}
        s = list(live)
        killed._settle(client, controller, dict.fromkeys(s, "ACTIVE"))
        source = {uuid: killed._server(client, uuid)["OS-EXT-SRV-ATTR:host"] for uuid in s}
        delays = cluster.lifecycle.delays  # a transfer long enough for the controller to be killed in it
        cluster.lifecycle.delays = type(delays)(**{**delays.__dict__, "migration_step": 0.2,
                                                   "migration_transfer": 1.5})
        cluster.inject(Fault(kind="migration-failure", name=s[2]))
        for uuid in s:
            killed._post(client, f"/v2.1/servers/{uuid}/action", {"os-migrateLive": LIVE}, headers=admin("2.96"))
        kills = [
            _kill_when(controller, engine, lambda m: any(v in ("queued", "preparing") for v in m.values())),
            _kill_when(controller, engine, lambda m: any(v == "running" for v in m.values())),
            _kill_when(controller, engine, lambda m: any(v in ("completed", "error") for v in m.values())
                       and any(v in ("preparing", "running") for v in m.values())),
        ]
        assert all(any(v not in ("completed", "error") for v in k.values()) for k in kills), kills
        killed._settle(client, controller, dict.fromkeys(s, "ACTIVE"))

        assert _statuses(engine) == {s[0]: "completed", s[1]: "completed", s[2]: "error"}
        for uuid in s:
            host = killed._server(client, uuid)["OS-EXT-SRV-ATTR:host"]
            assert host == _vmi_node(cluster, uuid)
            assert (host == source[uuid]) == (uuid == s[2]), (uuid, host, source[uuid])
            (provider,) = placement.get_allocations(uuid).allocations
            assert placement.provider(provider)["name"] == host
        killed._check_placement(placement, live, engine)  # nothing of a migration, nothing held twice
        jobs = [o for o in cluster.objects("VirtualMachineInstanceMigration").values()]
        assert sorted(j["metadata"]["labels"]["openkeel.io/server"] for j in jobs) == sorted(s)
        assert {j["status"]["phase"] for j in jobs} <= {"Succeeded", "Failed"}
        assert controller.kills == 3
