"""The reconcile decision, pure: desired objects and observed objects in, actions and problems out.

No I/O here (kopf's lesson): the engine observes, calls ``plan`` and carries the actions out, so every
rule below — what counts as drift, what is never touched — is testable with plain dictionaries.

Rules:
- a desired object that is missing is created (POST: an object that appeared meanwhile gives 409, never a
  take-over); one that differs is server-side applied, pinned to the resourceVersion we saw; when
  something must be *removed* (a stale openkeel.io/ annotation, spec fields we did not write) the whole
  object is replaced (PUT, same pin), because apply cannot remove fields another manager owns;
- an object is only ever changed or deleted when it carries ``app.kubernetes.io/managed-by=openkeel``;
  a foreign object where we want ours is a *conflict*, reported and left alone;
- a managed object nobody wants any more is deleted. Only instancetypes and preferences are in scope:
  VirtualMachines (and their ControllerRevisions) are never observed, so never deleted; nor is a
  server's own instancetype or preference (labelled ``openkeel.io/server-id``): it is its server's,
  whatever the catalogue says;
- a managed object of a flavor found under another name than the flavor's (a name an earlier release
  gave it) is *moved*: the object under the new name is created (or brought in step) first, and the old
  one is deleted only after that, by a delete action that names the key it moved to (``moved_to``). When
  the new name is taken by an object we do not manage, the old object stays and the conflict is reported;
- namespaces are created (when desired) but never updated or deleted, not even when emptied, and an
  existing one is used as it is, whoever made it; a namespaced object whose namespace is missing and
  not about to be created is reported, not attempted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from openkeel_compute.controller.desired import NAMESPACE, ObjectKey
from openkeel_compute.kubevirt.mapping import ANN_ID, MANAGED_BY, MANAGER
from openkeel_compute.kubevirt.server import SERVER_ID

OWN_ANNOTATION_PREFIX = "openkeel.io/"

CREATE, APPLY, REPLACE, DELETE = "create", "apply", "replace", "delete"
CONFLICT, NAMESPACE_MISSING = "conflict", "namespace-missing"
# Why a namespace is missing when the controller was told not to create namespaces.
NAMESPACES_OFF = " ([controller] create_namespaces is off: create it, or turn the option on)"


@dataclasses.dataclass(frozen=True)
class Action:
    verb: str  # create | apply | replace | delete
    key: ObjectKey
    body: dict[str, Any] | None  # what to send (None for delete)
    observed: dict[str, Any] | None  # what we saw (for preconditions), None for create
    reason: str
    moved_to: ObjectKey | None = None  # a delete that ends a move: run it only once this key was written


@dataclasses.dataclass(frozen=True)
class Problem:
    key: ObjectKey
    kind: str  # conflict | namespace-missing
    message: str


@dataclasses.dataclass
class Plan:
    actions: list[Action] = dataclasses.field(default_factory=list)
    problems: list[Problem] = dataclasses.field(default_factory=list)
    in_sync: list[ObjectKey] = dataclasses.field(default_factory=list)

    @property
    def writes(self) -> int:
        return len(self.actions)


def is_managed(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == MANAGER


def is_servers(obj: Mapping[str, Any]) -> bool:
    """Whether the object is a server's own (its instancetype or preference), not a flavor's."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return SERVER_ID in labels


def flavor_id_of(obj: Mapping[str, Any] | None) -> str | None:
    """The flavor id an object of ours carries in its annotations."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ANN_ID)
    return value if isinstance(value, str) else None


def _foreign_fields(desired: Any, observed: Any, path: str) -> list[str]:
    """Paths present in observed but absent from desired (dicts only; lists compare whole)."""
    if not isinstance(desired, Mapping) or not isinstance(observed, Mapping):
        return []
    found = []
    for key, value in observed.items():
        if key not in desired:
            found.append(f"{path}.{key}")
        else:
            found.extend(_foreign_fields(desired[key], value, f"{path}.{key}"))
    return found


def _spec_differences(desired: Any, observed: Any, path: str = "spec") -> list[str]:
    if desired == observed:
        return []
    if isinstance(desired, Mapping) and isinstance(observed, Mapping):
        out = []
        for key in sorted(set(desired) | set(observed), key=str):
            out.extend(_spec_differences(desired.get(key), observed.get(key), f"{path}.{key}"))
        return out
    return [path]


def drift(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> list[str]:
    """Why observed is not what we want; empty when they agree on everything we own."""
    reasons = _spec_differences(desired.get("spec"), observed.get("spec"))
    d_meta, o_meta = desired.get("metadata") or {}, observed.get("metadata") or {}
    o_labels = o_meta.get("labels") or {}
    for key, value in (d_meta.get("labels") or {}).items():
        if o_labels.get(key) != value:
            reasons.append(f"label {key}")
    d_ann, o_ann = d_meta.get("annotations") or {}, o_meta.get("annotations") or {}
    for key, value in d_ann.items():
        if o_ann.get(key) != value:
            reasons.append(f"annotation {key}")
    for key in o_ann:
        if key.startswith(OWN_ANNOTATION_PREFIX) and key not in d_ann:
            reasons.append(f"annotation {key} is stale")
    return reasons


def replacement(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """The full object for a PUT: our spec, our metadata, others' labels and annotations kept."""
    o_meta = observed.get("metadata") or {}
    d_meta = desired.get("metadata") or {}
    annotations = {k: v for k, v in (o_meta.get("annotations") or {}).items()
                   if not k.startswith(OWN_ANNOTATION_PREFIX)}
    annotations.update(d_meta.get("annotations") or {})
    labels = dict(o_meta.get("labels") or {})
    labels.update(d_meta.get("labels") or {})
    meta = {**{k: v for k, v in d_meta.items() if k not in ("labels", "annotations")},
            "labels": labels, "annotations": annotations, "resourceVersion": o_meta.get("resourceVersion")}
    return {**desired, "metadata": meta}


