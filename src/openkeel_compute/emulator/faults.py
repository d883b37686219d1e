"""Faults the emulated cluster can be told to show: API errors, unschedulable VMIs, failed imports, lost nodes.

They are driven through ``Emulator.inject`` or the control endpoint ``/emulator/v1/faults``
(POST one fault as JSON, GET the active ones, DELETE to clear them all):

=================  ==========================================================================================
``api-error``      the next ``times`` requests matching ``method`` / ``resource`` (plural) / ``namespace`` /
                   ``name`` (each optional) answer ``status`` (429, 500, 503, …) after ``after`` matches
``unschedulable``  VMIs matching ``namespace`` / ``name`` stay in Scheduling with PodScheduled=False,
                   reason Unschedulable, until the fault is cleared
``import-failure`` DataVolumes matching (by their own name or their VirtualMachine's) fail their import:
                   phase Failed, Running=False with ``reason`` (default Error) and ``message``
``node-loss``      running VMIs matching now fail: phase Failed, ``status.reason`` NodeUnresponsive
``node-not-ready`` the node ``name`` stops posting Ready (``reason`` Unknown: it stops answering at all)
``node-ready``     the node ``name`` is Ready again
``migration-stall`` live migrations of VMIs matching never converge (post-copy finishes them, else aborted)
``migration-failure`` live migrations of VMIs matching fail while transferring (``message``: the reason)
``snapshot-failure`` VirtualMachineSnapshots matching (by their own name or their VirtualMachine's) fail:
                   phase Failed, condition Failure with ``message`` (the volume snapshot's error)
=================  ==========================================================================================
"""

from __future__ import annotations

import dataclasses
from typing import Any

KINDS = ("api-error", "unschedulable", "import-failure", "node-loss", "node-not-ready", "node-ready",
         "migration-stall", "migration-failure", "snapshot-failure")
API_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: the emulated API server failed this request",
    502: "the server was unable to return a response in the time allotted, but may still be processing the "
         "request",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be processing the "
         "request",
}
UNSCHEDULABLE_MESSAGE = "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: " \
                        "1 No preemption victims found for incoming pod."
IMPORT_MESSAGE = ("Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found")


@dataclasses.dataclass
class Fault:
    """One injected fault (see the module documentation for what each kind does)."""

    kind: str = "api-error"
    status: int = 500
    method: str | None = None
    resource: str | None = None  # plural, e.g. virtualmachines
    namespace: str | None = None
    name: str | None = None
    times: int = 1
    after: int = 0
    reason: str | None = None
    message: str | None = None
    matched: int = 0

    # The test double's spelling (plural=) keeps working.
    def __init__(self, status: int = 500, method: str | None = None, plural: str | None = None, times: int = 1,
                 after: int = 0, *, kind: str = "api-error", resource: str | None = None,
                 namespace: str | None = None, name: str | None = None, reason: str | None = None,
                 message: str | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(KINDS)}")
        self.kind, self.status, self.method = kind, status, method.upper() if method else None
        self.resource = resource or plural
        self.namespace, self.name, self.times, self.after = namespace, name, times, after
        self.reason, self.message, self.matched = reason, message, 0

    @property
    def plural(self) -> str | None:
        return self.resource

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        allowed = {"kind", "status", "method", "resource", "namespace", "name", "times", "after", "reason",
                   "message"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"unknown fault field {unknown[0]!r}")
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def targets(self, namespace: str | None, *names: str | None) -> bool:
        return (self.namespace in (None, namespace)) and (self.name is None or self.name in names)

    def api_match(self, method: str, resource: str | None, namespace: str | None, name: str | None) -> bool:
        """True when this request is to fail (counts the match)."""
        if self.kind != "api-error" or self.times <= 0:
            return False
        if self.method not in (None, method) or self.resource not in (None, resource):
            return False
        if not self.targets(namespace, name):
            return False
        self.matched += 1
        if self.matched <= self.after:
            return False
        self.times -= 1
        return True
