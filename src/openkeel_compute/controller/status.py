"""``flavor status``: for each flavor, are its objects in step with the catalogue, and if not, why.

It runs the same planner as the controller, read-only: what the controller *would* write is exactly
what is out of sync. Pending outbox rows (with their attempts and last error) are shown too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import Engine

from openkeel_compute.controller import outbox
from openkeel_compute.controller.desired import (
    NAMESPACE,
    FlavorDesired,
    ObjectKey,
    desired_for,
    load_catalogue,
    namespace_object,
)
from openkeel_compute.controller.engine import Backend, _namespace_keys
from openkeel_compute.controller.plan import NAMESPACES_OFF, flavor_id_of, is_managed, plan
from openkeel_compute.db.api import reader
from openkeel_compute.kubevirt.flavor import FlavorCheck
from openkeel_compute.kubevirt.names import former_names, kubernetes_name
from openkeel_compute.kubevirt.options import MappingOptions


@dataclasses.dataclass
class FlavorStatus:
    flavor_id: str
    name: str  # Kubernetes name
    exists: bool  # in the catalogue
    objects: int  # objects of the flavor in sync
    reasons: list[str]

    @property
    def in_sync(self) -> bool:
        return not self.reasons


def flavor_statuses(engine: Engine, backend: Backend, options: MappingOptions, create_namespaces: bool = True,
                    flavor_id: str | None = None, check: FlavorCheck | None = None) -> list[FlavorStatus]:
    """Status of one flavor (also a deleted one whose objects linger) or of all flavors and leftovers.
    ``check``: Nova's validation of a flavor body, as the controller runs it."""
    with reader(engine) as conn:
        bodies = load_catalogue(conn, None if flavor_id is None else [flavor_id])
    names = None if flavor_id is None else [kubernetes_name(flavor_id), *former_names(flavor_id)]
    observed = backend.observe(names)
    rows: dict[str, list[outbox.Row]] = {}
    for row in outbox.pending_for(engine, flavor_id):
        rows.setdefault(row.flavor_id, []).append(row)
    wanted: dict[str, FlavorDesired] = {fid: desired_for(body, options, check) for fid, body in bodies.items()}
    if flavor_id is not None and flavor_id not in wanted:
        wanted[flavor_id] = FlavorDesired(flavor_id, kubernetes_name(flavor_id), {}, {})
    # Managed objects no catalogue flavor explains: a deleted flavor's leftovers.
    known = {name for w in wanted.values() for name in w.names}
    for key, obj in observed.objects.items():
        if key.kind != NAMESPACE and key.name not in known and is_managed(obj):
            fid = flavor_id_of(obj) or key.name
            wanted.setdefault(fid, FlavorDesired(fid, key.name, {}, {}))
            known.add(key.name)
    by_name: dict[str, dict[ObjectKey, dict[str, Any]]] = {}
    for key, obj in observed.objects.items():
        by_name.setdefault(key.name, {})[key] = obj
    statuses = []
    for fid, want in wanted.items():
        reasons: list[str] = []
        if want.error:
            reasons.append(want.error)
        desired = dict(want.objects)
        if create_namespaces:
            desired.update({ObjectKey(NAMESPACE, None, ns): namespace_object(ns, p) for ns, p in want.namespaces.items()})
        mine = {k: v for name in want.names for k, v in by_name.get(name, {}).items()
                if k.kind != NAMESPACE}
        mine.update({k: v for k, v in observed.objects.items() if k.kind == NAMESPACE})
        mine.update(_namespace_keys(observed))
        result = plan(desired, mine if not want.error else {}, observed.namespaces,
                      "" if create_namespaces else NAMESPACES_OFF)
        if not want.error:
            reasons.extend(_action_text(a) for a in result.actions)
            reasons.extend(p.message for p in result.problems)
        for row in rows.get(fid, []):
            text = f"outbox row {row.id} ({row.operation}) pending"
            if row.attempts:
                text += f" after {row.attempts} attempt(s): {row.last_error}"
            reasons.append(text)
        in_sync_objects = sum(1 for k in result.in_sync if k.kind != NAMESPACE)
        statuses.append(FlavorStatus(fid, want.name, fid in bodies, in_sync_objects, reasons))
    statuses.sort(key=lambda s: s.flavor_id)
    return statuses


def _action_text(action) -> str:
    if action.moved_to:
        return f"{action.key}: under its former name, moves to {action.moved_to.name}"
    verb = _verb_text(action.verb)
    # "missing", "namespace missing": the reason already says it
    return f"{action.key}: {action.reason}" if verb in action.reason else f"{action.key}: {verb} ({action.reason})"


def _verb_text(verb: str) -> str:
    return {"create": "missing", "apply": "differs", "replace": "differs",
            "delete": "left over from a deleted flavor or project"}.get(verb, verb)


def format_table(statuses: list[FlavorStatus]) -> str:
    if not statuses:
        return "no flavors\n"
    width = max(len("FLAVOR"), *(len(s.flavor_id) for s in statuses))
    lines = [f"{'FLAVOR'.ljust(width)}  STATUS       OBJECTS  WHY"]
    for s in statuses:
        state = "in-sync" if s.in_sync else ("deleted" if not s.exists else "out-of-sync")
        if not s.exists and not s.in_sync:
            state = "leftover"
        first, *rest = s.reasons or [""]
        lines.append(f"{s.flavor_id.ljust(width)}  {state.ljust(11)}  {str(s.objects).rjust(7)}  {first}".rstrip())
        lines.extend(f"{'':{width}}  {'':11}  {'':7}  {reason}" for reason in rest)
    return "\n".join(lines) + "\n"
