"""The server loop: the ``server`` outbox rows into KubeVirt objects and verbs, and KubeVirt's status back.

Decisions are pure (``verb_for``, ``kubevirt.server.compose``, ``kubevirt.vmstatus.observe``); the I/O is in
``ServerCluster`` (the cluster) and ``ServerLoop`` (the database). One pass:

- every pending ``server`` row, in id order: ``create`` composes the server's objects and applies them
  (server-side apply, field manager openkeel, strict field validation), then starts the VM; the power
  operations call KubeVirt's subresources; ``delete`` deletes the VM (its DataVolumes go with it), its
  Secrets and its preference. A row is done once the cluster took its request; a failure leaves it pending
  with the error, for the next pass;
- every live server is observed (VM, VMI, DataVolumes) and its row written with the compare-and-swap on
  the task_state read: a concurrent API action wins. A build ends ACTIVE or ERROR (with a fault), a delete
  ends with the row soft-deleted once nothing of the server is left in the cluster.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

import httpx2
from lightkube import ApiError, Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Namespace, Secret
from lightkube.types import PatchType
from sqlalchemy import Engine, and_, select, update

from openkeel_compute.compute import flavor_copy, instances, states
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.db import models
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.kubevirt import mapping
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import (
    DEFAULT_SERVER_OPTIONS,
    SERVER_ID,
    ServerOptions,
    compose,
)
from openkeel_compute.kubevirt.vmstatus import Observation, observe

LOG = logging.getLogger(__name__)
FIELD_MANAGER = mapping.MANAGER
OUTBOX = models.OUTBOX
_ERROR_MAX = 2000
#: seconds a server may stay in BUILD before it goes to ERROR (Nova's instance_build_timeout; Nova's
#: default 0 would let a build that never starts, or whose objects the cluster keeps refusing, wait forever)
BUILD_TIMEOUT = 3600.0

VM = create_namespaced_resource("kubevirt.io", "v1", "VirtualMachine", "virtualmachines")
VMI = create_namespaced_resource("kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances")
DATA_VOLUME = create_namespaced_resource("cdi.kubevirt.io", "v1beta1", "DataVolume", "datavolumes")
PREFERENCE = create_namespaced_resource("instancetype.kubevirt.io", "v1beta1", mapping.PREFERENCE,
                                        "virtualmachinepreferences")
_BY_KIND = {"VirtualMachine": VM, "Secret": Secret, mapping.PREFERENCE: PREFERENCE, "Namespace": Namespace}

# operation -> (plural of the object the verb acts on, the subresource verb)
VERBS: dict[str, tuple[str, str]] = {
    "start": ("virtualmachines", "start"),
    "stop": ("virtualmachines", "stop"),
    "reboot-hard": ("virtualmachines", "restart"),
    "reboot-soft": ("virtualmachineinstances", "softreboot"),
    "pause": ("virtualmachineinstances", "pause"),
    "unpause": ("virtualmachineinstances", "unpause"),
}
# The instance action event each operation records (as Nova's compute service names them).
EVENTS = {"create": "compute__do_build_and_run_instance", "delete": "compute_terminate_instance",
          "start": "compute_start_instance", "stop": "compute_stop_instance",
          "reboot-soft": "compute_reboot_instance", "reboot-hard": "compute_reboot_instance",
          "pause": "compute_pause_instance", "unpause": "compute_unpause_instance"}
# 409 answers that say the verb's end state is already there: the row is done.
_ALREADY = {"start": "already running", "stop": "not running", "pause": "already paused",
            "unpause": "not paused"}


def verb_for(operation: str) -> tuple[str, str] | None:
    """The subresource call of a power operation, or None for create, delete and unknown operations."""
    return VERBS.get(operation)


# The zone of every node: Nova's default zone (OpenKeel has no host aggregates).
DEFAULT_AVAILABILITY_ZONE = "nova"

# The guest's name of the first disk on each bus, as Nova's libvirt driver names it; KubeVirt's default bus is virtio.
_DISK_PREFIX = {"virtio": "vd", "scsi": "sd", "sata": "sd", "usb": "sd", "ide": "hd", "xen": "xvd"}


def root_device_name(system_metadata: dict[str, str]) -> str:
    """The root disk's device name in the guest, from the image's hw_disk_bus (the server keeps it)."""
    return f"/dev/{_DISK_PREFIX.get(system_metadata.get('image_hw_disk_bus') or 'virtio', 'vd')}a"


@dataclasses.dataclass(frozen=True)
class ServerRow:
    id: int
    server_uuid: str
    operation: str
    payload: dict[str, Any]


class ServerCluster:
    """The server's objects in a cluster, through lightkube (and its HTTP client for the subresources)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.http = client._client._client  # the subresources.kubevirt.io group has no lightkube resource

    def apply(self, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        self.client.patch(_BY_KIND[body["kind"]], meta["name"], body, namespace=meta.get("namespace"),
                          patch_type=PatchType.APPLY, field_manager=FIELD_MANAGER, force=True)

    def ensure_namespace(self, name: str, project_id: str) -> None:
        try:
            self.client.get(Namespace, name)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            self.apply({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": name, "labels": {mapping.MANAGED_BY: FIELD_MANAGER},
                                     "annotations": {"openkeel.io/project-id": project_id}}})

    def verb(self, namespace: str, name: str, operation: str) -> None:
        plural, verb = VERBS[operation]
        url = f"/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/{plural}/{name}/{verb}"
        response = self.http.put(url, content=b"{}", headers={"Content-Type": "application/json"})
        if response.status_code == 409 and _ALREADY.get(operation, "\0") in response.text:
            return
        response.raise_for_status()

    def _get(self, res: Any, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            obj = self.client.get(res, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)

    def look(self, namespace: str, uuid: str) -> tuple[dict | None, dict | None, list[dict]]:
        """(VM, VMI, DataVolumes) of a server."""
        name = server_vm_name(uuid)
        dvs = [o.to_dict() if hasattr(o, "to_dict") else dict(o)
               for o in self.client.list(DATA_VOLUME, namespace=namespace, labels={SERVER_ID: name})]
        return self._get(VM, name, namespace), self._get(VMI, name, namespace), dvs

    def delete_server(self, namespace: str, uuid: str) -> None:
        """The VM (its DataVolumes and VMI go with it), its Secrets and its own preference."""
        name = server_vm_name(uuid)
        for res in (VM, PREFERENCE):
            try:
                self.client.delete(res, name, namespace=namespace)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
        for secret in self.client.list(Secret, namespace=namespace, labels={SERVER_ID: name}):
            try:
                self.client.delete(Secret, secret.metadata.name, namespace=namespace)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise

    def leftovers(self, namespace: str, uuid: str) -> list[str]:
        """What of the server is still in the cluster (kind/name)."""
        name = server_vm_name(uuid)
        left = [f"{res.kind}/{o.metadata.name}" for res in (DATA_VOLUME, Secret)
                for o in self.client.list(res, namespace=namespace, labels={SERVER_ID: name})]
        left += [f"{res.kind}/{name}" for res in (VM, VMI, PREFERENCE) if self._get(res, name, namespace)]
        return left


def _pending_servers(engine: Engine, limit: int) -> list[ServerRow]:
    query = (select(OUTBOX.c.id, OUTBOX.c.object_id, OUTBOX.c.operation, OUTBOX.c.payload)
             .where(and_(OUTBOX.c.done_at.is_(None), OUTBOX.c.kind == "server")).order_by(OUTBOX.c.id).limit(limit))
    with reader(engine) as conn:
        return [ServerRow(i, o, op, p if isinstance(p, dict) else json.loads(p or "{}"))
                for i, o, op, p in conn.execute(query)]


def _finish_rows(engine: Engine, ids: list[int], error: str | None) -> None:
    values: dict[str, Any] = ({"done_at": models.utcnow()} if error is None
                              else {"attempts": OUTBOX.c.attempts + 1, "last_error": error[:_ERROR_MAX]})
    with transaction(engine) as conn:
        conn.execute(update(OUTBOX).where(OUTBOX.c.id.in_(ids), OUTBOX.c.done_at.is_(None)).values(values))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class ServerLoop:
    def __init__(self, engine: Engine, cluster: ServerCluster, options: ServerOptions = DEFAULT_SERVER_OPTIONS, *,
                 build_timeout: float = BUILD_TIMEOUT, unschedulable_grace: float = 0, network_name: str = "pod-network",
                 batch_size: int = 100, now: Callable[[], dt.datetime] = _now) -> None:
        self.engine = engine
        self.cluster = cluster
        self.options = options
        self.build_timeout = build_timeout
        self.unschedulable_grace = unschedulable_grace
        self.network_name = network_name
        self.batch_size = batch_size
        self.now = now
        self._events: dict[str, int] = {}  # server uuid -> the event its running task finishes
        self._old_vmi: dict[str, str] = {}  # server uuid -> the VMI a hard reboot replaces (until it is replaced)

    def run_once(self) -> dict[str, str]:
        """One pass: the pending rows, then every live server observed. Returns server uuid -> problem."""
        problems = self.process_outbox()
        self.observe_all(problems)
        return problems

    # -- the outbox ----------------------------------------------------------------------------------

    def process_outbox(self) -> dict[str, str]:
        problems: dict[str, str] = {}
        for row in _pending_servers(self.engine, self.batch_size):
            if row.server_uuid in problems:
                _finish_rows(self.engine, [row.id], problems[row.server_uuid])
                continue  # keep a server's rows in order: none passes one that failed
            try:
                self._act(row)
            except Exception as exc:  # noqa: BLE001 - the row stays pending with the error, tried again later
                problems[row.server_uuid] = f"{row.operation}: {exc}"
                LOG.warning("server %s %s: %s", row.server_uuid, row.operation, exc)
                _finish_rows(self.engine, [row.id], problems[row.server_uuid])
            else:
                _finish_rows(self.engine, [row.id], None)
                self._start_event(row)
        return problems

    def _start_event(self, row: ServerRow) -> None:
        """The operation's event, in the instance action of the request that asked for it."""
        request_id = row.payload.get("request_id")
        event = EVENTS.get(row.operation)
        if not request_id or event is None:
            return
        with transaction(self.engine) as conn:
            action_id = instances.action_for_request(conn, row.server_uuid, request_id)
            if action_id is not None:
                self._events[row.server_uuid] = instances.start_event(conn, action_id, event)

    def _finish_event(self, conn: Any, uuid: str, fault: Any, host: str | None = None) -> None:
        """Finish the operation's event, on the server's host as Nova's compute service records it."""
        event_id = self._events.pop(uuid, None)
        if event_id is not None:
            if fault is None:
                instances.finish_event(conn, event_id, "Success", host=host)
            else:
                instances.finish_event(conn, event_id, "Error", traceback=fault.details or fault.message,
                                       details=fault.message, host=host)

    def _server(self, uuid: str) -> dict[str, Any] | None:
        with reader(self.engine) as conn:
            try:
                row = instances.get(conn, uuid)
            except Exception:  # noqa: BLE001 - gone (deleted meanwhile): nothing to do
                return None
            row["metadata"] = instances.metadata_of(conn, uuid)
            row["system_metadata"] = instances.metadata_of(conn, uuid, system=True)
        return row

    def _act(self, row: ServerRow) -> None:
        server = self._server(row.server_uuid)
        if server is None:
            return
        namespace = self.options.mapping.namespace_for(str(server["project_id"]))
        name = server_vm_name(row.server_uuid)
        if row.operation == "create":
            image = image_from_system_metadata({k: v for k, v in server["system_metadata"].items()
                                                if k.startswith("image_")})
            image["id"] = server["image_ref"]
            objects = compose(server, flavor_copy.FlavorCopy.loads(server["flavor"]).cur, image,
                              server.get("key_data"), self.options)
            self.cluster.ensure_namespace(namespace, str(server["project_id"]))
            for body in objects.documents():
                self.cluster.apply(body)
            with transaction(self.engine) as conn:  # where the API and the next pass find the objects
                instances.save_state(conn, row.server_uuid, namespace=namespace, vm_name=name)
            self.cluster.verb(namespace, name, "start")
        elif row.operation == "delete":
            self.cluster.delete_server(namespace, row.server_uuid)
        elif verb_for(row.operation) is not None:
            if row.operation == "reboot-hard":  # done only once a new VMI runs, not while the old one does
                _vm, vmi, _dvs = self.cluster.look(namespace, row.server_uuid)
                uid = ((vmi or {}).get("metadata") or {}).get("uid")
                phase = ((vmi or {}).get("status") or {}).get("phase")
                if not uid or phase in ("Succeeded", "Failed"):
                    # a hard reboot of a stopped server starts it, as Nova's does; KubeVirt
                    # restarts only a running VM
                    self.cluster.verb(namespace, name, "start")
                    return
                self._old_vmi[row.server_uuid] = uid
            self.cluster.verb(namespace, name, row.operation)
        else:
            raise ValueError(f"unknown server operation {row.operation!r}")

    # -- observing -----------------------------------------------------------------------------------

    def observe_all(self, problems: dict[str, str] | None = None) -> None:
        problems = problems if problems is not None else {}
        with reader(self.engine) as conn:
            uuids = [r[0] for r in conn.execute(select(models.INSTANCES.c.uuid)
                                                .where(models.INSTANCES.c.deleted == 0))]
        for uuid in uuids:
            try:
                self.observe_one(uuid)
            except (ApiError, httpx2.HTTPError) as exc:
                problems.setdefault(uuid, f"observe: {exc}")

    def observe_one(self, uuid: str) -> Observation | None:
        server = self._server(uuid)
        if server is None:
            return None
        namespace = self.options.mapping.namespace_for(str(server["project_id"]))
        vm, vmi, dvs = self.cluster.look(namespace, uuid)
        server["vmi_uid"] = self._old_vmi.get(uuid)
        seen = observe(server, vm, vmi, dvs, self.now(), server["created_at"], self.build_timeout,
                       self.network_name, self.unschedulable_grace)
        if seen.deleted:
            left = self.cluster.leftovers(namespace, uuid)
            if left:  # observe only sees the VM and disks; Secrets and the preference must be gone too
                return seen
            with transaction(self.engine) as conn:
                instances.soft_delete(conn, uuid)
                self._finish_event(conn, uuid, None, server.get("host"))
            return seen
        changes: dict[str, Any] = {"vm_state": seen.vm_state, "task_state": seen.task_state,
                                   "power_state": seen.power_state}
        if seen.addresses is not None:
            changes["network_info"] = json.dumps(seen.addresses)
        if seen.progress is not None:
            changes["progress"] = seen.progress
        if seen.host is not None:
            changes["host"] = changes["node"] = seen.host
            if not server.get("availability_zone"):
                # scheduled: the server is in its host's zone, the default one (the list filter sees it)
                changes["availability_zone"] = DEFAULT_AVAILABILITY_ZONE
        if seen.launched and server.get("launched_at") is None:
            changes["launched_at"] = models.utcnow()
        if seen.launched and not server.get("root_device_name"):
            changes["root_device_name"] = root_device_name(server.get("system_metadata") or {})
        if seen.task_state is None:
            self._old_vmi.pop(uuid, None)
        current = {k: server.get(k) for k in changes}
        if current == changes and seen.fault is None:
            return seen  # nothing changed: only read
        with transaction(self.engine) as conn:
            if not instances.save_state(conn, uuid, expected_task_state=[server.get("task_state")], **changes):
                return seen  # an API action moved the task meanwhile: it wins, the next pass looks again
            if seen.fault is not None:
                instances.add_fault(conn, uuid, code=seen.fault.code, message=seen.fault.message,
                                    details=seen.fault.details or None, host=seen.host)
            if seen.task_state is None and seen.vm_state != states.BUILDING:
                self._finish_event(conn, uuid, seen.fault, seen.host or server.get("host"))
        return seen


def make_loop(client: Client, engine: Engine, **kwargs: Any) -> ServerLoop:
    return ServerLoop(engine, ServerCluster(client), **kwargs)


__all__ = ["ServerCluster", "ServerLoop", "make_loop", "verb_for"]
