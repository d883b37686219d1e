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

from sqlalchemy import select

from openkeel_compute.compute import errors, instances, resize
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.controller.claims import NoValidHost, node_provider
from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.providers import zone_aggregate
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.db.models import MIGRATIONS
from openkeel_compute.kubevirt import mapping
from openkeel_compute.kubevirt.mapping import CLOUD_INIT_DISK, SWAP_DISK
from openkeel_compute.kubevirt.names import server_root_volume, server_user_data_secret, server_vm_name
from openkeel_compute.kubevirt.server import HOSTNAME_LABEL, flavor_from_copy, require_node
from openkeel_compute.model import events, states, sysmeta
from openkeel_compute.model import operations as ops
from openkeel_compute.model.states import task_states
from openkeel_compute.placement.errors import PlacementConflict, PlacementError, PlacementUnavailable
from openkeel_compute.placement.request import resource_request

LOG = logging.getLogger(__name__)
SYSMETA_FROM = sysmeta.RESIZE_FROM
SYSMETA_EVENT = sysmeta.RESIZE_STEP_EVENT  # not the server loop's task event: model/sysmeta.py says why
SYSMETA_NODES = sysmeta.RESIZE_NODES
#: the VM's disks (and volumes) a flavor's ephemeral and swap sizes make
FLAVOR_DISKS = ("ephemeral0", SWAP_DISK)
OPERATIONS = (ops.RESIZE, ops.CONFIRM_RESIZE, ops.REVERT_RESIZE)
# the statuses of a resize not yet over
_OPEN = ("pre-migrating", "migrating", "post-migrating", "finished", "confirming", "reverting")
_FINAL = ("Succeeded", "Failed")
GiB = 1024**3


def _flavor_disks(current: list[dict], wanted: list[dict]) -> list[dict]:
    """``current`` disks (or volumes) with the flavor's ephemeral and swap entries of ``wanted`` in place of
    their own, before the cloud-init disk as a boot places them; every other entry kept as it is."""
    keep = [e for e in current if e.get("name") not in FLAVOR_DISKS]
    add = [e for e in wanted if e.get("name") in FLAVOR_DISKS]
    at = next((i for i, e in enumerate(keep) if e.get("name") == CLOUD_INIT_DISK), len(keep))
    return keep[:at] + add + keep[at:]


def _nodes(server: dict) -> dict[str, str]:
    """The resize's source and destination nodes (empty: the claim chose none, no Placement)."""
    return json.loads((server.get("system_metadata") or {}).get(SYSMETA_NODES) or "{}")


class Pending(Exception):
    """The step waits for the cluster: the row is tried again next pass (the server loop's Pending)."""


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


