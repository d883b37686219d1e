"""[kubevirt] oslo.config options build the mapping's plain options."""

from __future__ import annotations

from pathlib import Path

from oslo_config import cfg

from openkeel_compute.conf.kubevirt import list_opts, mapping_options, register_opts
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS


def test_defaults_match_the_mapping_defaults() -> None:
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf([])
    assert mapping_options(conf) == DEFAULT_OPTIONS


def test_site_settings_reach_the_mapping(tmp_path: Path) -> None:
    path = tmp_path / "openkeel.conf"
    path.write_text("[kubevirt]\nnamespace_prefix = ok-\npci_alias_resources = nic-x710:intel.com/X710_VF\n"
                    "vgpu_type_resources = nvidia-222:nvidia.com/GRID\nlarge_page_size = 1Gi\n")
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf([], default_config_files=[str(path)])
    options = mapping_options(conf)
    assert (options.namespace_for("proj"), dict(options.pci_alias_resources), options.vgpu_resource(),
            options.large_page_size) == ("ok-proj", {"nic-x710": "intel.com/X710_VF"}, "nvidia.com/GRID", "1Gi")


def test_list_opts_names_the_group_and_every_option() -> None:
    [(group, opts)] = list_opts()
    assert group.name == "kubevirt"
    assert {o.name for o in opts} == {
        "namespace_prefix", "trait_label_prefix", "aggregate_label_prefix", "capability_label_prefix",
        "pci_alias_resources", "vgpu_type_resources", "default_vgpu_type", "resource_class_resources",
        "large_page_size", "swap_cloud_init"}
