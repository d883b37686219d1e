"""Cinder's ``volume-extended`` events (POST /os-server-external-events, 2.51): what Nova's compute does
with one (``extend_volume``) done on KubeVirt.

The API recorded the event and started the ``extend_volume`` instance action. Here, once per pass, each
pending event of a server: its block device of the volume (none: the volume is not attached, logged and
dropped, as Nova's compute does), the volume's size read from Cinder and kept in the mapping, then the
storage grown: the PersistentVolume's capacity and the claim's request (KubeVirt sees the claim's new
capacity and the guest its disk grow). The action's ``compute_extend_volume`` event ends Success.
Cinder away: the event stays for the next pass.

Cinder's ``volume-reimaged`` events are read by the rebuild that waits for them (steps/reimage.py); one
for a server that is gone or not rebuilding is dropped here (logged), as Nova drops an event nobody waits
for.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from openkeel_compute.compute import block_device_rows, external_events
from openkeel_compute.compute.instances import instance_actions
from openkeel_compute.controller.steps.base import Context, read_server
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.db.models import INSTANCE_ACTIONS
from openkeel_compute.kubevirt import volumes as kube_volumes

LOG = logging.getLogger(__name__)
NAMES = ("volume-extended",)
REIMAGED = "volume-reimaged"
ACTION = "extend_volume"
EVENT = "compute_extend_volume"


def consume(ctx: Context, limit: int = 500) -> None:
    _drop_unwaited(ctx, limit)
    with reader(ctx.engine) as conn:
        events = external_events.pending(conn, limit=limit, names=NAMES)
    for event in events:
        server = read_server(ctx.engine, event["instance_uuid"])
        try:
            if server is not None:
                extend(ctx, server, str(event["tag"]))
        except _CinderAway as exc:
            LOG.warning("server %s: the extend of volume %s waits for Cinder: %s", event["instance_uuid"],
                        event["tag"], exc)
            continue
        with transaction(ctx.engine) as conn:
            external_events.handled(conn, [event["id"]])


def _drop_unwaited(ctx: Context, limit: int) -> None:
    from openkeel_compute.model.states import task_states

    with reader(ctx.engine) as conn:
        events = external_events.pending(conn, limit=limit, names=(REIMAGED,))
    dropped = []
    for event in events:
        server = read_server(ctx.engine, event["instance_uuid"])
        if server is None or server.get("task_state") != task_states.REBUILDING:
            LOG.info("server %s: no rebuild waits for %s:%s, dropped", event["instance_uuid"], REIMAGED,
                     event["tag"])
            dropped.append(event["id"])
    if dropped:
        with transaction(ctx.engine) as conn:
            external_events.handled(conn, dropped)


class _CinderAway(Exception):
    pass


def extend(ctx: Context, server: dict[str, Any], volume_id: str) -> None:
    from openkeel_compute.volume import errors as volume_errors

    uuid = str(server["uuid"])
    with reader(ctx.engine) as conn:
        bdm = block_device_rows.of_volume(conn, uuid, volume_id)
    if bdm is None:
        LOG.warning("server %s: extend volume failed, volume %s is not attached to it", uuid, volume_id)
        return
    if ctx.volumes is None:
        LOG.warning("server %s: volume %s extended, but [cinder] is not configured", uuid, volume_id)
        return
    try:
        size = int(ctx.volumes.admin().get_volume(volume_id)["size"])
    except volume_errors.CinderUnavailable as exc:
        raise _CinderAway(exc.message) from None
    except volume_errors.VolumeError as exc:
        LOG.warning("server %s: extend volume %s failed: %s", uuid, volume_id, exc.message)
        _finish(ctx, uuid, server, exc.message)
        return
    with transaction(ctx.engine) as conn:
        block_device_rows.set_fields(conn, bdm["uuid"], volume_size=size)
    storage = f"{size}Gi"
    if bdm.get("attachment_id"):
        ctx.cluster.patch("PersistentVolume", "", kube_volumes.pv_name(str(bdm["attachment_id"])),
                          {"spec": {"capacity": {"storage": storage}}}, patch="merge")
    ctx.cluster.patch("PersistentVolumeClaim", ctx.namespace_of(server), kube_volumes.claim_name(volume_id),
                      {"spec": {"resources": {"requests": {"storage": storage}}}}, patch="merge")
    LOG.info("server %s: volume %s grown to %s", uuid, volume_id, storage)
    _finish(ctx, uuid, server, None)


def _finish(ctx: Context, uuid: str, server: dict[str, Any], error: str | None) -> None:
    """The ``compute_extend_volume`` event of the server's latest ``extend_volume`` action."""
    with transaction(ctx.engine) as conn:
        action_id = conn.execute(select(INSTANCE_ACTIONS.c.id).where(
            INSTANCE_ACTIONS.c.instance_uuid == uuid, INSTANCE_ACTIONS.c.action == ACTION)
            .order_by(INSTANCE_ACTIONS.c.id.desc()).limit(1)).scalar()
        if action_id is None:
            return
        event_id = instance_actions.start_event(conn, action_id, EVENT, host=server.get("host"))
        if error is None:
            instance_actions.finish_event(conn, event_id, "Success")
        else:
            instance_actions.finish_event(conn, event_id, "Error", traceback=error, details=error)
