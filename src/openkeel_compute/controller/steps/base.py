"""What every server step shares: the row it works on, the collaborators it may use, and how it ends.

A step is a function ``(ctx, row, server) -> Outcome`` (controller/steps/__init__.py has the table). It
does what the cluster can do now and says how that went, as kopf's handlers do (done, retried later,
failed) and as KubeVirt's VM controller separates its sync from the status it records:

- ``DONE``: the request was carried out (or is moot: the server is gone, another task took over);
- ``Waiting(reason, after)``: the cluster is not there yet (a VMI still stopping, a disk still
  importing): the row is tried again ``after`` seconds later (0: the next pass). Nothing went wrong: no
  attempt is counted, no error recorded, the log line is at DEBUG. ``raise Wait(...)`` from a helper
  deep in a step says the same;
- ``Failed(reason)``: the attempt failed (the cluster refused, Placement is away, ...): the attempt is
  counted, the reason kept as the row's ``last_error``, one WARNING line (not repeated while the reason
  stays the same), and the row is tried again after a backoff (none when the cluster does not answer) (``ServerSettings.retry_delay``, doubled
  each attempt up to ``retry_max_delay``). Once ``step_attempts`` attempts failed, an operation with a
  ``give_up`` (controller/steps/__init__.py) ends its task in Nova's fault with the last reason: a
  failure is bounded in time. With ``fault``, the task already ended in that Nova fault (recorded by the
  step with the state change, as Nova's compute records it) and the row is not tried again.

Any other exception a step raises is a ``Failed`` with its message.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select

from openkeel_compute.compute import block_device_rows, errors, working_state
from openkeel_compute.compute.instances import paging, store
from openkeel_compute.compute.instances.base import row_dicts
from openkeel_compute.db.api import reader
from openkeel_compute.db.models import INSTANCES
from openkeel_compute.kubevirt.vmstatus import Fault
from openkeel_compute.model import sysmeta

if TYPE_CHECKING:
    from openkeel_compute.controller.claims import Claims
    from openkeel_compute.controller.compose import Composer
    from openkeel_compute.controller.gateway import Gateway
    from openkeel_compute.controller.resize_allocations import Allocations
    from openkeel_compute.controller.settings import ServerSettings
    from openkeel_compute.network.client import NeutronClient


@dataclasses.dataclass(frozen=True)
class ServerRow:
    """A pending outbox row of kind ``server``."""

    id: int
    server_uuid: str
    operation: str
    payload: dict[str, Any]
    attempts: int = 0  # failed attempts so far
    last_error: str | None = None  # the last one's error

    @property
    def request_id(self) -> str:
        return str(self.payload.get("request_id") or "")


@dataclasses.dataclass(frozen=True)
class Done:
    pass


DONE = Done()


@dataclasses.dataclass(frozen=True)
class Waiting:
    reason: str
    after: float = 0.0


@dataclasses.dataclass(frozen=True)
class Failed:
    reason: str
    fault: Fault | None = None  # the task ended in this fault: the row is over

    @property
    def final(self) -> bool:
        return self.fault is not None


Outcome = Done | Waiting | Failed


class Wait(Exception):
    """Raised anywhere in a step: the step waits for the cluster (``Waiting``)."""

    def __init__(self, reason: str, after: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


@dataclasses.dataclass
class PassState:
    """What the steps of one pass share: the namespaces known to exist, where new servers' objects went
    (written with the rows done, so that the API and the next pass find them), and the builds whose guest is
    being spawned (their task state ``spawning``, written with them: one transaction for the pass's builds)."""

    namespaces: set[str] = dataclasses.field(default_factory=set)
    placed: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # uuid, namespace, VM name
    spawning: list[str] = dataclasses.field(default_factory=list)  # server uuids


@dataclasses.dataclass(frozen=True)
class Context:
    """The collaborators a step may use, and nothing else."""

    engine: Engine
    cluster: Gateway
    settings: ServerSettings
    objects: Composer  # the server's objects, with the image service's URL and token
    allocations: Allocations  # Nova's resize accounting in Placement
    now: Callable[[], dt.datetime]
    claims: Claims | None = None  # servers' resources claimed in Placement (None: not claimed)
    pass_state: PassState = dataclasses.field(default_factory=PassState)
    network: NeutronClient | None = None  # Neutron, with [neutron] set (None: the pod network)
    volumes: Any = None  # Cinder's client (volume/client.py) when [cinder] is set, else None

    def namespace_of(self, server: dict[str, Any]) -> str:
        return self.settings.options.mapping.namespace_for(str(server["project_id"]))

    def ensure_namespace(self, namespace: str, project_id: str) -> None:
        """The project's namespace, asked for once per pass."""
        if namespace not in self.pass_state.namespaces:
            self.cluster.ensure_namespace(namespace, project_id)
            self.pass_state.namespaces.add(namespace)


_READ_CHUNK = 500  # servers one statement reads

Step = Callable[[Context, ServerRow, dict[str, Any]], Outcome]


def read_server(engine: Engine, uuid: str) -> dict[str, Any] | None:
    """A live server's row with its metadata, system metadata and the controller's working state
    (``working_state``); None once it is gone."""
    with reader(engine) as conn:
        try:
            row = store.get(conn, uuid)
        except errors.InstanceNotFound:  # gone (deleted meanwhile): nothing to do (a database away raises)
            return None
        row["metadata"] = store.metadata_of(conn, uuid)
        row["system_metadata"] = store.metadata_of(conn, uuid, system=True)
        row["working_state"] = working_state.of(conn, uuid)
        if row["system_metadata"].get(sysmeta.HAS_VOLUMES) == "True":  # its Cinder volumes (issue 30)
            row["block_devices"] = block_device_rows.of(conn, uuid)
    return row


def read_servers(engine: Engine, uuids: Collection[str]) -> dict[str, dict[str, Any]]:
    """Several live servers, each as ``read_server`` reads one, in four statements per ``_READ_CHUNK``
    servers (a pass's rows are read together, not four statements a row); a server gone is not in it."""
    found: dict[str, dict[str, Any]] = {}
    wanted = list(dict.fromkeys(uuids))
    with reader(engine) as conn:
        for start in range(0, len(wanted), _READ_CHUNK):
            chunk = wanted[start:start + _READ_CHUNK]
            rows = {row["uuid"]: row for row in row_dicts(conn.execute(
                select(INSTANCES).where(INSTANCES.c.uuid.in_(chunk), INSTANCES.c.deleted == 0)))}
            metadata = paging.metadata_by_instance(conn, list(rows))
            system = paging.metadata_by_instance(conn, list(rows), system=True)
            working = working_state.by_instance(conn, list(rows))
            for uuid in chunk:
                if uuid in rows:
                    row = rows[uuid]
                    row["metadata"] = metadata.get(uuid, {})
                    row["system_metadata"] = system.get(uuid, {})
                    row["working_state"] = working.get(uuid, {})
                    if row["system_metadata"].get(sysmeta.HAS_VOLUMES) == "True":  # its Cinder volumes
                        row["block_devices"] = block_device_rows.of(conn, uuid)
                    found[uuid] = row
    return found


def vmi_phase(vmi: dict[str, Any] | None) -> str | None:
    """The VMI's phase ("" when it has none yet), None without a VMI."""
    return None if vmi is None else ((vmi.get("status") or {}).get("phase") or "")


FINAL_PHASES = ("Succeeded", "Failed")
