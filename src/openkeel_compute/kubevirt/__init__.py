"""Pure mapping between Nova flavors and KubeVirt instancetypes, preferences and VM fragments (no I/O).

See docs/kubevirt-mapping.md. Fidelity counts over Nova's 525 extra-spec validators are
exact 8 / partial 458 / approximate 8 / node-level 10 / none 19 / n/a 22: seed 000's counts with
quota:cpu_quota moved from approximate to none, because KubeVirt admission refuses
resources.limits.cpu on a VM that references an instancetype.
"""

import importlib
from typing import Any

# Names are imported on first use (PEP 562): the API process registers the [kubevirt] options
# through kubevirt.options and must not pay for the mapping tables it never runs.
_WHERE = {
    "Flavor": "flavor", "InvalidFlavor": "flavor", "parse_flavor": "flavor",
    "RefusedByKubeVirt": "guard", "check_vm": "guard", "cluster_refusals": "guard",
    "instancetype_conflicts": "guard",
    "ImagePreference": "image", "ImageRefused": "image", "preference_with_image": "image",
    "FlavorObjects": "mapping", "ReportEntry": "mapping", "flavor_to_kubevirt": "mapping",
    "kubernetes_name": "names", "project_namespace": "names",
    "DEFAULT_OPTIONS": "options", "MappingOptions": "options",
    "ImportResult": "reverse", "NotAnInstancetype": "reverse", "import_instancetype": "reverse",
    "objects_to_flavor": "reverse",
    "Fidelity": "rules", "Rule": "rules", "rule_for_extra_spec": "rules",
    "ServerObjects": "server", "ServerOptions": "server", "compose": "server",
    "Fault": "vmstatus", "Observation": "vmstatus", "observe": "vmstatus",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_WHERE)  # noqa: PLE0605 - a list, built from the name table
