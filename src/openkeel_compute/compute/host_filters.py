"""Which nodes the scheduler's filters enabled in ``[filter_scheduler] enabled_filters`` let a server go to,
beyond what Placement matches and the server group filters: Nova's filters that read a host's aggregates,
its instances, the configuration and the request (its flavor, image and project), and the
different_host / same_host hints (compute/scheduler_hints.py). Each is Nova's rule (compute/filter_rules.py)
for one host; a node is a host (its compute service), its aggregates those whose hosts name it.

They act where Nova's scheduler runs its filters: at a build, and at every move that asks the scheduler
(resize with the new flavor, cold and live migration without a forced host, evacuation, unshelve).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import func, select

from openkeel_compute.compute import compute_services, filter_rules, flavor_copy, scheduler_hints
from openkeel_compute.compute.image_meta import image_from_system_metadata
from openkeel_compute.db.models import AGGREGATE_HOSTS, AGGREGATE_METADATA, COMPUTE_SERVICES, INSTANCES

LOG = logging.getLogger(__name__)

EXTRA_SPECS = "AggregateInstanceExtraSpecsFilter"
TENANCY = "AggregateMultiTenancyIsolation"
ISOLATED_HOSTS = "IsolatedHostsFilter"
NUM_INSTANCES = "NumInstancesFilter"
AGGREGATE_NUM_INSTANCES = "AggregateNumInstancesFilter"
IMAGE_PROPERTIES = "AggregateImagePropertiesIsolation"
SIMPLE_CIDR = "SimpleCIDRAffinityFilter"
JSON = "JsonFilter"
#: the hypervisor type the os-hypervisors API shows, and JsonFilter's $hypervisor_type
HYPERVISOR_TYPE = "KubeVirt"
_AGGREGATE_FILTERS = frozenset({EXTRA_SPECS, TENANCY, AGGREGATE_NUM_INSTANCES, IMAGE_PROPERTIES})

#: the filters that act (the others of Nova's are accepted and have no effect on KubeVirt): ComputeFilter
#: and the server group filters always act; ComputeCapabilitiesFilter's capabilities: extra specs and
#: ImagePropertiesFilter's architecture become the VM's node requirements (kubevirt/mapping.py), which
#: Kubernetes enforces; the others here
ACTING = frozenset({
    "ComputeFilter", "ServerGroupAffinityFilter", "ServerGroupAntiAffinityFilter",
    "ComputeCapabilitiesFilter", "ImagePropertiesFilter",
    scheduler_hints.DIFFERENT_HOST, scheduler_hints.SAME_HOST,
    EXTRA_SPECS, TENANCY, ISOLATED_HOSTS, NUM_INSTANCES, AGGREGATE_NUM_INSTANCES, IMAGE_PROPERTIES,
    SIMPLE_CIDR, JSON,
})


def without_effect(enabled: Iterable[str]) -> list[str]:
    """The enabled filters that have no effect on KubeVirt, in their order."""
    return [name for name in enabled if name not in ACTING]


@dataclasses.dataclass(frozen=True)
class FilterOptions:
    """``[filter_scheduler]``'s options the filters read."""

    enabled: tuple[str, ...] = ()
    max_instances_per_host: int = 50
    isolated_images: tuple[str, ...] = ()
    isolated_hosts: tuple[str, ...] = ()
    restrict_isolated_hosts_to_isolated_images: bool = True
    image_properties_namespace: str | None = None
    image_properties_separator: str = "."
    #: [DEFAULT] reserved_host_memory_mb / reserved_host_disk_mb: in JsonFilter's $free_ram_mb, $free_disk_mb
    reserved_host_memory_mb: int = 512
    reserved_host_disk_mb: int = 0

    @classmethod
    def from_conf(cls, conf: Any) -> FilterOptions:
        f = conf.filter_scheduler
        return cls(enabled=tuple(f.enabled_filters), max_instances_per_host=f.max_instances_per_host,
                   isolated_images=tuple(f.isolated_images), isolated_hosts=tuple(f.isolated_hosts),
                   restrict_isolated_hosts_to_isolated_images=f.restrict_isolated_hosts_to_isolated_images,
                   image_properties_namespace=f.aggregate_image_properties_isolation_namespace or None,
                   image_properties_separator=f.aggregate_image_properties_isolation_separator,
                   reserved_host_memory_mb=conf.reserved_host_memory_mb,
                   reserved_host_disk_mb=conf.reserved_host_disk_mb)


