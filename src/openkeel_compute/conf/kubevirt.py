"""[kubevirt] options: what the flavor mapping needs to know about the site.

The config owner wires ``register_opts``/``list_opts`` into conf/__init__.py; the mapping itself only
sees the plain ``MappingOptions`` that ``mapping_options(conf)`` builds.
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from openkeel_compute.conf import groups
from openkeel_compute.kubevirt.options import MappingOptions

GROUP = cfg.OptGroup("kubevirt", title="KubeVirt mapping", help="How flavors become KubeVirt objects.")

OPTS = [
    cfg.StrOpt("namespace_prefix", default="",
               help="Prefix of the namespace that holds a project's objects; the rest is the project id "
                    "sanitised to a DNS-1123 label."),
    cfg.StrOpt("trait_label_prefix", default="openkeel.io/trait.",
               help="Node label prefix of Placement traits (<prefix><TRAIT>=true): label each node with the traits "
                    "it has; trait extra specs select nodes by these labels."),
    cfg.StrOpt("aggregate_label_prefix", default="openkeel.io/aggregate.",
               help="Node label prefix of host-aggregate metadata (<prefix><key>=<value>)."),
    cfg.StrOpt("capability_label_prefix", default="openkeel.io/capability.",
               help="Node label prefix of ComputeCapabilitiesFilter capabilities."),
    cfg.DictOpt("pci_alias_resources", default={},
                help="Nova [pci] alias name -> KubeVirt permittedHostDevices resource name, "
                     "e.g. nic-x710:intel.com/X710_VF."),
    cfg.DictOpt("vgpu_type_resources", default={},
                help="vGPU mdev type -> KubeVirt mediated device resource name, "
                     "e.g. nvidia-222:nvidia.com/GRID_A100_4C."),
    cfg.StrOpt("default_vgpu_type",
               help="mdev type a resources:VGPU request means; unset = the only entry of vgpu_type_resources."),
    cfg.DictOpt("resource_class_resources", default={},
                help="Placement resource class (PGPU, FPGA, CUSTOM_*) -> device plugin resource name."),
    cfg.StrOpt("large_page_size", default="2Mi", choices=["2Mi", "1Gi"],
               help="Page size used for hw:mem_page_size=large."),
    cfg.BoolOpt("swap_cloud_init", default=True,
                help="Add cloud-init lines that format and enable the swap disk of a flavor with swap."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(groups.own(GROUP))
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]


def mapping_options(conf: cfg.ConfigOpts) -> MappingOptions:
    """The mapping's options from a ConfigOpts on which register_opts was called."""
    group: Any = conf.kubevirt
    return MappingOptions(
        namespace_prefix=group.namespace_prefix,
        trait_label_prefix=group.trait_label_prefix,
        aggregate_label_prefix=group.aggregate_label_prefix,
        capability_label_prefix=group.capability_label_prefix,
        pci_alias_resources=dict(group.pci_alias_resources),
        vgpu_type_resources=dict(group.vgpu_type_resources),
        default_vgpu_type=group.default_vgpu_type,
        resource_class_resources=dict(group.resource_class_resources),
        large_page_size=group.large_page_size,
        swap_cloud_init=group.swap_cloud_init,
    )