class Allocations:
    """Nova's resize accounting in Placement (``placement``: the Placement client, or None without one).

    At the start the server's allocation (the old flavor) moves to the migration's uuid and the server
    claims the new flavor on a node Placement offers for it: another node than its own unless
    ``same_host`` ([DEFAULT] allow_resize_to_same_host), its own first when it may stay; confirm gives
    the migration's allocation back; revert moves it back onto the server (replacing the new flavor's)."""

    def __init__(self, placement: Any, *, same_host: bool = True, max_results: int = 1000) -> None:
        self.placement = placement
        self.same_host = same_host
        self.max_results = max_results

    def resize(self, server_uuid: str, migration: str, new_flavor: dict, *,
               image_properties: dict | None = None, zone: str | None = None) -> str | None:
        """Claim ``new_flavor`` for the server; the provider holding it (None: no Placement, or nothing
        claimed for the server before). NoValidHost when no node may take it: the old flavor's
        allocation is then the server's again, as before the resize."""
        if self.placement is None:
            return None
        try:
            return self._resize(server_uuid, migration, new_flavor, image_properties, zone)
        except PlacementError as exc:  # Placement away: as Nova's scheduler, no valid host
            LOG.warning("server %s: resize not claimed, Placement failed: %s", server_uuid, exc.message)
            try:
                if not self.placement.get_allocations(server_uuid).allocations:
                    self.placement.move_allocations(migration, server_uuid)
            except PlacementError:
                pass  # still away: the audit gives the migration's back and claims the server's again
            raise NoValidHost(f"Placement could not be asked for resources: {exc.message}") from None

    def _resize(self, server_uuid: str, migration: str, new_flavor: dict, image_properties: dict | None,
                zone: str | None) -> str | None:
        if not self.placement.get_allocations(migration).allocations:
            held = self.placement.get_allocations(server_uuid)
            if not held.allocations:
                return None  # nothing claimed for the server (a server from before Placement): nothing to move
            self.placement.move_allocations(server_uuid, migration)
        moved = self.placement.get_allocations(migration)
        source = node_provider(moved.allocations)
        current = self.placement.get_allocations(server_uuid)
        if current.allocations:
            return node_provider(current.allocations)  # claimed already (a step tried again)
        try:
            return self._claim(server_uuid, moved, source, new_flavor, image_properties, zone)
        except NoValidHost:
            self.placement.move_allocations(migration, server_uuid)
            raise

    def _claim(self, server_uuid: str, moved: Any, source: str, new_flavor: dict,
               image_properties: dict | None, zone: str | None) -> str:
        query = resource_request(new_flavor, image_properties).query([zone_aggregate(zone)] if zone else None)
        found = self.placement.allocation_candidates(query, self.max_results)
        candidates = [c for c in found.candidates if node_provider(c.allocations) != source]
        if self.same_host:  # the server may stay where it is: its own node first (its VM need not move)
            candidates = [c for c in found.candidates if node_provider(c.allocations) == source] + candidates
        asked = "&".join(f"{k}={v}" for k, v in query)
        if not candidates:
            raise NoValidHost(f"No allocation candidates for {asked}"
                              + ("" if self.same_host else " on another node (allow_resize_to_same_host is false)"))
        for candidate in candidates:
            generation = self.placement.get_allocations(server_uuid).generation
            try:
                self.placement.put_allocations(server_uuid, candidate.allocations, project_id=moved.project_id,
                                               user_id=moved.user_id, consumer_generation=generation)
            except PlacementConflict:
                continue
            return node_provider(candidate.allocations)
        raise NoValidHost(f"Every allocation candidate for {asked} was taken meanwhile")

    def confirm(self, migration: str) -> None:
        if self.placement is not None:
            self.placement.delete_allocations(migration)

    def revert(self, server_uuid: str, migration: str, *, in_place: bool = False) -> None:
        """The migration's allocation (the old flavor) back onto the server, replacing the new flavor's;
        ``in_place``: onto the node the server holds now (its old node is gone)."""
        if self.placement is None:
            return
        relocate = None
        if in_place:
            held = self.placement.get_allocations(server_uuid).allocations
            moved = self.placement.get_allocations(migration).allocations
            if held and moved:
                relocate = {node_provider(moved): node_provider(held)}
        self.placement.move_allocations(migration, server_uuid, relocate)


