"""Pure mapping between Nova flavors and KubeVirt instancetypes, preferences and VM fragments (no I/O).

See docs/kubevirt-mapping.md. Fidelity counts over Nova's 525 extra-spec validators are
exact 8 / partial 458 / approximate 8 / node-level 10 / none 19 / n/a 22: seed 000's counts with
quota:cpu_quota moved from approximate to none, because KubeVirt admission refuses
resources.limits.cpu on a VM that references an instancetype.
"""

from openkeel_compute.kubevirt.flavor import Flavor, InvalidFlavor, parse_flavor
from openkeel_compute.kubevirt.guard import (
    RefusedByKubeVirt,
    check_vm,
    cluster_refusals,
    instancetype_conflicts,
)
from openkeel_compute.kubevirt.image import ImagePreference, ImageRefused, preference_with_image
from openkeel_compute.kubevirt.mapping import FlavorObjects, ReportEntry, flavor_to_kubevirt
from openkeel_compute.kubevirt.names import kubernetes_name, project_namespace
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS, MappingOptions
from openkeel_compute.kubevirt.reverse import (
    ImportResult,
    NotAnInstancetype,
    import_instancetype,
    objects_to_flavor,
)
from openkeel_compute.kubevirt.rules import Fidelity, Rule, rule_for_extra_spec

__all__ = [
    "DEFAULT_OPTIONS", "Fidelity", "Flavor", "FlavorObjects", "ImagePreference", "ImageRefused", "ImportResult",
    "InvalidFlavor", "MappingOptions", "NotAnInstancetype", "RefusedByKubeVirt", "ReportEntry", "Rule",
    "check_vm", "cluster_refusals", "flavor_to_kubevirt", "import_instancetype", "instancetype_conflicts",
    "kubernetes_name", "objects_to_flavor", "parse_flavor", "preference_with_image", "project_namespace",
    "rule_for_extra_spec",
]
