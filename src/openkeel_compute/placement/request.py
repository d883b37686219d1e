"""What a server asks Placement for, built from its flavor and image as Nova's scheduler builds it.

Pure: no I/O. ``resource_request(flavor, image_properties)`` gives a ``ResourceRequest`` whose
``query(...)`` is the GET /allocation_candidates query string (microversion 1.39):

- the unsuffixed group: VCPU = vcpus, MEMORY_MB = memory_mb, DISK_GB = root_gb + ephemeral_gb + swap
  rounded up to whole GiB (amounts of 0 are left out, as Placement refuses them);
- ``hw:cpu_policy`` (or the image's ``hw_cpu_policy``) ``dedicated``: PCPU = vcpus instead of VCPU;
  ``hw:cpu_thread_policy`` ``isolate`` then forbids HW_CPU_HYPERTHREADING and ``require`` requires it;
- ``resources:<RC>=<N>`` replaces (N = 0 removes) that class of the unsuffixed group;
  ``resources<S>:<RC>=<N>`` and ``trait<S>:<TRAIT>=required|forbidden`` form granular group ``<S>``;
  ``group_policy`` (``none`` when several groups name none);
- ``trait:<TRAIT>=required|forbidden`` of the flavor and ``trait:<TRAIT>=required`` of the image add
  required or forbidden traits to the unsuffixed group;
- the server's availability zone: ``member_of`` the zone's aggregate (``controller.providers``);
- COMPUTE_STATUS_DISABLED is always forbidden (nodes that cannot take servers), as Nova's compute status
  request filter does.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

_RESOURCES = re.compile(r"^resources([1-9][0-9]*|_[A-Za-z0-9_-]{1,63})?:([A-Z0-9_]+)$")
_TRAIT = re.compile(r"^trait([1-9][0-9]*|_[A-Za-z0-9_-]{1,63})?:([A-Z0-9_]+)$")
DISABLED = "COMPUTE_STATUS_DISABLED"


@dataclasses.dataclass
class Group:
    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    required: set[str] = dataclasses.field(default_factory=set)
    forbidden: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class ResourceRequest:
    unsuffixed: Group
    groups: dict[str, Group]
    group_policy: str | None = None

    def query(self, member_of: list[str] | None = None) -> list[tuple[str, str]]:
        """The query parameters of GET /allocation_candidates (``member_of``: any of these aggregates)."""
        params: list[tuple[str, str]] = []

        def add(suffix: str, group: Group) -> None:
            resources = {rc: n for rc, n in group.resources.items() if n > 0}
            if resources:
                params.append((f"resources{suffix}", ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))))
            traits = sorted(group.required) + [f"!{t}" for t in sorted(group.forbidden)]
            if traits:
                params.append((f"required{suffix}", ",".join(traits)))

        add("", self.unsuffixed)
        if member_of:
            params.append(("member_of", "in:" + ",".join(sorted(member_of))))
        for suffix in sorted(self.groups):
            add(suffix, self.groups[suffix])
        policy = self.group_policy or ("none" if len(self.groups) > 1 else None)
        if policy:
            params.append(("group_policy", policy))
        return params

    def total(self) -> dict[str, int]:
        """Every class asked for, summed over the groups (what the server holds once claimed)."""
        total: dict[str, int] = {}
        for group in (self.unsuffixed, *self.groups.values()):
            for rc, n in group.resources.items():
                if n > 0:
                    total[rc] = total.get(rc, 0) + n
        return total


def _traits(group: Group, trait: str, value: str) -> None:
    if value == "required":
        group.required.add(trait)
    elif value == "forbidden":
        group.forbidden.add(trait)


def resource_request(flavor: Mapping[str, Any], image_properties: Mapping[str, Any] | None = None) -> ResourceRequest:
    """The request of a server with ``flavor`` (vcpus, memory_mb, root_gb, ephemeral_gb, swap, extra_specs)
    booted from an image with ``image_properties``."""
    specs = {str(k): str(v) for k, v in (flavor.get("extra_specs") or {}).items()}
    props = {str(k): str(v) for k, v in (image_properties or {}).items()}
    vcpus = int(flavor.get("vcpus") or 0)
    disk = int(flavor.get("root_gb") or 0) + int(flavor.get("ephemeral_gb") or 0)
    disk += math.ceil(int(flavor.get("swap") or 0) / 1024)
    base = Group({"VCPU": vcpus, "MEMORY_MB": int(flavor.get("memory_mb") or 0), "DISK_GB": disk})
    cpu_policy = specs.get("hw:cpu_policy") or props.get("hw_cpu_policy")
    explicit_cpu = any(k in specs for k in ("resources:VCPU", "resources:PCPU"))
    if cpu_policy == "dedicated" and not explicit_cpu:
        base.resources["PCPU"] = base.resources.pop("VCPU")
        thread_policy = specs.get("hw:cpu_thread_policy") or props.get("hw_cpu_thread_policy")
        if thread_policy == "isolate":
            base.forbidden.add("HW_CPU_HYPERTHREADING")
        elif thread_policy == "require":
            base.required.add("HW_CPU_HYPERTHREADING")
    groups: dict[str, Group] = {}
    for key, value in specs.items():
        if m := _RESOURCES.match(key):
            suffix, rc = m.group(1) or "", m.group(2)
            group = groups.setdefault(suffix, Group()) if suffix else base
            try:
                group.resources[rc] = int(value)
            except ValueError:
                continue  # the API's extra spec validation refuses such values; an old flavor may hold one
        elif m := _TRAIT.match(key):
            suffix, trait = m.group(1) or "", m.group(2)
            _traits(groups.setdefault(suffix, Group()) if suffix else base, trait, value)
    for key, value in props.items():
        if key.startswith("trait:") and value == "required":
            base.required.add(key[len("trait:"):])
    base.forbidden.add(DISABLED)
    base.required.discard(DISABLED)
    policy = specs.get("group_policy")
    return ResourceRequest(base, groups, policy if policy in ("none", "isolate") else None)