class ResizeSteps:
    """The resize steps of the server loop (``loop``: its engine, cluster and options)."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        claims = getattr(loop, "claims", None)
        placement = getattr(loop, "placement", None) or (claims.placement if claims is not None else None)
        self.allocations = Allocations(placement,
                                       same_host=bool(getattr(loop, "allow_resize_to_same_host", False)),
                                       max_results=claims.max_results if claims is not None else 1000)

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
        if ops:
            self.loop.cluster.patch("VirtualMachine", namespace, server_vm_name(uuid), ops)

    def _stop(self, namespace: str, uuid: str, vmi: dict | None) -> None:
        """Ask a running VMI to stop and wait (Pending) until the VM has none."""
        phase = _phase(vmi)
        if phase is not None and phase not in _FINAL:
            self.loop.cluster.subresource(namespace, server_vm_name(uuid), "stop")
            raise Pending("waiting for the server's virtual machine to stop")
        if phase is not None:
            raise Pending("waiting for the stopped VMI to go")

    def _start_if_stopped(self, namespace: str, uuid: str, vm: dict, vmi: dict | None) -> None:
        status = vm.get("status") or {}
        if vmi is None and not status.get("stateChangeRequests"):
            self.loop.cluster.subresource(namespace, server_vm_name(uuid), "start")

    def _grow_root_disk(self, namespace: str, uuid: str, server: dict, old: dict, new: dict) -> None:
        """Ask for the larger root disk (PVC expansion); a disk never shrinks."""
        if int(new.get("root_gb") or 0) <= int(old.get("root_gb") or 0):
            return
        root = server_root_volume(server_vm_name(uuid))
        body = {"spec": {"resources": {"requests": {"storage": f"{int(new['root_gb'])}Gi"}}}}
        if not self.loop.cluster.patch("PersistentVolumeClaim", namespace, root, body, patch="merge"):
            LOG.warning("server %s: no claim %s to grow", uuid, root)

    def _node_name(self, provider: str) -> str:
        claims = getattr(self.loop, "claims", None)
        if claims is not None:
            return claims.node_of(provider)
        found = self.allocations.placement.provider(provider)
        if found is None:
            raise PlacementError(f"resource provider {provider} is gone")
        return found["name"]

    def _pin(self, namespace: str, uuid: str, vm: dict, node: str) -> None:
        """Point the VM's required node affinity on kubernetes.io/hostname at ``node`` (a stopped VM: its
        next VMI is scheduled there)."""
        tspec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
        affinity = tspec.get("affinity")
        wanted = json.loads(json.dumps(affinity or {}))
        terms = (((wanted.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
                 .get("nodeSelectorTerms"))
        if terms:
            for term in terms:
                exprs = [e for e in term.get("matchExpressions") or [] if e.get("key") != HOSTNAME_LABEL]
                term["matchExpressions"] = [*exprs, {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]
        else:
            holder = {"affinity": wanted}
            require_node(holder, node)
            wanted = holder["affinity"]
        if wanted == affinity:
            return
        path = "/spec/template/spec/affinity"
        ops = ([{"op": "test", "path": path, "value": affinity}, {"op": "replace", "path": path, "value": wanted}]
               if affinity is not None else [{"op": "add", "path": path, "value": wanted}])
        self._patch(namespace, uuid, ops)

    def _set_flavor_disks(self, namespace: str, uuid: str, server: dict, vm: dict, flavor: dict) -> None:
        """Give the stopped VM the ephemeral and swap disks of ``flavor`` (a flavor copy entry) as a boot
        composes them: emptyDisks grown, shrunk, added or removed (each start gets them blank, so their
        size is the VM's to change), and the user data with or without the swap lines."""
        composed = self.loop._compose(server, flavor=flavor)
        want_spec = composed.vm["spec"]["template"]["spec"]
        tspec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
        ops: list[dict] = []
        for path, current, wanted in (
                ("/spec/template/spec/domain/devices/disks", ((tspec.get("domain") or {}).get("devices") or {})
                 .get("disks") or [], want_spec["domain"]["devices"]["disks"]),
                ("/spec/template/spec/volumes", tspec.get("volumes") or [], want_spec["volumes"])):
            merged = _flavor_disks(current, wanted)
            if merged != current:
                ops += [{"op": "test", "path": path, "value": current}, {"op": "replace", "path": path, "value": merged}]
        secret = server_user_data_secret(uuid)
        for body in composed.secrets:
            if (body.get("metadata") or {}).get("name") == secret:
                self.loop.cluster.apply(body)
        self._patch(namespace, uuid, ops)

    def _no_valid_host(self, row: Any, server: dict, migration: str, exc: NoValidHost) -> None:
        """No node may take the new flavor: the resize ends as Nova's conductor ends it, the server back in
        its state with its flavor, the migration in error, the fault recorded."""
        uuid = server["uuid"]
        LOG.info("server %s: resize not possible: %s", uuid, exc)
        with transaction(self.loop.engine) as conn:
            if not resize.failed(conn, uuid, migration, expected_task_state=task_states.RESIZE_PREP):
                return
            instances.add_fault(conn, uuid, code=exc.fault.code, message=exc.fault.message,
                                details=exc.fault.details)
            self._event(conn, row, uuid, events.CONDUCTOR_MIGRATE)
            self._end_event(conn, uuid, result="Error", message=exc.fault.message)

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
            image = image_from_system_metadata({k: v for k, v in (server.get("system_metadata") or {}).items()
                                                if k.startswith("image_")})
            try:
                provider = self.allocations.resize(uuid, migration, copy.new or copy.cur,
                                                   image_properties=image.get("properties"),
                                                   zone=server.get("availability_zone"))
            except NoValidHost as exc:
                self._no_valid_host(row, server, migration, exc)
                return
            dest = self._node_name(provider) if provider else None
            with transaction(engine) as conn:
                if not instances.save_state(conn, uuid, expected_task_state=task_states.RESIZE_PREP,
                                            task_state=task_states.RESIZE_MIGRATING):
                    return  # deleted or reset meanwhile
                resize.set_sysmeta(conn, uuid, SYSMETA_FROM, json.dumps(before, sort_keys=True))
                if dest:
                    resize.set_sysmeta(conn, uuid, SYSMETA_NODES,
                                       json.dumps({"source": server.get("node"), "dest": dest}, sort_keys=True))
                resize.move_migration(conn, migration, "migrating")
                host = server.get("host")
                self._event(conn, row, uuid, events.CONDUCTOR_MIGRATE, done=True, host=host)
                self._event(conn, row, uuid, events.COLD_MIGRATE, done=True, host=host)
                self._event(conn, row, uuid, events.PREP_RESIZE, done=True, host=host)
                self._event(conn, row, uuid, events.RESIZE, host=host)
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
                self._event(conn, row, uuid, events.FINISH_RESIZE, host=server.get("host"))
            task = task_states.RESIZE_MIGRATED
        copy = instances.flavors_of(server)
        if task == task_states.RESIZE_MIGRATED:
            if vm is None:
                raise Pending("the server has no VirtualMachine")
            wanted = new_matchers(server, copy.new or copy.cur, vm, self.loop.options)
            self._patch(namespace, uuid, matcher_patch(vm, {k: v for k, v in wanted.items()
                                                            if (vm.get("spec") or {}).get(k) != v}))
            self._grow_root_disk(namespace, uuid, server, copy.old or copy.cur, copy.new or copy.cur)
            self._set_flavor_disks(namespace, uuid, server, self.loop.cluster.look(namespace, uuid)[0] or vm,
                                   copy.new or copy.cur)
            dest = _nodes(server).get("dest")
            if dest:
                self._pin(namespace, uuid, vm, dest)
            with transaction(engine) as conn:
                if not instances.save_state(conn, uuid, expected_task_state=task_states.RESIZE_MIGRATED,
                                            task_state=task_states.RESIZE_FINISH):
                    return
            if row.payload.get("old_vm_state") != states.STOPPED:
                self.loop.cluster.subresource(namespace, server_vm_name(uuid), "start")
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
        node = ((vmi or {}).get("status") or {}).get("nodeName") if running else _nodes(server).get("dest")
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
                    self.loop.cluster.delete(ObjectKey("ControllerRevision", namespace, old))
        with transaction(self.loop.engine) as conn:
            power = server.get("power_state")
            if resize.confirmed(conn, uuid, migration, power_state=power):
                self.allocations.confirm(migration)
                resize.set_sysmeta(conn, uuid, SYSMETA_FROM, None)
                resize.set_sysmeta(conn, uuid, SYSMETA_NODES, None)
                self._event(conn, row, uuid, events.CONFIRM_RESIZE, done=True, host=server.get("host"))

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
                self._event(conn, row, uuid, events.REVERT_RESIZE, done=True, host=server.get("host"))
                self._event(conn, row, uuid, events.FINISH_REVERT_RESIZE, host=server.get("host"))
        vm, vmi, _dvs = self.loop.cluster.look(namespace, uuid)
        if vm is None:
            raise Pending("the server has no VirtualMachine")
        source, dest = _nodes(server).get("source"), _nodes(server).get("dest")
        moved = bool(source and source != dest)
        # The resize moved the server and its old node was deleted since: it reverts where it runs, as a
        # resize allowed to stay on its node would have (pinned to the gone node it would never run again).
        home = dest if moved and not self.loop.cluster.node_exists(source) else source
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
            copy = instances.flavors_of(server)
            if copy.old:
                self._set_flavor_disks(namespace, uuid, server, self.loop.cluster.look(namespace, uuid)[0] or vm,
                                       copy.old)
            if moved:
                self._pin(namespace, uuid, self.loop.cluster.look(namespace, uuid)[0] or vm, home)
            raise Pending("waiting for KubeVirt to take the old instancetype back")
        if old_it and _status_ref(vm, "instancetype").get("name") != old_it.get("name"):
            raise Pending("waiting for KubeVirt to take the old instancetype back")
        running = old_vm_state != states.STOPPED
        if moved and home != source and vmi is None:  # the old node went after the VM was pinned to it
            self._pin(namespace, uuid, vm, home)
            vm = self.loop.cluster.look(namespace, uuid)[0] or vm
        if running and _phase(vmi) != "Running":
            self._start_if_stopped(namespace, uuid, vm, vmi)
            raise Pending("waiting for the server's virtual machine to run")
        if not running and _phase(vmi) not in (None, *_FINAL):
            self._stop(namespace, uuid, vmi)
        node = ((vmi or {}).get("status") or {}).get("nodeName") if running else home
        power = states.power_state.RUNNING if running else states.power_state.SHUTDOWN
        self.allocations.revert(uuid, migration, in_place=home != source)
        with transaction(engine) as conn:
            if resize.reverted(conn, uuid, migration, power_state=power):
                resize.set_sysmeta(conn, uuid, SYSMETA_FROM, None)
                resize.set_sysmeta(conn, uuid, SYSMETA_NODES, None)
                if node and node != server.get("node"):
                    instances.save_state(conn, uuid, host=node, node=node)
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
        try:
            self.allocations.confirm(open_["uuid"])
        except PlacementUnavailable as exc:  # the migration is over: the audit gives them back later
            LOG.warning("server %s: migration %s's allocations not given back yet: %s", uuid, open_["uuid"],
                        exc.message)

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
