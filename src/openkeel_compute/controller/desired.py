"""Desired state: the catalogue read from the database, turned into objects by the pure mapping.

The mapping (``kubevirt.mapping.flavor_to_kubevirt``) takes a flavor as GET /flavors/{id} returns it at
microversion 2.61 plus ``"access"``; ``model.flavor.api_body_of_row`` is the adapter from database rows to that shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from sqlalchemy import Connection, select

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.kubevirt.flavor import FlavorCheck, InvalidFlavor
from openkeel_compute.kubevirt.guard import RefusedByKubeVirt
from openkeel_compute.kubevirt.mapping import ANN_PROJECT, MANAGED_BY, MANAGER, flavor_to_kubevirt
from openkeel_compute.kubevirt.names import former_names, kubernetes_name
from openkeel_compute.kubevirt.options import MappingOptions
from openkeel_compute.model.flavor import api_body_of_row

NAMESPACE = "Namespace"


class ObjectKey(NamedTuple):
    """Identity of one Kubernetes object: kind, namespace (None when cluster-scoped), name."""

    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return ObjectKey(obj["kind"], meta.get("namespace") or None, meta["name"])


@dataclasses.dataclass(frozen=True)
class FlavorDesired:
    """What one flavor should be in the cluster, or why the mapping refused it."""

    flavor_id: str
    name: str  # Kubernetes name shared by every object of the flavor
    objects: dict[ObjectKey, dict[str, Any]]
    namespaces: dict[str, str]  # namespace -> project id, for the private copies
    error: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The flavor's name and the names earlier releases gave it (objects there are moved)."""
        return (self.name, *former_names(self.flavor_id))


def load_catalogue(conn: Connection, flavor_ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Flavor bodies by flavor id: all of them, or only ``flavor_ids`` (missing ones are absent)."""
    query = select(catalog.FLAVORS).order_by(catalog.FLAVORS.c.id)
    if flavor_ids is not None:
        wanted = sorted(set(flavor_ids))
        if not wanted:
            return {}
        query = query.where(catalog.FLAVORS.c.flavorid.in_(wanted))
    rows = [dict(r) for r in conn.execute(query).mappings()]
    internal = [r["id"] for r in rows]
    specs = catalog.extra_specs_of(conn, internal)
    access: dict[int, list[str]] = {i: [] for i in internal}
    projects = select(catalog.PROJECTS.c.flavor_id, catalog.PROJECTS.c.project_id).order_by(catalog.PROJECTS.c.id)
    if flavor_ids is not None:
        projects = projects.where(catalog.PROJECTS.c.flavor_id.in_(internal))
    for flavor_id, project_id in conn.execute(projects):
        if flavor_id in access:
            access[flavor_id].append(project_id)
    return {r["flavorid"]: api_body_of_row(r, specs[r["id"]], access[r["id"]]) for r in rows}


def namespace_object(namespace: str, project_id: str) -> dict[str, Any]:
    """The Namespace the controller creates for a project ([controller] create_namespaces, on by default)."""
    return {"apiVersion": "v1", "kind": NAMESPACE,
            "metadata": {"name": namespace, "labels": {MANAGED_BY: MANAGER},
                         "annotations": {ANN_PROJECT: project_id}}}


def desired_for(body: Mapping[str, Any], options: MappingOptions, check: FlavorCheck | None = None) -> FlavorDesired:
    """The objects of one flavor; a flavor the mapping refuses gets no objects and an error. ``check``:
    Nova's validation of a flavor body (api/flavor_checks.py), handed in by the process that runs us."""
    flavor_id = str(body["id"])
    try:
        result = flavor_to_kubevirt(body, options, check=check)
    except (InvalidFlavor, RefusedByKubeVirt) as exc:
        return FlavorDesired(flavor_id, kubernetes_name(flavor_id), {}, {}, f"refused by the mapping: {exc}")
    objects = {key_of(doc): doc for doc in result.documents()}
    namespaces = {options.namespace_for(p): p for p in result.flavor.access} if not result.flavor.is_public else {}
    return FlavorDesired(flavor_id, result.name, objects, namespaces)


def desired_state(bodies: Mapping[str, Mapping[str, Any]], options: MappingOptions, create_namespaces: bool,
                  check: FlavorCheck | None = None) -> tuple[dict[ObjectKey, dict[str, Any]], dict[str, FlavorDesired]]:
    """Every object the catalogue wants (namespaces included when the controller creates them)."""
    objects: dict[ObjectKey, dict[str, Any]] = {}
    per_flavor: dict[str, FlavorDesired] = {}
    for flavor_id, body in bodies.items():
        wanted = desired_for(body, options, check)
        per_flavor[flavor_id] = wanted
        objects.update(wanted.objects)
        if create_namespaces:
            for namespace, project in wanted.namespaces.items():
                key = ObjectKey(NAMESPACE, None, namespace)
                objects.setdefault(key, namespace_object(namespace, project))
    return objects, per_flavor
