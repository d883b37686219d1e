"""Server notifications: ``compute.instance.*`` (legacy) and ``instance.*`` (versioned), as Nova sends them.

``[notifications] notification_format`` says which: ``unversioned`` (Nova's default) the legacy ones on
oslo.messaging's ``[oslo_messaging_notifications] topics``, ``versioned`` the versioned ones on
``versioned_notifications_topics``, ``both`` both. Nothing is sent with ``driver = noop`` (the default).

When (the hooks are in notifications/server_events.py):

- an operation's compute step starts and ends: ``EVENTS`` maps each instance-action event to Nova's
  notification (``compute_stop_instance`` -> ``power_off``): ``.start`` when the event starts,
  ``.end`` when it ends in success, ``.error`` (where Nova has one) when it ends in error. A delete also
  sends ``shutdown.start``/``.end`` inside ``delete``'s, as Nova's compute does;
- the API's own events: ``instance.lock`` / ``instance.unlock`` (no phase, publisher ``nova-api``);
- a server's row is written (``notify_on_state_change`` set): ``instance.update``, as Nova's
  ``Instance.save()``: the state fields show the state change, or the task change with
  ``vm_and_task_state``;
- the periodic usage audit: ``exists`` (controller/usage_audit.py).

Publishers as Nova's: compute steps and updates ``nova-compute:<host>`` / ``compute.<host>`` (the
server's node), the API's events ``nova-api:<host>``. The request context (request id, user, project) is
the instance action's, so a step the controller runs carries the request that asked for it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from typing import Any

from oslo_config import cfg
from sqlalchemy import Engine, select

from openkeel_compute.db.api import reader
from openkeel_compute.db.models import (
    BLOCK_DEVICE_MAPPING,
    INSTANCE_ACTIONS,
    INSTANCE_ACTIONS_EVENTS,
    INSTANCE_METADATA,
    INSTANCE_SYSTEM_METADATA,
    KEY_PAIRS,
    OUTBOX,
)
from openkeel_compute.model import events as ev
from openkeel_compute.model import operations as ops
from openkeel_compute.model import sysmeta
from openkeel_compute.notifications import server_payload as sp
from openkeel_compute.notifications.base import VersionedNotifier, legacy_notifications_enabled
from openkeel_compute.notifications.sender import BackgroundSender

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Event:
    action: str  # versioned: instance.<action>.<phase>
    legacy: str | None  # legacy: compute.instance.<legacy>.<phase>; None: no legacy notification
    kind: str = "action"  # the payload (server_payload.PAYLOADS)
    error: bool = False  # Nova sends .error when the step fails
    api: bool = False  # an API event without phase (lock, unlock)
    exists_first: bool = False  # Nova's compute sends the usage so far (exists) before .start
    exists_before_end: bool = False  # ... or once the driver is done, before .end (a rescue)
    #: with ``error``: only a failure whose message starts so sends .error (Nova's compute sends
    #: interface_attach.error when its driver failed, not when Neutron refused the port)
    error_on: str | None = None
    #: .start is sent by the step at its own stage (server_events.step_started), not when the event starts
    start_at_step: bool = False
    #: the phases this event notifies (a revert's start is its first event's, its end its last one's)
    phases: tuple[str, ...] = ("start", "end")


EVENTS: dict[str, Event] = {
    # the build's event starts with its row; Nova's compute sends create.start once the node is chosen
    ev.BUILD: Event("create", "create", "create", error=True, start_at_step=True),
    ev.TERMINATE: Event("delete", "delete"),
    ev.START: Event("power_on", "power_on"),
    ev.STOP: Event("power_off", "power_off"),
    ev.REBOOT: Event("reboot", "reboot", error=True, start_at_step=True),  # once pending (steps/reboot.py)
    ev.PAUSE: Event("pause", "pause"),
    ev.UNPAUSE: Event("unpause", "unpause"),
    ev.SUSPEND: Event("suspend", "suspend"),
    ev.RESUME: Event("resume", "resume"),
    ev.REBUILD: Event("rebuild", "rebuild", "rebuild", error=True, exists_first=True),
    ev.SOFT_DELETE: Event("soft_delete", "soft_delete"),
    ev.RESTORE: Event("restore", "restore"),
    ev.PREP_RESIZE: Event("resize_prep", "resize.prep", "resize_prep", exists_first=True),
    ev.RESIZE: Event("resize", "resize", error=True),
    ev.FINISH_RESIZE: Event("resize_finish", "finish_resize"),
    ev.CONFIRM_RESIZE: Event("resize_confirm", "resize.confirm"),
    # Nova's revert_resize sends the start, finish_revert_resize (the revert done) the end
    ev.REVERT_RESIZE: Event("resize_revert", "resize.revert", exists_first=True, phases=("start",)),
    ev.FINISH_REVERT_RESIZE: Event("resize_revert", "resize.revert", phases=("end",)),
    ev.TRIGGER_CRASH_DUMP: Event("trigger_crash_dump", "trigger_crash_dump"),
    ev.RESCUE: Event("rescue", "rescue", "rescue", exists_before_end=True),
    ev.UNRESCUE: Event("unrescue", "unrescue"),
    # a backup is a snapshot to Nova's compute (backup_instance → _snapshot_instance): snapshot.start/end
    ev.SNAPSHOT: Event("snapshot", "snapshot", "snapshot"),
    ev.BACKUP: Event("snapshot", "snapshot", "snapshot"),
    ev.ATTACH_INTERFACE: Event("interface_attach", None, error=True,
                               error_on="Failed to attach network adapter device"),
    ev.DETACH_INTERFACE: Event("interface_detach", None),
    ev.SHELVE: Event("shelve", "shelve"),
    ev.SHELVE_OFFLOAD: Event("shelve_offload", "shelve_offload"),
    ev.UNSHELVE: Event("unshelve", "unshelve"),
    "api_lock": Event("lock", None, api=True),
    "api_unlock": Event("unlock", None, api=True),
}


#: the events Nova's compute sends with the server's block devices (the others: null, as
#: ``[notifications] bdms_in_notifications`` is off by default)
WITH_BLOCK_DEVICES = frozenset({"create", "delete", "shutdown", "reboot", "rebuild", "resize", "resize_finish",
                                "resize_revert", "resume"})
#: the legacy events Nova's compute sends with the server's network (``fixed_ips``)
WITH_NETWORK = frozenset({"create.end", "rebuild.end", "resize.start", "resize.end", "finish_resize.start",
                          "finish_resize.end", "resize.confirm.end", "rescue.start", "rescue.end", "unrescue.start",
                          "unrescue.end"})

#: the legacy payloads' extra keys, by event (Nova's extra_usage_info)
LEGACY_EXTRA: dict[str, dict[str, str]] = {"create.end": {"message": "Success"}}


def _addresses(row: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    try:
        value = json.loads(row.get("network_info") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def load_view(engine: Engine, uuid: str, *, request_id: str | None = None, user_id: str | None = None,
              project_id: str | None = None, volumes: bool = True,
              row: dict[str, Any] | None = None) -> sp.ServerView | None:
    """The server as a payload describes it, read now (deleted servers too); None when it never existed.
    ``volumes``: read its volume mappings (an update's or exists' payload lists them only with
    ``bdms_in_notifications``: no query for them on every state change otherwise). ``row``: the server's
    row as it was when the event was recorded (server_events), else read now."""
    from openkeel_compute.compute.instances import store

    with reader(engine) as conn:
        if row is None:
            try:
                row = store.get(conn, uuid, read_deleted="yes")
            except Exception:  # noqa: BLE001 - gone for good (archived): nothing to describe
                return None
        copy = store.flavors_of(row)
        metadata, system_metadata = _metadata(conn, row)
        keypairs = []
        if row.get("key_name"):
            keypairs = [dict(r) for r in conn.execute(
                select(KEY_PAIRS.c.user_id, KEY_PAIRS.c.name, KEY_PAIRS.c.fingerprint, KEY_PAIRS.c.public_key,
                       KEY_PAIRS.c.type).where(KEY_PAIRS.c.user_id == row["user_id"],
                                               KEY_PAIRS.c.name == row["key_name"])).mappings()]
        return sp.ServerView(
            row=row, flavor=copy.cur, new_flavor=copy.new, metadata=metadata,
            system_metadata=system_metadata, tags=store.tags_of(conn, uuid),
            keypairs=keypairs, addresses=_addresses(row), request_id=request_id, user_id=user_id,
            project_id=project_id, volumes=_volumes(conn, row) if volumes else [])


def _volumes(conn: Any, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The server's volume mappings; a deleted server's as they were when it went (Nova's delete.end
    carries the mappings its compute read before deleting them)."""
    query = (select(BLOCK_DEVICE_MAPPING.c.device_name, BLOCK_DEVICE_MAPPING.c.boot_index,
                    BLOCK_DEVICE_MAPPING.c.delete_on_termination, BLOCK_DEVICE_MAPPING.c.volume_id,
                    BLOCK_DEVICE_MAPPING.c.tag)
             .where(BLOCK_DEVICE_MAPPING.c.instance_uuid == row["uuid"], BLOCK_DEVICE_MAPPING.c.volume_id.is_not(None)))
    if not row.get("deleted"):
        query = query.where(BLOCK_DEVICE_MAPPING.c.deleted == 0)
    return [dict(r) for r in conn.execute(query.order_by(BLOCK_DEVICE_MAPPING.c.id)).mappings()]


