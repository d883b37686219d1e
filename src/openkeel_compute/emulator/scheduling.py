"""Which node a VMI's pod may go to: what kube-scheduler checks first, and inter-pod (anti-)affinity.

The emulated cluster's scheduler looks at Ready, schedulable (not cordoned) nodes, the pod's
``nodeSelector`` and its required node affinity (terms are alternatives; the expressions of a term all
hold; operators In, NotIn, Exists, DoesNotExist, Gt, Lt on labels, and ``metadata.name`` in
``matchFields``), then inter-pod affinity against the pods already bound to nodes: required
``podAffinity`` terms need a matching pod in the node's topology domain (``topologyKey``, e.g.
``kubernetes.io/hostname`` or ``topology.kubernetes.io/zone``; a pod matching its own term may start a
group), required ``podAntiAffinity`` terms need none there, and a bound pod's required anti-affinity
keeps matching pods out of its domain. Preferred terms score the nodes left (their weights, plus for
affinity, minus for anti-affinity); the best score wins, ties go to the first node by name. Resources and
taints other than NotReady are not modelled. No node left: the pod is Unschedulable with the message
kube-scheduler writes for it (its reasons sorted, as kube-scheduler sorts them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _ready(node: Mapping[str, Any]) -> bool:
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


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (an empty one matches everything, none matches nothing)."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_holds(e, labels) for e in selector.get("matchExpressions") or ())


def _term_pods(term: Mapping[str, Any], namespace: str | None, pods: list[Pod]) -> list[Pod]:
    """The bound pods a pod (anti-)affinity term selects (its namespaces, else the pod's own)."""
    namespaces = set(term.get("namespaces") or ())
    every_namespace = term.get("namespaceSelector") == {}
    return [p for p in pods if (every_namespace or p.namespace in (namespaces or {namespace}))
            and _selector_matches(term.get("labelSelector"), p.labels)]


class Pod:
    """A pod already bound to a node, as the scheduler sees it."""

    def __init__(self, namespace: str | None, labels: Mapping[str, str], node: str,
                 affinity: Mapping[str, Any] | None = None) -> None:
        self.namespace, self.labels, self.node = namespace, labels, node
        self.affinity = affinity or {}


def _topology(node: Mapping[str, Any], key: str | None) -> str | None:
    return ((node.get("metadata") or {}).get("labels") or {}).get(key or "")


def _required(affinity: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return list((affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or ())


def _inter_pod(spec: Mapping[str, Any], node: Mapping[str, Any], nodes: dict[str, Mapping[str, Any]],
               pods: list[Pod], namespace: str | None, labels: Mapping[str, str]) -> str | None:
    """Why inter-pod affinity keeps the pod off ``node`` (None: it may go there)."""
    affinity = spec.get("affinity") or {}

    def same_domain(pod: Pod, key: str | None) -> bool:
        value = _topology(node, key)
        return value is not None and pod.node in nodes and _topology(nodes[pod.node], key) == value

    for term in _required(affinity, "podAffinity"):
        matching = _term_pods(term, namespace, pods)
        if not any(same_domain(p, term.get("topologyKey")) for p in matching):
            itself = _selector_matches(term.get("labelSelector"), labels)
            if matching or not itself or _topology(node, term.get("topologyKey")) is None:
                return "didn't match pod affinity rules"
    for term in _required(affinity, "podAntiAffinity"):
        if any(same_domain(p, term.get("topologyKey")) for p in _term_pods(term, namespace, pods)):
            return "didn't match pod anti-affinity rules"
    for pod in pods:  # the anti-affinity of pods already there
        for term in _required(pod.affinity, "podAntiAffinity"):
            if _term_pods(term, pod.namespace, [Pod(namespace, labels, "")]) and same_domain(
                    pod, term.get("topologyKey")):
                return "didn't satisfy existing pods anti-affinity rules"
    return None


def _score(spec: Mapping[str, Any], node: Mapping[str, Any], nodes: dict[str, Mapping[str, Any]],
           pods: list[Pod], namespace: str | None) -> int:
    affinity = spec.get("affinity") or {}
    score = 0
    for kind, sign in (("podAffinity", 1), ("podAntiAffinity", -1)):
        for weighted in (affinity.get(kind) or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            term = weighted.get("podAffinityTerm") or {}
            value = _topology(node, term.get("topologyKey"))
            if value is not None and any(p.node in nodes and _topology(nodes[p.node], term.get("topologyKey")) == value
                                         for p in _term_pods(term, namespace, pods)):
                score += sign * int(weighted.get("weight") or 0)
    return score


def uses_pod_affinity(spec: Mapping[str, Any]) -> bool:
    affinity = spec.get("affinity") or {}
    return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def choose(vmi_spec: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]], pods: Iterable[Pod] = (),
           namespace: str | None = None, labels: Mapping[str, str] | None = None,
           first: str | None = None) -> tuple[str | None, str]:
    """(the node the pod goes to, or None with the scheduler's Unschedulable message). ``pods``: the pods
    bound to nodes; ``namespace``/``labels``: the incoming pod's; ``first``: the node preferred on a tie."""
    nodes = list(nodes)
    pods = list(pods)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    reasons: dict[str, int] = {}
    candidates = []
    for candidate in nodes:
        if (candidate.get("spec") or {}).get("unschedulable"):
            why = "were unschedulable"
        elif not _ready(candidate):
            why = "had untolerated taint {node.kubernetes.io/not-ready: }"
        elif not fits(vmi_spec, candidate):
            why = "didn't match Pod's node affinity/selector"
        else:
            why = _inter_pod(vmi_spec, candidate, by_name, pods, namespace, labels or {}) if pods or \
                uses_pod_affinity(vmi_spec) else None
        if why is None:
            candidates.append(candidate)
        else:
            reasons[why] = reasons.get(why, 0) + 1
    if candidates:
        def rank(n: Mapping[str, Any]) -> tuple[int, bool, str]:
            name = n["metadata"]["name"]
            return (-_score(vmi_spec, n, by_name, pods, namespace), name != first, name)
        return min(candidates, key=rank)["metadata"]["name"], ""
    total = len(nodes)
    text = ", ".join(sorted(f"{count} node(s) {why}" for why, count in reasons.items()))
    return None, (f"0/{total} nodes are available: {text}. preemption: 0/{total} nodes are available: {total} "
                  f"Preemption is not helpful for scheduling.")