def _pinned(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """The applied config with the observed resourceVersion: the server refuses it (409) if the object
    changed since we looked, so an object that became someone else's in between is never taken over."""
    rv = (observed.get("metadata") or {}).get("resourceVersion")
    if rv is None:
        return dict(desired)
    return {**desired, "metadata": {**desired["metadata"], "resourceVersion": rv}}


def plan(desired: Mapping[ObjectKey, dict[str, Any]], observed: Mapping[ObjectKey, dict[str, Any]],
         namespaces: Collection[str] | None = None, namespace_hint: str = "") -> Plan:
    """Compare; ``observed`` must cover exactly the names being reconciled (its managed extras are deleted).

    ``namespaces`` are the namespaces that exist, or None when that is unknown (rendering);
    ``namespace_hint`` is appended to the report of a missing namespace (why it was not created).
    """
    result = Plan()
    observed = {key: obj for key, obj in observed.items() if not is_servers(obj)}
    creating = {key.name for key in desired if key.kind == NAMESPACE and key not in observed}
    namespace_actions: list[Action] = []
    for key, want in desired.items():
        seen = observed.get(key)
        if key.kind == NAMESPACE:
            if seen is None:
                namespace_actions.append(Action(CREATE, key, want, None, "namespace missing"))
            else:
                result.in_sync.append(key)
            continue
        if seen is None:
            ns = key.namespace
            if ns is not None and namespaces is not None and ns not in namespaces and ns not in creating:
                result.problems.append(Problem(key, NAMESPACE_MISSING,
                                               f"namespace {ns} does not exist{namespace_hint}"))
            else:
                result.actions.append(Action(CREATE, key, want, None, "missing"))
            continue
        if not is_managed(seen):
            result.problems.append(Problem(
                key, CONFLICT, f"{key} exists without {MANAGED_BY}={MANAGER}: not ours, left alone"))
            continue
        reasons = drift(want, seen)
        if not reasons:
            result.in_sync.append(key)
        elif any(r.endswith(" is stale") for r in reasons) or _foreign_fields(want.get("spec"), seen.get("spec"),
                                                                               "spec"):
            # Something must go away: apply only adds and changes, a PUT of the whole object removes.
            result.actions.append(Action(REPLACE, key, replacement(want, seen), seen, ", ".join(reasons)))
        else:
            result.actions.append(Action(APPLY, key, _pinned(want, seen), seen, ", ".join(reasons)))
    # Where each flavor's objects belong now: (kind, namespace, flavor id) -> desired key.
    home = {(key.kind, key.namespace, fid): key for key, want in desired.items()
            if key.kind != NAMESPACE and (fid := flavor_id_of(want)) is not None}
    moves: list[Action] = []
    for key, seen in observed.items():
        if key in desired or key.kind == NAMESPACE or not is_managed(seen):
            continue
        fid = flavor_id_of(seen)
        new_key = home.get((key.kind, key.namespace, fid)) if fid is not None else None
        if new_key is None:
            result.actions.append(Action(DELETE, key, None, seen, "no flavor wants it"))
        elif new_key in observed and not is_managed(observed[new_key]):
            result.problems.append(Problem(
                key, CONFLICT, f"{key} keeps its former name {key.name}: {new_key.name} is taken by an object "
                               f"without {MANAGED_BY}={MANAGER}"))
        elif not any(p.key == new_key for p in result.problems):
            moves.append(Action(DELETE, key, None, seen, "readable names", moved_to=new_key))
    result.actions.extend(moves)  # last: each only after the object it moves to was written
    result.actions[:0] = namespace_actions  # namespaces first: the objects that follow need them
    return result
