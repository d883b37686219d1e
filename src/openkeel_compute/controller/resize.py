"""Resize, confirm and revert of a server's VirtualMachine (docs/servers.md, "Resize").

A cold resize as Nova's compute service does it, on KubeVirt instancetypes. Each outbox row is tried
pass after pass; a step raises ``Pending`` while the cluster has not got there yet, and the server's
task_state says which step comes next (so a restarted controller carries on where it was):

- ``resize_prep``: the VM's matchers and the ControllerRevisions its status names are kept in the
  server's system metadata (what a revert needs) → ``resize_migrating`` (migration ``migrating``);
- ``resize_migrating``: the VM is stopped; once it has no VMI → ``resize_migrated`` (``post-migrating``);
- ``resize_migrated``: one JSON patch (``test`` the matchers read, then replace them) points the VM at
  the new flavor's instancetype and preference; the root disk's claim grows if the new flavor's disk
  is larger; the VM is started again if it ran before → ``resize_finish``;
- ``resize_finish``: once ``status.instancetypeRef`` names the new instancetype (and the VMI runs,
  when it ran before) → vm_state ``resized`` (VERIFY_RESIZE), migration ``finished``.

confirm: the revisions of the old flavor are deleted, the server goes ``active`` or ``stopped`` by its
power state. revert (task ``resize_reverting``): stop, patch the matchers back to the old names *with*
their revision names (the old flavor and its instancetype may have been deleted meanwhile: the revision
is all KubeVirt needs), start if the server ran before the resize → ``active`` / ``stopped``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from lightkube.resources.apps_v1 import ControllerRevision as CONTROLLER_REVISION
from sqlalchemy import select

from openkeel_compute.compute import errors, instances, resize, states
from openkeel_compute.compute.states import task_states
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.db.models import MIGRATIONS
from openkeel_compute.kubevirt import mapping
from openkeel_compute.kubevirt.names import server_root_volume, server_vm_name
from openkeel_compute.kubevirt.server import flavor_from_copy

LOG = logging.getLogger(__name__)
#: system metadata: the VM's matchers and revisions before the resize ({"instancetype": {...}, ...})
SYSMETA_FROM = "openkeel_resize_from"
#: system metadata: the instance action event the running resize step finishes
SYSMETA_EVENT = "openkeel_resize_event"
OPERATIONS = ("resize", "confirm-resize", "revert-resize")
# the statuses of a resize not yet over
_OPEN = ("pre-migrating", "migrating", "post-migrating", "finished", "confirming", "reverting")
_FINAL = ("Succeeded", "Failed")
_JSON_PATCH = {"Content-Type": "application/json-patch+json"}
GiB = 1024**3


class Pending(Exception):
    """The step waits for the cluster: the row is tried again next pass (the server loop's Pending)."""


def _vm_url(namespace: str, name: str) -> str:
    return f"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}"


def _phase(vmi: dict | None) -> str | None:
    return None if vmi is None else ((vmi.get("status") or {}).get("phase") or "")


def _status_ref(vm: dict, field: str) -> dict:
    return ((vm.get("status") or {}).get(f"{field}Ref") or {})


def new_matchers(server: dict, flavor: dict, vm: dict, options: Any) -> dict[str, dict | None]:
    """The matchers of the VM on ``flavor`` (a flavor copy entry): the flavor's instancetype, and its
    preference unless the server has one of its own (an image that changes the flavor's preference)."""
    objects = mapping.flavor_to_kubevirt(flavor_from_copy(flavor, str(server["project_id"])), options.mapping)
    wanted = {"instancetype": dict(objects.vm["spec"]["instancetype"])}
    current = (vm.get("spec") or {}).get("preference")
    if current and current.get("kind") == mapping.PREFERENCE and current.get("name") == server_vm_name(server["uuid"]):
        wanted["preference"] = dict(current)  # the server's own preference stays
    else:
        wanted["preference"] = dict(objects.vm["spec"]["preference"])
    return wanted


def matcher_patch(vm: dict, wanted: dict[str, dict | None]) -> list[dict]:
    """One JSON patch: ``test`` each matcher as read, then set it to ``wanted`` (None: removed)."""
    spec = vm.get("spec") or {}
    ops: list[dict] = []
    for field, value in wanted.items():
        path = f"/spec/{field}"
        if field in spec:
            ops.append({"op": "test", "path": path, "value": spec[field]})
            ops.append({"op": "replace", "path": path, "value": value} if value else {"op": "remove", "path": path})
        elif value:
            ops.append({"op": "add", "path": path, "value": value})
    return ops


def flavor_resources(flavor: dict) -> dict[str, int]:
    """What a flavor (a flavor copy entry) claims in Placement, as Nova's scheduler asks for it."""
    disk = int(flavor.get("root_gb") or 0) + int(flavor.get("ephemeral_gb") or 0)
    swap = int(flavor.get("swap") or 0)
    disk += -(-swap // 1024)  # swap MiB, rounded up to GiB
    wanted = {"VCPU": int(flavor["vcpus"]), "MEMORY_MB": int(flavor["memory_mb"]), "DISK_GB": disk}
    return {rc: amount for rc, amount in wanted.items() if amount}


class Allocations:
    """Nova's resize accounting in Placement (``placement``: the Placement client, or None without one).

    At the start the server's allocation (the old flavor) moves to the migration's uuid and the server
    claims the new flavor on the same providers; confirm gives the migration's allocation back; revert
    moves it back onto the server (replacing the new flavor's)."""

    def __init__(self, placement: Any) -> None:
        self.placement = placement

    def resize(self, server_uuid: str, migration: str, new_flavor: dict) -> None:
        if self.placement is None or self.placement.get_allocations(migration).allocations:
            return  # no Placement, or moved already (a step tried again)
        held = self.placement.get_allocations(server_uuid)
        if not held.allocations:
            return  # nothing claimed for the server (a server from before Placement): nothing to move
        self.placement.move_allocations(server_uuid, migration)
        (provider, *_rest) = sorted(held.allocations)
        self.placement.put_allocations(server_uuid, {provider: flavor_resources(new_flavor)},
                                       project_id=held.project_id, user_id=held.user_id,
                                       consumer_generation=self.placement.get_allocations(server_uuid).generation)

    def confirm(self, migration: str) -> None:
        if self.placement is not None:
            self.placement.delete_allocations(migration)

    def revert(self, server_uuid: str, migration: str) -> None:
        if self.placement is not None:
            self.placement.move_allocations(migration, server_uuid)


class ResizeSteps:
    """The resize steps of the server loop (``loop``: its engine, cluster and options)."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.allocations = Allocations(getattr(loop, "placement", None))

    # -- helpers ---------------------------------------------------------------------------------------

    def _event(self, conn: Any, row: Any, uuid: str, name: str, *, done: bool = False, host: str | None = None) -> None:
        """Start event ``name`` in the request's action (finished at once with ``done``)."""
        action_id = instances.action_for_request(conn, uuid, row.payload.get("request_id") or "")
        if action_id is None:
            return
        event_id = instances.start_event(conn, action_id, name, host=host)
        if done:
            instances.finish_event(conn, event_id, "Success", host=host)
        else:
            resize.set_sysmeta(conn, uuid, SYSMETA_EVENT, str(event_id))

    @staticmethod
    def _end_event(conn: Any, uuid: str, *, result: str = "Success", host: str | None = None,
                   message: str | None = None) -> None:
        value = resize.sysmeta(conn, uuid, SYSMETA_EVENT)
        if value:
            instances.finish_event(conn, int(value), result, host=host, traceback=message, details=message)
            resize.set_sysmeta(conn, uuid, SYSMETA_EVENT, None)

    def _patch(self, namespace: str, uuid: str, ops: list[dict]) -> None:
        if not ops:
            return
        response = self.loop.cluster.http.patch(_vm_url(namespace, server_vm_name(uuid)),
                                                content=json.dumps(ops).encode(), headers=_JSON_PATCH)
        response.raise_for_status()

    def _stop(self, namespace: str, uuid: str, vmi: dict | None) -> None:
        """Ask a running VMI to stop and wait (Pending) until the VM has none."""
        phase = _phase(vmi)
        if phase is not None and phase not in _FINAL:
            self.loop.cluster.verb(namespace, server_vm_name(uuid), "stop")
            raise Pending("waiting for the server's virtual machine to stop")
        if phase is not None:
            raise Pending("waiting for the stopped VMI to go")

    def _start_if_stopped(self, namespace: str, uuid: str, vm: dict, vmi: dict | None) -> None:
        status = vm.get("status") or {}
        if vmi is None and not status.get("stateChangeRequests"):
            self.loop.cluster.verb(namespace, server_vm_name(uuid), "start")

    def _grow_root_disk(self, namespace: str, uuid: str, server: dict, old: dict, new: dict) -> None:
        """Ask for the larger root disk (PVC expansion); a disk never shrinks."""
        if int(new.get("root_gb") or 0) <= int(old.get("root_gb") or 0):
            return
        root = server_root_volume(server_vm_name(uuid))
        body = {"spec": {"resources": {"requests": {"storage": f"{int(new['root_gb'])}Gi"}}}}
        url = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{root}"
        response = self.loop.cluster.http.patch(url, content=json.dumps(body).encode(),
                                                headers={"Content-Type": "application/merge-patch+json"})
        if response.status_code == 404:
            LOG.warning("server %s: no claim %s to grow", uuid, root)
            return
        response.raise_for_status()

    # -- resize ----------------------------------------------------------------------------------------

    def resize(self, row: Any, server: dict, namespace: str) -> None:
        uuid = row.server_uuid
        migration = row.payload.get("migration")
        task = server.get("task_state")
        engine = self.loop.engine
        vm, vmi, _dvs = self.loop.cluster.look(namespace, uuid)
        if task == task_states.RESIZE_PREP:
            if vm is None:
                raise Pending("the server has no VirtualMachine yet")
            spec = vm.get("spec") or {}
            before = {field: {"matcher": spec.get(field),
                              "revision": (_status_ref(vm, field).get("controllerRevisionRef") or {}).get("name")}
                      for field in ("instancetype", "preference")}
            copy = instances.flavors_of(server)
            self.allocations.resize(uuid, migration, copy.new or copy.cur)
            with transaction(engine) as conn:
                if not instances.save_state(conn, uuid, expected_task_state=task_states.RESIZE_PREP,
                                            task_state=task_states.RESIZE_MIGRATING):
                    return  # deleted or reset meanwhile
                resize.set_sysmeta(conn, uuid, SYSMETA_FROM, json.dumps(before, sort_keys=True))
                resize.move_migration(conn, migration, "migrating")
                host = server.get("host")
                self._event(conn, row, uuid, "conductor_migrate_server", done=True, host=host)
                self._event(conn, row, uuid, "cold_migrate", done=True, host=host)
                self._event(conn, row, uuid, "compute_prep_resize", done=True, host=host)
                self._event(conn, row, uuid, "compute_resize_instance", host=host)
            task = task_states.RESIZE_MIGRATING
        if task == task_states.RESIZE_MIGRATING:
            self._stop(namespace, uuid, vmi)
            with transaction(engine) as conn:
                if not instances.save_state(conn, uuid, expected_task_state=task_states.RESIZE_MIGRATING,
                                            task_state=task_states.RESIZE_MIGRATED,
                                            power_state=states.power_state.SHUTDOWN):
                    return
                resize.move_migration(conn, migration, "post-migrating")
                self._end_event(conn, uuid, host=server.get("host"))
                self._event(conn, row, uuid, "compute_finish_resize", host=server.get("host"))
            task = task_states.RESIZE_MIGRATED
        copy = instances.flavors_of(server)
        if task == task_states.RESIZE_MIGRATED:
            if vm is None:
                raise Pending("the server has no VirtualMachine")
            wanted = new_matchers(server, copy.new or copy.cur, vm, self.loop.options)
            self._patch(namespace, uuid, matcher_patch(vm, {k: v for k, v in wanted.items()
                                                            if (vm.get("spec") or {}).get(k) != v}))
            self._grow_root_disk(namespace, uuid, server, copy.old or copy.cur, copy.new or copy.cur)
            with transaction(engine) as conn:
                if not instances.save_state(conn, uuid, expected_task_state=task_states.RESIZE_MIGRATED,
                                            task_state=task_states.RESIZE_FINISH):
                    return
            if row.payload.get("old_vm_state") != states.STOPPED:
                self.loop.cluster.verb(namespace, server_vm_name(uuid), "start")
            raise Pending("waiting for the VM on its new instancetype")
        if task != task_states.RESIZE_FINISH:
            return  # no longer this resize's to finish
        if vm is None:
            raise Pending("the server has no VirtualMachine")
        wanted = new_matchers(server, copy.new or copy.cur, vm, self.loop.options)
        if _status_ref(vm, "instancetype").get("name") != wanted["instancetype"]["name"]:
            raise Pending("waiting for KubeVirt to record the new instancetype")
        running = row.payload.get("old_vm_state") != states.STOPPED
        if running and _phase(vmi) != "Running":
            self._start_if_stopped(namespace, uuid, vm, vmi)
            raise Pending("waiting for the server's virtual machine to run")
        node = ((vmi or {}).get("status") or {}).get("nodeName") if running else None
        power = states.power_state.RUNNING if running else states.power_state.SHUTDOWN
        with transaction(engine) as conn:
            if resize.finish(conn, uuid, migration, power_state=power, host=node):
                self._end_event(conn, uuid, host=node or server.get("host"))
                if node:
                    instances.save_state(conn, uuid, host=node, node=node)

    # -- confirm ---------------------------------------------------------------------------------------

    def confirm(self, row: Any, server: dict, namespace: str) -> None:
        uuid = row.server_uuid
        migration = row.payload.get("migration")
        vm, _vmi, _dvs = self.loop.cluster.look(namespace, uuid)
        with reader(self.loop.engine) as conn:
            before = json.loads(resize.sysmeta(conn, uuid, SYSMETA_FROM) or "{}")
        if vm is not None:
            keep = {(_status_ref(vm, f).get("controllerRevisionRef") or {}).get("name")
                    for f in ("instancetype", "preference")}
            for field in ("instancetype", "preference"):
                old = (before.get(field) or {}).get("revision")
                if old and old not in keep:
                    self.loop.cluster.delete(CONTROLLER_REVISION, old, namespace)
        with transaction(self.loop.engine) as conn:
            power = server.get("power_state")
            if resize.confirmed(conn, uuid, migration, power_state=power):
                self.allocations.confirm(migration)
                resize.set_sysmeta(conn, uuid, SYSMETA_FROM, None)
                self._event(conn, row, uuid, "compute_confirm_resize", done=True, host=server.get("host"))

    # -- revert ----------------------------------------------------------------------------------------

    def revert(self, row: Any, server: dict, namespace: str) -> None:
        uuid = row.server_uuid
        migration = row.payload.get("migration")
        if server.get("task_state") != task_states.RESIZE_REVERTING:
            return
        engine = self.loop.engine
        with reader(engine) as conn:
            before = json.loads(resize.sysmeta(conn, uuid, SYSMETA_FROM) or "{}")
            old_vm_state = resize.sysmeta(conn, uuid, resize.SYSMETA_OLD_VM_STATE)
            started = resize.sysmeta(conn, uuid, SYSMETA_EVENT)
        if not started:
            with transaction(engine) as conn:
                self._event(conn, row, uuid, "compute_revert_resize", done=True, host=server.get("host"))
                self._event(conn, row, uuid, "compute_finish_revert_resize", host=server.get("host"))
        vm, vmi, _dvs = self.loop.cluster.look(namespace, uuid)
        if vm is None:
            raise Pending("the server has no VirtualMachine")
        old_it = (before.get("instancetype") or {}).get("matcher")
        spec = vm.get("spec") or {}
        if old_it and (spec.get("instancetype") or {}).get("name") != old_it.get("name"):
            self._stop(namespace, uuid, vmi)
            wanted = {}
            for field in ("instancetype", "preference"):
                matcher = (before.get(field) or {}).get("matcher")
                revision = (before.get(field) or {}).get("revision")
                if matcher is None:
                    wanted[field] = None
                    continue
                matcher = {k: v for k, v in matcher.items() if k != "revisionName"}
                if revision:
                    matcher["revisionName"] = revision
                if spec.get(field) != matcher:
                    wanted[field] = matcher
            self._patch(namespace, uuid, matcher_patch(vm, wanted))
            raise Pending("waiting for KubeVirt to take the old instancetype back")
        if old_it and _status_ref(vm, "instancetype").get("name") != old_it.get("name"):
            raise Pending("waiting for KubeVirt to take the old instancetype back")
        running = old_vm_state != states.STOPPED
        if running and _phase(vmi) != "Running":
            self._start_if_stopped(namespace, uuid, vm, vmi)
            raise Pending("waiting for the server's virtual machine to run")
        if not running and _phase(vmi) not in (None, *_FINAL):
            self._stop(namespace, uuid, vmi)
        node = ((vmi or {}).get("status") or {}).get("nodeName") if running else None
        power = states.power_state.RUNNING if running else states.power_state.SHUTDOWN
        self.allocations.revert(uuid, migration)
        with transaction(engine) as conn:
            if resize.reverted(conn, uuid, migration, power_state=power):
                resize.set_sysmeta(conn, uuid, SYSMETA_FROM, None)
                self._end_event(conn, uuid, host=node or server.get("host"))

    def deleted(self, uuid: str) -> None:
        """A server deleted with a resize open: a finished one is confirmed (as Nova confirms a resize before
        it deletes the server), one under way ends in error; the migration's allocation is given back."""
        with transaction(self.loop.engine) as conn:
            open_ = resize.migration_of(conn, uuid, _OPEN)
            if open_ is None:
                return
            done = open_["status"] in ("finished", "confirming")
            resize.move_migration(conn, open_["uuid"], "confirmed" if done else "error", expected=open_["status"])
        self.allocations.confirm(open_["uuid"])

    def act(self, row: Any, server: dict, namespace: str) -> None:
        {"resize": self.resize, "confirm-resize": self.confirm, "revert-resize": self.revert}[row.operation](
            row, server, namespace)


def auto_confirm(loop: Any, window: float) -> list[str]:
    """Confirm the resizes that waited longer than ``window`` seconds (Nova's resize_confirm_window and
    its periodic task: an admin's confirmResize, recorded as an instance action). Returns the uuids."""
    if window <= 0:
        return []
    cutoff = loop.now() - dt.timedelta(seconds=window)
    with reader(loop.engine) as conn:
        due = [r[0] for r in conn.execute(
            select(MIGRATIONS.c.instance_uuid).where(MIGRATIONS.c.status == "finished", MIGRATIONS.c.deleted == 0,
                                                     MIGRATIONS.c.updated_at <= cutoff))]
    done = []
    for uuid in due:
        actor = instances.Actor(None, None, is_admin=True, request_id=instances.new_request_id())
        try:
            with transaction(loop.engine) as conn:
                row = instances.get(conn, uuid)
                resize.confirm(conn, row, actor)
        except errors.ComputeError as exc:  # not in VERIFY_RESIZE any more, or confirmed meanwhile
            LOG.info("server %s: resize not confirmed automatically: %s", uuid, exc)
            continue
        done.append(uuid)
    return done
