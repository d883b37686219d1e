"""Each cluster node as a ``nova-compute`` service (table compute_services), kept by the controller.

Every ``report_interval`` seconds the controller reads the nodes and, in one transaction:

- creates the service of a node it has not seen (a new id and uuid, as a nova-compute registering);
- records the heartbeat of every Ready node (``last_seen_up``): a service is up while its last heartbeat
  is at most ``service_down_time`` old, as Nova's database servicegroup driver decides; a node that is not
  Ready, that left the cluster, or a controller that stopped, turns its services down;
- keeps each node's capacity (allocatable CPUs, memory, ephemeral storage), InternalIP and kubelet
  version for os-hypervisors;
- follows a cordon or uncordon made on the cluster (``kubectl cordon``): the service becomes disabled
  (its reason the node's ``openkeel.io/disabled-reason`` annotation, if any) or enabled.

A service disabled or enabled through the API (``cordon_pending``) is written to the node first: a
merge patch of ``spec.unschedulable`` and the reason annotation; a cordoned node's provider carries
COMPUTE_STATUS_DISABLED (controller/providers.py), so the scheduler skips it as Nova's does. A forced-down
service's node gets the trait too (Nova's ComputeFilter skips a down service) without being cordoned.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy import false, insert, select, update

from openkeel_compute.compute import aggregates
from openkeel_compute.controller import nodes, providers
from openkeel_compute.db import api as db_api
from openkeel_compute.db import models

if TYPE_CHECKING:
    from openkeel_compute.controller.gateway import Gateway

LOG = logging.getLogger(__name__)
TABLE = models.COMPUTE_SERVICES
BINARY = "nova-compute"
REASON_ANNOTATION = "openkeel.io/disabled-reason"
REASON_MAX = 255
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE_FROM = "openkeel.io/zone-from-aggregate"


def ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def version_number(text: str | None) -> int:
    """A version string ("v1.31.2", "1.9.0-rc.1") as Nova's integer (major * 1000000 + minor * 1000 +
    patch); 0 when it cannot be read."""
    parts = []
    for piece in (text or "").lstrip("vV").split("-", 1)[0].split(".")[:3]:
        if not piece.isdigit():
            break
        parts.append(int(piece))
    if not parts:
        return 0
    parts += [0] * (3 - len(parts))
    return min(parts[0], 2000) * 1000000 + min(parts[1], 999) * 1000 + min(parts[2], 999)


_ARCHES = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"}
_MODEL = "host-model-cpu.node.kubevirt.io/"
_VENDOR = "cpu-vendor.node.kubevirt.io/"
_FEATURE = "host-model-required-features.node.kubevirt.io/"


def cpu_info(labels: dict[str, str], cpus: int) -> str:
    """Nova's cpu_info (arch, model, vendor, topology, features) from the labels KubeVirt's node
    labeller puts on the node (``host-model-cpu``, ``cpu-vendor``, ``host-model-required-features``)
    and ``kubernetes.io/arch``; the topology is the node's CPUs as one socket."""
    def named(prefix: str) -> list[str]:
        return sorted(k[len(prefix):] for k, v in labels.items() if k.startswith(prefix) and v == "true")

    arch = labels.get("kubernetes.io/arch")
    info = {"arch": _ARCHES.get(arch or "", arch), "model": next(iter(named(_MODEL)), None),
            "vendor": next(iter(named(_VENDOR)), None), "topology": {"cores": cpus, "threads": 1, "sockets": 1},
            "features": named(_FEATURE)}
    return json.dumps(info)


