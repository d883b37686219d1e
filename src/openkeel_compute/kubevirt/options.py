"""Site options of the mapping: a plain, immutable dataclass (conf/kubevirt.py builds it from oslo.config)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from openkeel_compute.kubevirt.names import project_namespace


@dataclasses.dataclass(frozen=True, slots=True)
class MappingOptions:
    """What the mapping needs to know about the site; every field has a safe default."""

    #: prepended to the sanitised project id to name a project's namespace
    namespace_prefix: str = ""
    #: node label of a Placement trait: <prefix><TRAIT> = "true" (published by the OpenKeel node agent)
    trait_label_prefix: str = "openkeel.io/trait."
    #: node label of a host-aggregate metadata key: <prefix><key> = <value>
    aggregate_label_prefix: str = "openkeel.io/aggregate."
    #: node label of a ComputeCapabilitiesFilter capability: <prefix><name> = <value>
    capability_label_prefix: str = "openkeel.io/capability."
    #: Nova [pci] alias name -> KubeVirt permittedHostDevices resource name
    pci_alias_resources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: vGPU mdev type (e.g. nvidia-222) -> KubeVirt permittedHostDevices mediated device resource name
    vgpu_type_resources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: the mdev type a resources:VGPU request means; None = the only configured type, if exactly one
    default_vgpu_type: str | None = None
    #: other Placement resource classes (PGPU, FPGA, CUSTOM_*...) -> device plugin resource name
    resource_class_resources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: page size used for hw:mem_page_size=large (KubeVirt has no "best available")
    large_page_size: str = "2Mi"
    #: emit the cloud-init lines that format and enable the swap disk
    swap_cloud_init: bool = True

    def namespace_for(self, project_id: str) -> str:
        """The namespace holding a private flavor's copy for this project."""
        return project_namespace(project_id, self.namespace_prefix)

    def vgpu_resource(self) -> str | None:
        """Resource name of a resources:VGPU request, or None when the site did not configure one."""
        if self.default_vgpu_type is not None:
            return self.vgpu_type_resources.get(self.default_vgpu_type)
        if len(self.vgpu_type_resources) == 1:
            return next(iter(self.vgpu_type_resources.values()))
        return None


DEFAULT_OPTIONS = MappingOptions()