@dataclasses.dataclass(frozen=True)
class Request:
    """What the filters read of a server's request (Nova's request spec)."""

    uuid: str
    project_id: str
    extra_specs: Mapping[str, str]
    image_id: str | None
    image_properties: Mapping[str, str]

    @classmethod
    def of(cls, server: Mapping[str, Any], flavor: Mapping[str, Any] | None = None) -> Request:
        """The request of a server row (with its ``system_metadata``); ``flavor``: the one it asks for
        when not its current one (a resize's new flavor)."""
        if flavor is None:
            flavor = flavor_copy.FlavorCopy.loads(server["flavor"]).cur if server.get("flavor") else {}
        system = server.get("system_metadata") or {}
        image = image_from_system_metadata({k: v for k, v in system.items() if k.startswith("image_")})
        return cls(uuid=str(server["uuid"]), project_id=str(server.get("project_id")),
                   extra_specs=dict(flavor.get("extra_specs") or {}), image_id=server.get("image_ref") or None,
                   image_properties=dict(image.get("properties") or {}))


def _aggregates_by_host(conn) -> dict[str, list[dict[str, str]]]:
    """{host: the metadata of each of its aggregates}."""
    metadata: dict[int, dict[str, str]] = {}
    for row in conn.execute(select(AGGREGATE_METADATA.c.aggregate_id, AGGREGATE_METADATA.c.key,
                                   AGGREGATE_METADATA.c.value)):
        metadata.setdefault(row.aggregate_id, {})[row.key] = row.value
    hosts: dict[str, list[dict[str, str]]] = {}
    for row in conn.execute(select(AGGREGATE_HOSTS.c.host, AGGREGATE_HOSTS.c.aggregate_id)
                            .order_by(AGGREGATE_HOSTS.c.aggregate_id)):
        hosts.setdefault(row.host, []).append(metadata.get(row.aggregate_id, {}))
    return hosts


def _instances_by_node(conn, other_than: str) -> dict[str, int]:
    """{node: how many servers are on it}, the request's own server left out (Nova counts the servers a
    host holds before this one comes)."""
    rows = conn.execute(select(INSTANCES.c.node, func.count()).where(
        INSTANCES.c.deleted == 0, INSTANCES.c.node.is_not(None), INSTANCES.c.uuid != other_than)
        .group_by(INSTANCES.c.node))
    return {node: int(count) for node, count in rows}


def _hints(conn, uuid: str) -> dict[str, list[str]]:
    raw = conn.execute(select(INSTANCES.c.scheduler_hints).where(INSTANCES.c.uuid == uuid)).scalar()
    return json.loads(raw) if raw else {}


def host_states(conn, options: FilterOptions, other_than: str) -> dict[str, dict[str, Any]]:
    """{node: what JsonFilter's ``$name`` reads of it}, as Nova's scheduler's HostState: the compute
    service's sizes and address, and the use of its servers (the request's own left out)."""
    services = list(conn.execute(select(COMPUTE_SERVICES).where(COMPUTE_SERVICES.c.binary == "nova-compute")))
    used = compute_services.usage(conn, [row.host for row in services])
    counts = _instances_by_node(conn, other_than)
    states: dict[str, dict[str, Any]] = {}
    for row in services:
        use = used.get(row.host, {})
        disk_used_gb = options.reserved_host_disk_mb // 1024 + use.get("local_gb", 0)
        states[row.host] = {
            "host": row.host, "nodename": row.host, "hypervisor_hostname": row.host, "host_ip": row.host_ip,
            "uuid": row.node_uuid, "hypervisor_type": HYPERVISOR_TYPE, "hypervisor_version": row.hypervisor_version,
            "vcpus_total": row.vcpus, "vcpus_used": use.get("vcpus", 0), "total_usable_ram_mb": row.memory_mb,
            "free_ram_mb": row.memory_mb - options.reserved_host_memory_mb - use.get("memory_mb", 0),
            "total_usable_disk_gb": row.local_gb, "disk_mb_used": disk_used_gb * 1024,
            "free_disk_mb": (row.local_gb - disk_used_gb) * 1024, "num_instances": counts.get(row.host, 0),
            "num_io_ops": use.get("current_workload", 0),
        }
    return states