def facts(node: dict[str, Any]) -> dict[str, Any]:
    """What a service row holds of its node."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}

    def amount(name: str, unit: int) -> int:
        try:
            return max(0, min(int(providers.quantity(allocatable.get(name, 0)) // unit), 2**31 - 1))
        except ValueError:
            return 0

    address = next((a.get("address") for a in status.get("addresses") or () if a.get("type") == "InternalIP"),
                   None)
    reason = ((meta.get("annotations") or {}).get(REASON_ANNOTATION) or None)
    return {"vcpus": amount("cpu", 1), "memory_mb": amount("memory", 2**20), "local_gb": amount("ephemeral-storage",
                                                                                              2**30),
            "host_ip": address if address and len(address) <= 64 else None,
            "hypervisor_version": version_number((status.get("nodeInfo") or {}).get("kubeletVersion")),
            "node_uuid": providers.provider_uuid(meta["name"]),
            "cpu_info": cpu_info(meta.get("labels") or {}, amount("cpu", 1)),
            "ready": ready(node), "cordoned": bool((node.get("spec") or {}).get("unschedulable")),
            "reason": reason[:REASON_MAX] if reason else None}


def publish(engine, nodes_: list[dict[str, Any]], now: dt.datetime | None = None) -> int:
    """Make compute_services follow the nodes (see the module's text); returns the rows written."""
    now = now or models.utcnow()
    seen = {(n.get("metadata") or {})["name"]: facts(n) for n in nodes_}
    written = 0
    beating: list[int] = []
    with db_api.transaction(engine) as conn:
        stored = {r.host: r for r in conn.execute(select(TABLE).where(TABLE.c.binary == BINARY))}
        for name, fact in seen.items():
            capacity = {k: fact[k] for k in ("vcpus", "memory_mb", "local_gb", "host_ip", "hypervisor_version",
                                              "node_uuid", "cpu_info")}
            row = stored.get(name)
            if row is None:
                conn.execute(insert(TABLE).values(
                    uuid=str(uuid.uuid4()), host=name, binary=BINARY, disabled=fact["cordoned"],
                    disabled_reason=fact["reason"] if fact["cordoned"] else None, forced_down=False,
                    cordon_pending=False, last_seen_up=now if fact["ready"] else None, created_at=now,
                    updated_at=now if fact["ready"] else None, **capacity))
                written += 1
                continue
            values: dict[str, Any] = {k: v for k, v in capacity.items() if getattr(row, k) != v}
            if not row.cordon_pending and bool(row.disabled) != fact["cordoned"]:
                values["disabled"] = fact["cordoned"]
                values["disabled_reason"] = fact["reason"] if fact["cordoned"] else None
            if values:
                if fact["ready"]:
                    values["last_seen_up"] = now
                statement = update(TABLE).where(TABLE.c.id == row.id)
                if "disabled" in values:  # an API write meanwhile wins: only if still not pending
                    statement = statement.where(TABLE.c.cordon_pending == false())
                written += conn.execute(statement.values(**values)).rowcount
            elif fact["ready"]:
                beating.append(row.id)
        for start in range(0, len(beating), 500):  # the heartbeat of the unchanged Ready nodes: one statement
            chunk = beating[start:start + 500]
            written += conn.execute(update(TABLE).where(TABLE.c.id.in_(chunk)).values(last_seen_up=now)).rowcount
    return written


def apply_cordons(engine, cluster: Gateway) -> list[str]:
    """Cordon or uncordon the nodes whose service the API disabled or enabled; returns their names."""
    with db_api.reader(engine) as conn:
        pending = list(conn.execute(select(TABLE.c.id, TABLE.c.host, TABLE.c.disabled, TABLE.c.disabled_reason,
                                           TABLE.c.updated_at).where(TABLE.c.cordon_pending)))
    done = []
    for row in pending:
        body = {"spec": {"unschedulable": True if row.disabled else None},
                "metadata": {"annotations": {REASON_ANNOTATION: row.disabled_reason if row.disabled else None}}}
        present = cluster.patch("Node", "", row.host, body, patch="merge")
        if not present:
            LOG.info("compute service %s: its node is not in the cluster; nothing to cordon", row.host)
        with db_api.transaction(engine) as conn:  # unless the API wrote again meanwhile
            conn.execute(update(TABLE).where(TABLE.c.id == row.id, TABLE.c.disabled == row.disabled,
                                             TABLE.c.cordon_pending).values(cordon_pending=False))
        LOG.info("node %s %s", row.host, "cordoned" if row.disabled else "uncordoned")
        done.append(row.host)
    return done


def forced_down(engine) -> set[str]:
    """The nodes whose service is forced down (their providers carry COMPUTE_STATUS_DISABLED)."""
    with db_api.reader(engine) as conn:
        return set(conn.execute(select(TABLE.c.host).where(TABLE.c.forced_down, TABLE.c.binary == BINARY))
                   .scalars())


def apply_zones(engine, cluster: Gateway, nodes: list[dict[str, Any]]) -> list[str]:
    """Give each node of a host in an aggregate with an availability zone that zone as its
    ``topology.kubernetes.io/zone`` label (``ZONE_FROM`` names the aggregate); a node whose label came
    from an aggregate it left loses it (the default zone again). Returns the nodes relabelled."""
    with db_api.reader(engine) as conn:
        _members, zones = aggregates.of_hosts(conn)
    changed = []
    for node in nodes:
        meta = node.get("metadata") or {}
        name, labels, notes = meta["name"], meta.get("labels") or {}, meta.get("annotations") or {}
        if name in zones:
            zone, source = zones[name]
            if labels.get(ZONE_LABEL) == zone and notes.get(ZONE_FROM) == source:
                continue
            body: dict[str, Any] = {"metadata": {"labels": {ZONE_LABEL: zone}, "annotations": {ZONE_FROM: source}}}
        elif ZONE_FROM in notes:
            body = {"metadata": {"labels": {ZONE_LABEL: None}, "annotations": {ZONE_FROM: None}}}
        else:
            continue
        cluster.patch("Node", "", name, body, patch="merge")
        LOG.info("node %s: availability zone %s", name, zones[name][0] if name in zones else "(default)")
        changed.append(name)
    return changed


def placement_view(engine) -> tuple[set[str], dict[str, set[str]]]:
    """What the providers take from the database: the forced-down nodes and each node's aggregates."""
    with db_api.reader(engine) as conn:
        members, _zones = aggregates.of_hosts(conn)
    return forced_down(engine), members


def heartbeat(engine, cluster: Gateway) -> list[str]:
    """One heartbeat: the API's cordons and the aggregates' zones written to the nodes, then the nodes
    read and published (compute services and zones); returns the nodes changed (their providers are
    due for an update)."""
    changed = apply_cordons(engine, cluster)
    seen = cluster.nodes()
    relabelled = apply_zones(engine, cluster, seen)
    if relabelled:
        seen = cluster.nodes()
    publish(engine, seen)
    nodes.publish(engine, nodes.observed(seen))
    return changed + relabelled
