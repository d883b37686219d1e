"""console-output: the controller's side of os-getConsoleOutput, a server's console log from its launcher pod.

A read: it neither waits behind the server's other rows nor holds them (the table marks it unordered).

KubeVirt gives the pod of a VMI whose serial console is logged a ``guest-console-log`` container that
prints what the guest writes on its serial console; the pod is the VMI's (label
``kubevirt.io/created-by=<vmi uid>``, listed in ``status.activePods``). Reading the log is reading that
container's log (``tailLines`` = the requested length when it is one). No running VMI (the server is
stopped) or no pod running yet: the log is empty, as the cluster has none. A pod without the container
(the guest's serial console is not logged): Nova's "Guest does not have a console available.".
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Engine

from openkeel_compute.compute import console, errors
from openkeel_compute.compute.instances import store
from openkeel_compute.controller.kube import ClusterError
from openkeel_compute.controller.steps.base import DONE, Context, Outcome, ServerRow
from openkeel_compute.db.api import reader, transaction
from openkeel_compute.model import operations

LOG = logging.getLogger(__name__)
CONTAINER = "guest-console-log"
CREATED_BY = "kubevirt.io/created-by"
OPERATION = operations.CONSOLE_OUTPUT  # the outbox operation the API writes


class ConsoleNotAvailable(Exception):
    """The guest's pod has no guest-console-log container."""


def launcher_pod(cluster: Any, namespace: str, vmi: dict[str, Any]) -> dict[str, Any] | None:
    """The VMI's running launcher pod (the active one when KubeVirt lists several, as during a migration)."""
    uid = (vmi.get("metadata") or {}).get("uid")
    if not uid:
        return None
    active = (vmi.get("status") or {}).get("activePods") or {}
    running = [p for p in cluster.pods(namespace, {CREATED_BY: uid}) if (p.get("status") or {}).get("phase") == "Running"]
    running.sort(key=lambda p: (p["metadata"].get("uid") not in active, p["metadata"].get("creationTimestamp") or ""))
    return running[0] if running else None


def has_console(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return any(c.get("name") == CONTAINER for c in (spec.get("containers") or []) + (spec.get("initContainers") or []))


def console_log(cluster: Any, namespace: str, server_uuid: str, length: int | None) -> bytes:
    """The server's console log as its guest printed it (empty when no guest runs): at most its last
    MAX_CONSOLE_BYTES (what Nova's libvirt driver reads of a console file); ``length`` >= 0 asks the
    cluster for that many last lines only."""
    vmi = cluster.vmi(namespace, server_uuid)
    if vmi is None:
        return b""
    pod = launcher_pod(cluster, namespace, vmi)
    if pod is None:
        return b""
    if not has_console(pod):
        raise ConsoleNotAvailable(pod["metadata"]["name"])
    name = pod["metadata"]["name"]
    tail = length if length is not None and length >= 0 else None
    log = cluster.pod_log(namespace, name, CONTAINER, tail, console.MAX_CONSOLE_BYTES)
    if log is None:
        # the pod went (its VMI stopped) or its container is not running yet: no log to read
        LOG.info("console log of pod %s/%s: gone or not running yet", namespace, name)
        return b""
    return log


def run(ctx: Context, row: ServerRow, server: dict[str, Any]) -> Outcome:
    answer(ctx.engine, ctx.cluster, ctx.settings.options.mapping.namespace_for, row.server_uuid)
    return DONE


def answer(engine: Engine, cluster: Any, namespace_for: Any, server_uuid: str) -> None:
    """Answer the server's pending console request, if there is one (a second outbox row finds none)."""
    with reader(engine) as conn:
        request = console.pending(conn, server_uuid)
        if request is None:
            return
        try:
            project_id = store.get(conn, server_uuid)["project_id"]
        except errors.InstanceNotFound:  # deleted meanwhile: its console row went with it
            return
    output, error = None, None
    try:
        data = console_log(cluster, namespace_for(str(project_id)), server_uuid, request.length)
        output = console.as_text(console.tail(data, request.length))
    except ConsoleNotAvailable:
        error = console.NOT_AVAILABLE
    except ClusterError as exc:
        LOG.warning("server %s: console log not read: %s", server_uuid, exc)
        error = f"cluster: {exc}"[:255]
    with transaction(engine) as conn:
        console.answer(conn, request, output=output, error=error)
