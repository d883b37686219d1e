"""Which node a VMI's pod may go to: the scheduler's node selector and required node affinity.

The emulated cluster's scheduler looks at what a real one looks at first: Ready nodes, the VMI's
``nodeSelector`` and its required node affinity (terms are alternatives; the expressions of a term
all hold; operators In, NotIn, Exists, DoesNotExist, Gt, Lt on labels, and ``metadata.name`` in
``matchFields``). Resources and taints are not modelled. No node left: the pod is Unschedulable with
the message kube-scheduler writes for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _ready(node: Mapping[str, Any]) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False  # cordoned
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _holds(expression: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = expression.get("key"), expression.get("operator")
    wanted = list(expression.get("values") or ())
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    fields = {"metadata.name": (node.get("metadata") or {}).get("name")}
    expressions = term.get("matchExpressions") or ()
    field_expressions = term.get("matchFields") or ()
    if not expressions and not field_expressions:
        return False  # an empty term matches nothing
    return all(_holds(e, labels) for e in expressions) and all(_holds(e, fields) for e in field_expressions)


def fits(vmi_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether a pod of ``vmi_spec`` may run on ``node`` (selector and required affinity only)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in (vmi_spec.get("nodeSelector") or {}).items()):
        return False
    required = (((vmi_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    return any(_term_matches(term, node) for term in terms)


def choose(vmi_spec: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> tuple[str | None, str]:
    """(the node the pod goes to, or None with the scheduler's Unschedulable message)."""
    nodes = list(nodes)
    candidates = [n for n in nodes if _ready(n) and fits(vmi_spec, n)]
    if candidates:
        return min(c["metadata"]["name"] for c in candidates), ""
    total = len(nodes)
    cordoned = sum(1 for n in nodes if (n.get("spec") or {}).get("unschedulable"))
    not_ready = sum(1 for n in nodes if not _ready(n)) - cordoned
    reasons = []
    if total - not_ready - cordoned:
        reasons.append(f"{total - not_ready - cordoned} node(s) didn't match Pod's node affinity/selector")
    if cordoned:
        reasons.append(f"{cordoned} node(s) were unschedulable")
    if not_ready:
        reasons.append(f"{not_ready} node(s) had untolerated taint {{node.kubernetes.io/not-ready: }}")
    return None, (f"0/{total} nodes are available: {', '.join(reasons)}. preemption: 0/{total} nodes are "
                  f"available: {total} Preemption is not helpful for scheduling.")