def _metadata(conn: Any, row: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The server's metadata and system metadata; a deleted server's as they were when it went (Nova's
    delete.end still carries them)."""
    found = []
    for table in (INSTANCE_METADATA, INSTANCE_SYSTEM_METADATA):
        query = select(table.c.key, table.c.value).where(table.c.instance_uuid == row["uuid"])
        if not row.get("deleted"):
            query = query.where(table.c.deleted == 0)
        found.append(dict(conn.execute(query.order_by(table.c.id)).all()))
    return found[0], found[1]


def audit_period_now(unit: str, now: dt.datetime | None = None) -> tuple[str, str]:
    """The legacy update's audit period: from the end of the last completed period until now."""
    from openkeel_compute.compute.usage_audit import last_completed_audit_period

    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    _, end = last_completed_audit_period(unit, now)
    return end.strftime("%Y-%m-%dT%H:%M:%S.%f"), now.strftime("%Y-%m-%dT%H:%M:%S.%f")


class ServerNotifier(VersionedNotifier):
    """Builds and queues the server notifications of one process (the API or the controller)."""

    def __init__(self, conf: cfg.ConfigOpts, host: str | None = None, engine: Engine | None = None) -> None:
        super().__init__(conf, host=host)
        self.engine = engine
        self.legacy_enabled = legacy_notifications_enabled(conf)
        self.bdms_in_notifications = bool(conf.notifications.bdms_in_notifications)
        self.legacy_sender: BackgroundSender | None = None
        if self.legacy_enabled:
            self.legacy_sender = self._make_sender(conf, list(conf.oslo_messaging_notifications.topics))
        self.state_change = conf.notifications.notify_on_state_change
        self.audit_unit = _audit_unit(conf)
        self.image_service = _image_service(conf)

    @property
    def sends_servers(self) -> bool:
        """Whether a server notification would go out: a format on, its sender not shut down (a process's
        senders close at exit, sender.close_all, without their notifier)."""
        return ((self.enabled and self.sender is not None and not self.sender.closing)
                or (self.legacy_enabled and self.legacy_sender is not None and not self.legacy_sender.closing))

    @property
    def wants_updates(self) -> bool:
        return bool(self.state_change) and self.sends_servers

    def close(self, flush_seconds: float | None = None) -> None:
        self.legacy_enabled = False
        if self.legacy_sender is not None:
            self.legacy_sender.close(flush_seconds)
        super().close(flush_seconds)

    # -- sending -------------------------------------------------------------------------------------

    def _emit_server(self, view: sp.ServerView, *, versioned: tuple[str, dict[str, Any]] | None,
              legacy: tuple[str, dict[str, Any]] | None, source: str, host: str | None,
              priority: str = "INFO") -> None:
        context = {"request_id": view.request_id, "user_id": view.user_id, "project_id": view.project_id}
        where = host or self.host
        if versioned is not None and self.enabled and self.sender is not None:
            self.sender.submit({}, context, versioned[0], versioned[1], publisher_id=f"{source}:{where}",
                               priority=priority)
        if legacy is not None and self.legacy_enabled and self.legacy_sender is not None:
            service = "compute"  # Nova's legacy notifier names every server event's publisher so
            self.legacy_sender.submit({}, context, legacy[0], legacy[1], publisher_id=f"{service}.{where}",
                                      priority=priority)

    def _action(self, view: sp.ServerView, event: Event, phase: str | None, host: str | None,
                fault: sp.Fault | None = None, action: str | None = None, legacy: str | None = None) -> None:
        name = action or event.action
        suffix = f".{phase}" if phase else ""
        extra = {"snapshot_image_id": self._snapshot_image(view)} if event.kind == "snapshot" else None
        versioned = (f"instance.{name}{suffix}", sp.versioned_payload(
            event.kind, view, fault=fault, extra=extra,
            with_block_devices=name in WITH_BLOCK_DEVICES or self.bdms_in_notifications))
        legacy_name = legacy if legacy is not None else event.legacy
        old = (f"compute.instance.{legacy_name}{suffix}", sp.legacy_payload(
            view, fault=fault, with_network=f"{legacy_name}.{phase}" in WITH_NETWORK,
            image_service=self.image_service, **self._legacy_extra(view, name, phase))) if legacy_name else None
        self._emit_server(view, versioned=versioned, legacy=old, source="nova-api" if event.api else "nova-compute",
                   host=host if event.api else (view.row.get("host") or host),
                   priority="ERROR" if phase == "error" else "INFO")

    @staticmethod
    def _legacy_extra(view: sp.ServerView, action: str, phase: str | None) -> dict[str, Any]:
        extra: dict[str, Any] = dict(LEGACY_EXTRA.get(f"{action}.{phase}", {}))
        if (action, phase) in (("create", "start"), ("rebuild", "start"), ("rebuild", "end")):
            extra["image_name"] = view.system_metadata.get(sysmeta.IMAGE_NAME) or ""
        if action == "rescue":
            extra["rescue_image_name"] = view.system_metadata.get(sysmeta.RESCUE_IMAGE_NAME) or ""
        if action == "resize_prep" and phase == "end" and view.new_flavor:
            extra["new_instance_type"] = str(view.new_flavor.get("name"))
            extra["new_instance_type_id"] = view.new_flavor.get("id")
        return extra

    # -- the hooks (notifications/server_events.py), after commit -----------------------------------

    def action_event(self, action_id: int, event: str, phase: str, host: str | None, at_step: bool = False,
                     row: dict[str, Any] | None = None) -> None:
        found = EVENTS.get(event)
        if found is None or found.api or not self.sends_servers:
            return  # an API event notifies once, when it finishes
        if found.start_at_step != at_step or phase not in found.phases:
            return  # its step sends it at its own stage, or another event of the operation does
        view = self._view_of_action(action_id, row)
        if view is None:
            return
        if event == ev.REBUILD:  # the conductor's, once the rebuild is scheduled
            self._emit_server(view, versioned=("instance.rebuild_scheduled", sp.versioned_payload(
                "rebuild", view, with_block_devices=self.bdms_in_notifications)),
                              legacy=("compute.instance.rebuild.scheduled", sp.legacy_payload(
                                  view, image_service=self.image_service)), source="nova-conductor", host=host)
        if found.exists_first:
            begin, end = audit_period_now(self.audit_unit)
            self._exists(view, dt.datetime.fromisoformat(begin), dt.datetime.fromisoformat(end),
                         view.row.get("host") or host)
        self._action(view, found, phase, host)
        if event == ev.TERMINATE:  # Nova's compute: delete.start, then the guest's shutdown, start and end
            self._action(view, found, "start", host, action="shutdown", legacy="shutdown")
            self._action(view, found, "end", host, action="shutdown", legacy="shutdown")

    def finished_event(self, event_id: int, result: str, host: str | None, details: str | None,
                       traceback: str | None, row: dict[str, Any] | None = None) -> None:
        if not self.sends_servers or self.engine is None:
            return
        with reader(self.engine) as conn:
            found = conn.execute(select(INSTANCE_ACTIONS_EVENTS.c.event, INSTANCE_ACTIONS_EVENTS.c.action_id,
                                        INSTANCE_ACTIONS_EVENTS.c.host)
                                 .where(INSTANCE_ACTIONS_EVENTS.c.id == event_id)).first()
        if found is None or found[0] not in EVENTS:
            return
        event = EVENTS[found[0]]
        view = self._view_of_action(found[1], row)
        if view is None:
            return
        host = host or found[2]
        if event.api:
            self._action(view, event, None, host)
            return
        if result != "Success":
            if not event.error or (event.error_on and not (details or "").startswith(event.error_on)):
                return
            fault = sp.Fault(exception=_exception_name(details), message=details or "", traceback=traceback or "",
                             function_name=found[0])
            self._action(view, event, "error", host, fault=fault)
            return
        if "end" not in event.phases:
            return
        if event.exists_before_end:
            begin, end = audit_period_now(self.audit_unit)
            self._exists(view, dt.datetime.fromisoformat(begin), dt.datetime.fromisoformat(end),
                         view.row.get("host") or host)
        self._action(view, event, "end", host)

    def volume_event(self, action_id: int, action: str, phases: tuple[str, ...], host: str | None,
                     volumes: dict[str, str], error: str | None) -> None:
        """Nova's compute around a volume's attach, detach or swap: ``instance.volume_<action>.<phase>``
        (InstanceActionVolumePayload with ``volume_id``; the swap's with ``old_volume_id`` and
        ``new_volume_id``), and before ``.end`` of an attach or detach the legacy
        ``compute.instance.volume.<attach|detach>`` with ``volume_id``."""
        if not self.sends_servers:
            return
        view = self._view_of_action(action_id)
        if view is None:
            return
        kind = "volume_swap" if action == "swap" else "volume"
        where = view.row.get("host") or host
        for phase in phases:
            fault = None
            if phase == "error":
                fault = sp.Fault(exception=_exception_name(error), message=error or "", traceback=error or "",
                                 function_name=f"{action}_volume")
            if phase == "end" and action in ("attach", "detach"):
                legacy = sp.legacy_payload(view, image_service=self.image_service)
                legacy.update(volumes)  # Nova's extra_usage_info: the volume's id
                self._emit_server(view, versioned=None, legacy=(f"compute.instance.volume.{action}", legacy),
                                  source="nova-compute", host=where)
            self._emit_server(view, versioned=(f"instance.volume_{action}.{phase}", sp.versioned_payload(
                kind, view, fault=fault, extra=volumes)), legacy=None, source="nova-compute", host=where,
                priority="ERROR" if phase == "error" else "INFO")

    def update(self, uuid: str, old: dict[str, Any], actor: Any = None) -> None:
        if not self.wants_updates or self.engine is None:
            return
        context = _actor_context(actor) if actor is not None else self._latest_context(uuid)
        view = load_view(self.engine, uuid, volumes=self.bdms_in_notifications, **context)
        if view is None:
            return
        if old.get("deleting"):  # Nova saves the deleted state, then destroys the row (deleted_at)
            view.row = {**view.row, "deleted_at": None}
        row = view.row
        states: dict[str, Any] = {"old_state": row.get("vm_state"), "state": row.get("vm_state"),
                  "old_task_state": row.get("task_state"), "new_task_state": row.get("task_state")}
        if old.get("vm_state") != row.get("vm_state"):
            states.update(old_state=old.get("vm_state"), old_task_state=old.get("task_state"))
        elif self.state_change == "vm_and_task_state" and actor is None:
            # Nova's compute reports a task change from the old task; its API (the task a request
            # starts) reports the new task as the old one too, and so does OpenKeel's.
            states.update(old_task_state=old.get("task_state"))
        old_name = old.get("display_name") if old.get("display_name") != row.get("display_name") else None
        begin, end = audit_period_now(self.audit_unit)
        legacy = sp.legacy_payload(view, image_service=self.image_service)
        legacy.update(states, audit_period_beginning=begin, audit_period_ending=end)
        if old_name:
            legacy["old_display_name"] = old_name
        versioned = sp.versioned_payload("update", view, with_block_devices=self.bdms_in_notifications, extra={
            "state_update": sp.state_update(**states), "audit_period": sp.audit_period(begin, end),
            "old_display_name": old_name})
        # the API's writes are published from its host, the controller's from the server's node
        self._emit_server(view, versioned=("instance.update", versioned), legacy=("compute.instance.update", legacy),
                          source="nova-compute", host=None if actor is not None else row.get("host"))

    def api_action(self, uuid: str, action: str, actor: Any) -> None:
        """What Nova's API sends for an action it notifies itself (evacuate): the legacy usage
        notification and the versioned action one, from the API's host."""
        if not self.sends_servers or self.engine is None:
            return
        view = load_view(self.engine, uuid, **_actor_context(actor))
        if view is None:
            return
        self._emit_server(view, versioned=(f"instance.{action}", sp.versioned_payload("action", view)),
                          legacy=(f"compute.instance.{action}", sp.legacy_payload(
                              view, image_service=self.image_service)), source="nova-api", host=None)

    def local_delete(self, uuid: str, actor: Any, kind: str = "delete") -> None:
        """Nova's ``notify_about_instance_delete`` around its API's local delete: ``delete.start`` and
        ``.end``, legacy and versioned, from the API's host (source ``nova-api``); a forceDelete's are
        ``force_delete.*``, legacy only (Nova has no versioned one)."""
        if not self.sends_servers or self.engine is None:
            return
        view = load_view(self.engine, uuid, **_actor_context(actor))
        if view is None:
            return
        from_api = dataclasses.replace(EVENTS[ev.TERMINATE], api=True)
        for phase in ("start", "end"):
            if kind == "delete":
                self._action(view, from_api, phase, None)
            else:
                self._emit_server(view, versioned=None, legacy=(f"compute.instance.{kind}.{phase}", sp.legacy_payload(
                    view, image_service=self.image_service)), source="nova-api", host=None)

    def exists(self, uuid: str, begin: dt.datetime, end: dt.datetime, host: str | None = None) -> bool:
        """``compute.instance.exists`` / ``instance.exists`` for the audit period [begin, end)."""
        if not self.sends_servers or self.engine is None:
            return False
        view = load_view(self.engine, uuid, volumes=self.bdms_in_notifications)
        if view is None:
            return False
        self._exists(view, begin, end, host)
        return True

    def _exists(self, view: sp.ServerView, begin: dt.datetime, end: dt.datetime, host: str | None) -> None:
        # the legacy payload's period is str() of the times, the versioned one's ISO
        legacy = sp.legacy_payload(view, image_service=self.image_service, audit_period_beginning=str(begin),
                                   audit_period_ending=str(end))
        versioned = sp.versioned_payload("exists", view, with_block_devices=self.bdms_in_notifications,
                                         extra={"audit_period": sp.audit_period(
            begin.isoformat(), end.isoformat())})
        self._emit_server(view, versioned=("instance.exists", versioned), legacy=("compute.instance.exists", legacy),
                          source="nova-compute", host=host)

    # -- reading ---------------------------------------------------------------------------------------

    def _snapshot_image(self, view: sp.ServerView) -> str | None:
        """The image a createImage or createBackup makes (its request's outbox row names it)."""
        assert self.engine is not None
        with reader(self.engine) as conn:
            rows = conn.execute(select(OUTBOX.c.payload).where(
                OUTBOX.c.kind == ops.SERVER, OUTBOX.c.object_id == view.row["uuid"],
                OUTBOX.c.operation.in_((ops.SNAPSHOT, ops.BACKUP))).order_by(OUTBOX.c.id.desc())).all()
        payloads = [p if isinstance(p, dict) else json.loads(p or "{}") for (p,) in rows]
        mine = [p for p in payloads if p.get("request_id") == view.request_id] or payloads
        return str(mine[0]["image_id"]) if mine and mine[0].get("image_id") else None

    def _view_of_action(self, action_id: int, row: dict[str, Any] | None = None) -> sp.ServerView | None:
        assert self.engine is not None
        with reader(self.engine) as conn:
            action = conn.execute(select(INSTANCE_ACTIONS.c.instance_uuid, INSTANCE_ACTIONS.c.request_id,
                                         INSTANCE_ACTIONS.c.user_id, INSTANCE_ACTIONS.c.project_id)
                                  .where(INSTANCE_ACTIONS.c.id == action_id)).first()
        if action is None:
            return None
        return load_view(self.engine, action[0], request_id=action[1], user_id=action[2], project_id=action[3],
                         row=row)

    def _latest_context(self, uuid: str) -> dict[str, Any]:
        assert self.engine is not None
        with reader(self.engine) as conn:
            action = conn.execute(select(INSTANCE_ACTIONS.c.request_id, INSTANCE_ACTIONS.c.user_id,
                                         INSTANCE_ACTIONS.c.project_id)
                                  .where(INSTANCE_ACTIONS.c.instance_uuid == uuid)
                                  .order_by(INSTANCE_ACTIONS.c.id.desc()).limit(1)).first()
        if action is None:
            return {}
        return {"request_id": action[0], "user_id": action[1], "project_id": action[2]}


def _actor_context(actor: Any) -> dict[str, Any]:
    return {"request_id": getattr(actor, "request_id", None), "user_id": getattr(actor, "user_id", None),
            "project_id": getattr(actor, "project_id", None)}


#: a fault's message -> the Nova exception that carries it (ExceptionPayload.exception)
_EXCEPTIONS = (("No valid host was found", "NoValidHost"), ("Exceeded maximum number of retries", "MaxRetriesExceeded"),
               ("Build of instance", "BuildAbortException"), ("Flavor's disk is too small", "FlavorDiskTooSmall"),
               ("The created instance's disk would be too small", "FlavorDiskTooSmall"),
               ("Insufficient compute resources", "ComputeResourcesUnavailable"),
               ("NotImplementedError", "NotImplementedError"), ("Invalid input received", "InvalidInput"),
               ("Failed to attach network adapter device", "InterfaceAttachFailed"))


def _exception_name(message: str | None) -> str:
    """The Nova exception of a fault's message; Nova's base class for the messages of OpenKeel's own."""
    for prefix, name in _EXCEPTIONS:
        if (message or "").startswith(prefix):
            return name
    return "NovaException"


def _image_service(conf: cfg.ConfigOpts) -> str | None:
    """The image service's URL, for the legacy payloads' image_ref_url (None: not configured here)."""
    try:
        servers = list(conf.glance.api_servers or [])
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return None
    return servers[0] if servers else None


def _audit_unit(conf: cfg.ConfigOpts) -> str:
    try:
        return str(conf.instance_usage_audit_period)
    except cfg.NoSuchOptError:
        return "month"
