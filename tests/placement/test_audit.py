"""The allocations audit against a real Placement: leaks given back, missing allocations claimed again,
migrations under way and soft-deleted servers left alone; ``--dry-run`` changes nothing; the CLI prints it."""

from __future__ import annotations

import uuid as uuidlib

import sqlalchemy as sa

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.cmd.main import main
from openkeel_compute.compute.instances import cas, store
from openkeel_compute.controller import audit, providers
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration, models
from openkeel_compute.emulator.server import node
from openkeel_compute.model import states
from openkeel_compute.placement.client import PlacementClient
from tests.conftest import make_conf, placement_overrides
from tests.controller.helpers import IMAGE, OWNER
from tests.server_world import reset_placement


def _server(engine, *, node_name=None, vm_state=states.ACTIVE) -> str:
    flavorid = f"f-{uuidlib.uuid4().hex[:8]}"
    with db_api.transaction(engine) as conn:
        catalog.create(conn, name=flavorid, memory_mb=512, vcpus=2, root_gb=1, flavorid=flavorid)
        row = store.create(conn, actor=OWNER, flavor=catalog.get(conn, flavorid), extra_specs={},
                           display_name="s", image_ref=IMAGE, system_metadata={"image_disk_format": "qcow2"})
        cas.save_state(conn, row["uuid"], vm_state=vm_state, task_state=None, node=node_name, host=node_name)
    return row["uuid"]


def test_audit_repairs_leaks_and_missing_allocations(tmp_path, placement_service, capsys):
    conf = make_conf(tmp_path, placement=placement_overrides(placement_service))
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    placement = PlacementClient.from_conf(conf)
    reset_placement(placement)
    providers.sync(placement, [node("n1")])
    rp = providers.provider_uuid("n1")
    try:
        def claim(consumer, **resources):
            placement.put_allocations(consumer, {rp: resources or {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}},
                                      project_id=OWNER.project_id, user_id=OWNER.user_id, consumer_generation=None)

        healthy = _server(engine, node_name="n1")
        claim(healthy)
        soft_deleted = _server(engine, node_name="n1", vm_state=states.SOFT_DELETED)
        claim(soft_deleted)
        unheld = _server(engine, node_name="n1")  # its allocation was lost
        failed = _server(engine, vm_state=states.ERROR)  # failed before it got a node: holds nothing
        leaked = str(uuidlib.uuid4())
        claim(leaked, VCPU=1)
        moving, done = str(uuidlib.uuid4()), str(uuidlib.uuid4())
        claim(moving, VCPU=1)
        claim(done, VCPU=1)
        with db_api.transaction(engine) as conn:
            conn.execute(sa.insert(models.MIGRATIONS), [
                {"uuid": moving, "instance_uuid": healthy, "status": "finished", "migration_type": "resize",
                 "deleted": 0},
                {"uuid": done, "instance_uuid": healthy, "status": "confirmed", "migration_type": "resize",
                 "deleted": 0}])

        dry = audit.audit(engine, placement, dry_run=True)
        assert set(dry.leaked) == {leaked, done}
        assert dry.missing == {unheld: "n1"}
        assert placement.get_allocations(leaked).allocations  # nothing changed
        assert placement.get_allocations(unheld).allocations == {}
        assert main(["placement", "audit", "--config-file", conf.config_file[0], "--dry-run"]) == 0
        printed = capsys.readouterr().out
        assert f"leaked allocations of consumer {leaked} ({rp}: VCPU=1): would give back" in printed
        assert f"server {unheld} on node n1 held no allocation: would claim its flavor's resources there" in printed

        report = audit.audit(engine, placement)
        assert set(report.leaked) == {leaked, done} and report.missing == {unheld: "n1"} and not report.failed
        assert placement.get_allocations(leaked).allocations == {}
        assert placement.get_allocations(done).allocations == {}
        assert placement.get_allocations(moving).allocations == {rp: {"VCPU": 1}}
        assert placement.get_allocations(unheld).allocations == {rp: {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}}
        assert placement.get_allocations(soft_deleted).allocations
        assert placement.get_allocations(failed).allocations == {}
        # a second pass finds nothing
        assert audit.audit(engine, placement).lines() == [
            "Placement's allocations and the servers agree: nothing to repair"]
        assert main(["placement", "audit", "--config-file", conf.config_file[0]]) == 0
        assert "nothing to repair" in capsys.readouterr().out
    finally:
        reset_placement(placement)
        db_api.dispose_all()