def rules(conn, request: Request, options: FilterOptions) -> list[tuple[str, Callable[[str], bool]]]:
    """(filter name, whether a node passes) of each enabled filter this module implements."""
    enabled = set(options.enabled)
    out: list[tuple[str, Callable[[str], bool]]] = []
    aggregates = _aggregates_by_host(conn) if enabled & _AGGREGATE_FILTERS else {}

    def of(node: str) -> list[dict[str, str]]:
        return aggregates.get(node, [])

    if EXTRA_SPECS in enabled and request.extra_specs:
        out.append((EXTRA_SPECS, lambda n: filter_rules.instance_extra_specs_pass(of(n), request.extra_specs)))
    if TENANCY in enabled:
        out.append((TENANCY, lambda n: filter_rules.tenant_passes(of(n), request.project_id)))
    if ISOLATED_HOSTS in enabled:
        out.append((ISOLATED_HOSTS, lambda n: filter_rules.isolated_passes(
            n, request.image_id, options.isolated_images, options.isolated_hosts,
            options.restrict_isolated_hosts_to_isolated_images)))
    if NUM_INSTANCES in enabled or AGGREGATE_NUM_INSTANCES in enabled:
        counts = _instances_by_node(conn, request.uuid)
        if NUM_INSTANCES in enabled:
            out.append((NUM_INSTANCES, lambda n: counts.get(n, 0) < options.max_instances_per_host))
        if AGGREGATE_NUM_INSTANCES in enabled:
            out.append((AGGREGATE_NUM_INSTANCES, lambda n: counts.get(n, 0) < filter_rules.max_instances(
                of(n), options.max_instances_per_host)))
    if IMAGE_PROPERTIES in enabled:
        if options.image_properties_namespace:
            LOG.warning("It is no longer possible to filter on arbitrary image metadata properties, which "
                        "includes standard properties prefixed with '[filter_scheduler] "
                        "aggregate_image_properties_isolation_namespace'. You should unset this option.")
        out.append((IMAGE_PROPERTIES, lambda n: filter_rules.image_properties_pass(
            of(n), request.image_properties, options.image_properties_namespace,
            options.image_properties_separator)))
    hints = _hints(conn, request.uuid) if enabled & {SIMPLE_CIDR, JSON} else {}
    near = filter_rules.hint(hints, "build_near_host_ip")
    if SIMPLE_CIDR in enabled and near:
        cidr = filter_rules.hint(hints, "cidr", "/24")
        address = {row.host: row.host_ip for row in conn.execute(select(COMPUTE_SERVICES.c.host,
                                                                        COMPUTE_SERVICES.c.host_ip))}
        out.append((SIMPLE_CIDR, lambda n: filter_rules.cidr_passes(address.get(n), near, cidr)))
    query = filter_rules.hint(hints, "query")
    if JSON in enabled and query:
        states = host_states(conn, options, request.uuid)
        out.append((JSON, lambda n: filter_rules.json_query_passes(query, states.get(n, {}))))
    return out


def host_filter(conn, server: Mapping[str, Any], options: FilterOptions, *,
                flavor: Mapping[str, Any] | None = None) -> Callable[[str], bool] | None:
    """Whether a node may take the server under the enabled filters (its scheduler hints' included);
    None: no filter acts on this request. ``flavor``: the flavor asked for when not the server's own."""
    request = Request.of(server, flavor)
    checks = rules(conn, request, options)
    hints = scheduler_hints.host_filter(conn, request.uuid, options.enabled)
    if hints is not None:
        checks.append(("DifferentHostFilter/SameHostFilter", hints))
    if not checks:
        return None

    def passes(node: str) -> bool:
        for name, check in checks:
            if not check(node):
                LOG.debug("server %s: node %s refused by %s", request.uuid, node, name)
                return False
        return True

    return passes
