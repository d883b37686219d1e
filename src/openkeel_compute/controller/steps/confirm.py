"""confirm-resize: the old flavor's ControllerRevisions (and the server's own instancetype and
preference of it) deleted, the migration's allocation given back,
the server ``active`` or ``stopped`` by its power state. And the periodic confirmation of resizes that
waited longer than ``resize_confirm_window`` (Nova's option and periodic task)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from sqlalchemy import select

from openkeel_compute.compute import errors, resize, working_state
from openkeel_compute.compute.instances import store
from openkeel_compute.compute.instances.base import Actor, new_request_id
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.steps import vm_edits
from openkeel_compute.controller.steps.base import DONE, Context, Outcome, ServerRow, read_server
from openkeel_compute.controller.steps.resize import Moot, end_event, start_event
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.db.models import INSTANCES, MIGRATIONS
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.placement.errors import PlacementError

LOG = logging.getLogger(__name__)


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    uuid, namespace = row.server_uuid, ctx.namespace_of(server)
    migration = row.payload["migration"]
    vm, _vmi, _dvs = ctx.cluster.look(namespace, uuid)
    _drop_old_revisions(ctx, uuid, namespace, vm)
    try:
        with transaction(ctx.engine) as conn:
            # its event starts with the server still resized (resize_confirm.start shows it), ends confirmed
            start_event(conn, row, events.CONFIRM_RESIZE, host=server.get("host"))
            if not resize.confirmed(conn, uuid, migration, power_state=server["power_state"]):
                raise Moot  # confirmed or reset meanwhile: nothing recorded
            ctx.allocations.confirm(migration)
            working_state.put(conn, uuid, sysmeta.RESIZE_FROM, None)
            working_state.put(conn, uuid, sysmeta.RESIZE_NODES, None)
            end_event(conn, uuid, host=server.get("host"))
    except Moot:
        pass
    return DONE


def _drop_old_revisions(ctx: Context, uuid: str, namespace: str, vm: dict[str, Any] | None) -> None:
    """Delete the old flavor's ControllerRevisions the VM no longer uses (a revert is no longer possible)."""
    with reader(ctx.engine) as conn:
        before = json.loads(working_state.get(conn, uuid, sysmeta.RESIZE_FROM) or "{}")
    if vm is not None:
        keep = {(vm_edits.status_ref(vm, f).get("controllerRevisionRef") or {}).get("name") for f in vm_edits.MATCHERS}
        for field in vm_edits.MATCHERS:
            old = (before.get(field) or {}).get("revision")
            if old and old not in keep:
                ctx.cluster.delete(ObjectKey("ControllerRevision", namespace, old))
        vm_edits.drop_unused_sizing(ctx, namespace, uuid, vm)


def close_reset(ctx: Context) -> list[str]:
    """The resizes whose server left VERIFY_RESIZE by an administrator's os-resetState (the migration is
    still ``finished``, the server no longer ``resized``): as Nova's periodic check of unconfirmed
    resizes, the migration goes to ``error`` ("In states …, not RESIZED/None"; a task running on a
    server still ``resized`` is left alone, where Nova's check closes that resize too); and, where Nova keeps
    the migration's allocation until the server is deleted, the old flavor's allocation is given back
    at once (the server runs and is counted at its new flavor, and nothing can revert it any more), as
    are the old flavor's ControllerRevisions and the resize's working state. Nova does it only with
    ``resize_confirm_window``; here every pass. Returns the servers' uuids."""
    with reader(ctx.engine) as conn:
        found = [(r[0], r[1], r[2], r[3]) for r in conn.execute(
            select(MIGRATIONS.c.uuid, MIGRATIONS.c.instance_uuid, INSTANCES.c.vm_state, INSTANCES.c.task_state)
            .join(INSTANCES, INSTANCES.c.uuid == MIGRATIONS.c.instance_uuid)
            .where(MIGRATIONS.c.status == "finished", MIGRATIONS.c.deleted == 0, INSTANCES.c.deleted == 0,
                   INSTANCES.c.vm_state != states.RESIZED))]
    done = []
    for migration, uuid, vm_state, task_state in found:
        # The cluster first, while the migration is still ``finished``: a controller killed after any
        # step finds it again at its next pass and does the rest (each step is idempotent); closed first,
        # the old flavor's revisions, copies and working state would be left behind for good.
        server = read_server(ctx.engine, uuid)
        if server is not None:
            namespace = ctx.namespace_of(server)
            try:
                _drop_old_revisions(ctx, uuid, namespace, ctx.cluster.look(namespace, uuid)[0])
            except Exception as exc:  # noqa: BLE001 - the cluster away: tried again at the next pass
                LOG.warning("server %s: the old flavor's revisions not deleted yet: %s", uuid, exc)
                continue
        with transaction(ctx.engine) as conn:
            if not resize.move_migration(conn, migration, "error", expected="finished"):
                continue  # confirmed, reverted or closed meanwhile
            # given back before the migration's close commits: a controller killed in between finds
            # the migration still finished at its next pass (the give-back is idempotent)
            try:
                ctx.allocations.confirm(migration)
            except PlacementError as exc:  # the migration is over: the audit gives them back later
                LOG.warning("server %s: migration %s's allocations not given back yet: %s", uuid, migration,
                            exc.message)
            working_state.put(conn, uuid, sysmeta.RESIZE_FROM, None)
            working_state.put(conn, uuid, sysmeta.RESIZE_NODES, None)
        LOG.warning("server %s: in states %s/%s, not RESIZED/None: migration %s set to error, the old flavor's "
                    "resources given back", uuid, vm_state, task_state, migration)
        done.append(uuid)
    return done


def auto_confirm(ctx: Context, window: float) -> list[str]:
    """Confirm the resizes that waited longer than ``window`` seconds (Nova's resize_confirm_window and
    its periodic task: an admin's confirmResize, recorded as an instance action). Returns the uuids."""
    if window <= 0:
        return []
    cutoff = ctx.now() - dt.timedelta(seconds=window)
    with reader(ctx.engine) as conn:
        due = [r[0] for r in conn.execute(
            select(MIGRATIONS.c.instance_uuid).where(MIGRATIONS.c.status == "finished", MIGRATIONS.c.deleted == 0,
                                                     MIGRATIONS.c.updated_at <= cutoff))]
    done = []
    for uuid in due:
        # an admin's confirmResize with no user and no project: Nova's periodic task's context
        actor = Actor(None, None, is_admin=True, request_id=new_request_id())  # type: ignore[arg-type]
        try:
            with transaction(ctx.engine) as conn:
                resize.confirm(conn, store.get(conn, uuid), actor)
        except errors.ComputeError as exc:  # not in VERIFY_RESIZE any more, or confirmed meanwhile
            LOG.info("server %s: resize not confirmed automatically: %s", uuid, exc)
            continue
        done.append(uuid)
    return done