def _world(tmp_path, placement_service):
    conf = make_conf(tmp_path, placement=placement_overrides(placement_service))
    engine = db_api.get_engine(conf)
    migration.sync(engine)
    placement = PlacementClient.from_conf(conf)
    reset_placement(placement)
    providers.sync(placement, [node("n1"), node("n2")])
    return engine, placement, conf


def test_a_server_mid_resize_is_left_alone_and_amounts_are_compared(tmp_path, placement_service, capsys):
    """Issue 27.11: a resize moves the old flavor to its migration and claims the new one in one request
    (the server never holds nothing), the audit leaves a server with a move under way alone, and a
    server holding other amounts than its flavor's gets its flavor's."""
    from openkeel_compute.controller.claims import NoValidHost
    from openkeel_compute.controller.resize_allocations import Allocations

    engine, placement, conf = _world(tmp_path, placement_service)
    rp1 = providers.provider_uuid("n1")
    old = {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}
    try:
        resizing, shrunk = _server(engine, node_name="n1"), _server(engine, node_name="n1")
        for uuid, resources in ((resizing, old), (shrunk, {"VCPU": 2, "MEMORY_MB": 256, "DISK_GB": 1})):
            placement.put_allocations(uuid, {rp1: resources}, project_id=OWNER.project_id, user_id=OWNER.user_id,
                                      consumer_generation=None)
        audits = []

        class AuditedMeanwhile(PlacementClient):
            """The real Placement; the audit runs while the resize looks for candidates (between its
            reads and its claim), as the controller's audit thread may."""

            def allocation_candidates(self, query, limit=None):
                audits.append(audit.audit(engine, placement))
                return super().allocation_candidates(query, limit)

        moves, move = Allocations(AuditedMeanwhile.from_conf(conf)), str(uuidlib.uuid4())
        with db_api.transaction(engine) as conn:
            conn.execute(sa.insert(models.MIGRATIONS).values(uuid=move, instance_uuid=resizing, status="pre-migrating",
                                                             migration_type="resize", deleted=0))
        huge = {"vcpus": 1000, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}
        try:
            moves.resize(resizing, move, huge)
        except NoValidHost:
            pass
        else:
            raise AssertionError("a flavor no node can take was claimed")
        # nothing moved: a resize refused by Placement leaves the server with its flavor
        assert placement.get_allocations(resizing).allocations == {rp1: old}
        assert placement.get_allocations(move).allocations == {}
        large = {"vcpus": 4, "memory_mb": 1024, "root_gb": 2, "ephemeral_gb": 0, "swap": 0}
        provider = moves.resize(resizing, move, large)
        new = {provider: {"VCPU": 4, "MEMORY_MB": 1024, "DISK_GB": 2}}
        assert placement.get_allocations(resizing).allocations == new
        assert placement.get_allocations(move).allocations == {rp1: old}
        assert len(audits) == 2 and not any(resizing in a.missing or resizing in a.mismatched for a in audits)
        placement.put_allocations(shrunk, {rp1: {"VCPU": 2, "MEMORY_MB": 256, "DISK_GB": 1}},  # the audits healed it
                                  project_id=OWNER.project_id, user_id=OWNER.user_id,
                                  consumer_generation=placement.get_allocations(shrunk).generation)

        dry = audit.audit(engine, placement, dry_run=True)
        assert dry.mismatched == {shrunk: ({"VCPU": 2, "MEMORY_MB": 256, "DISK_GB": 1}, old)}
        assert not dry.missing and not dry.leaked  # the resizing server holds the new flavor: its move's business
        assert main(["placement", "audit", "--config-file", conf.config_file[0], "--dry-run"]) == 0
        assert (f"server {shrunk} held DISK_GB=1, MEMORY_MB=256, VCPU=2 instead of its flavor's DISK_GB=1, "
                "MEMORY_MB=512, VCPU=2: would replace them") in capsys.readouterr().out
        report = audit.audit(engine, placement)
        assert set(report.mismatched) == {shrunk} and not report.failed
        assert placement.get_allocations(shrunk).allocations == {rp1: old}
        assert placement.get_allocations(resizing).allocations == new  # untouched mid-resize
        assert placement.get_allocations(move).allocations == {rp1: old}
        assert audit.audit(engine, placement).lines() == [
            "Placement's allocations and the servers agree: nothing to repair"]
    finally:
        reset_placement(placement)
        db_api.dispose_all()
