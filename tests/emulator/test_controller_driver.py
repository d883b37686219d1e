"""``[controller] driver``: emulated by default (the controller starts the built-in cluster), a kubeconfig wins."""

from __future__ import annotations

import logging
import pathlib

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node

from openkeel_compute.cmd.main import main
from openkeel_compute.controller import service
from openkeel_compute.controller.providers import provider_uuid
from openkeel_compute.emulator.service import emulated_cluster
from openkeel_compute.placement.client import PlacementClient
from tests.controller.conftest import cat, conf, db  # noqa: F401 - fixtures
from tests.emulator.conftest import CIT


def test_default_driver_is_emulated(conf):  # noqa: F811
    assert conf.controller.driver == "emulated"


def test_the_controller_writes_into_the_built_in_cluster(conf, cat, placement_service):  # noqa: F811
    cat.create("42", vcpus=2, ram=1024)
    conf.set_override("emulator_delay_scale", 0, group="controller")
    with emulated_cluster(conf) as kubeconfig:
        assert service.run(conf, kubeconfig=kubeconfig, once=True, placement_url=placement_service) == 0
        config = yaml.safe_load(pathlib.Path(kubeconfig).read_text())
        client = Client(KubeConfig.from_dict(config), trust_env=False)
        names = {o.metadata.name: o.spec for o in client.list(CIT)}
        client.close()
    assert any(spec["cpu"]["guest"] == 2 for spec in names.values()), names


def test_controller_command_starts_the_emulator_without_a_kubeconfig(conf, cat, caplog):  # noqa: F811
    cat.create("7")
    caplog.set_level(logging.INFO)
    assert main(["controller", "--config-file", conf.config_file[0], "--once"]) == 0
    assert any("built-in KubeVirt cluster listening on http://127.0.0.1:" in r.getMessage() for r in caplog.records)
    # no [placement]: the embedded Placement comes with the built-in cluster, its database under state_path
    assert any(r.getMessage().startswith("embedded Placement on http://127.0.0.1:") for r in caplog.records)
    assert (pathlib.Path(conf.state_path) / "placement" / "placement.sqlite").exists()
    assert not pathlib.Path(conf.controller.emulator_kubeconfig).exists()  # removed when the cluster stops


def test_kubernetes_driver_without_a_kubeconfig_is_refused(conf, capsys):  # noqa: F811
    extra = pathlib.Path(conf.config_file[0]).with_name("driver.conf")
    extra.write_text("[controller]\ndriver = kubernetes\n")
    assert main(["controller", "--config-file", conf.config_file[0], "--config-file", str(extra), "--once"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: [controller] driver = kubernetes needs a kubeconfig ([controller] kubeconfig or --kubeconfig)")


def test_emulator_nodes_gives_the_built_in_cluster_that_many_nodes_and_providers(
        conf, cat, placement_service):  # noqa: F811
    """An operator sizes the built-in cluster for the servers it should hold: each node is a provider."""
    cat.create("43")
    conf.set_override("emulator_delay_scale", 0, group="controller")
    conf.set_override("emulator_nodes", 3, group="controller")
    with emulated_cluster(conf) as kubeconfig:
        assert service.run(conf, kubeconfig=kubeconfig, once=True, placement_url=placement_service) == 0
        config = yaml.safe_load(pathlib.Path(kubeconfig).read_text())
        client = Client(KubeConfig.from_dict(config), trust_env=False)
        nodes = sorted(n.metadata.name for n in client.list(Node))
        client.close()
    assert nodes == ["emulated-node-1", "emulated-node-2", "emulated-node-3"]
    placement = PlacementClient.for_endpoint(placement_service, "admin:admin")
    for name in nodes:
        found = placement.provider(provider_uuid(name))
        assert found is not None and found["name"] == name


def test_emulator_nodes_below_one_is_refused(conf):  # noqa: F811
    with pytest.raises(ValueError):
        conf.set_override("emulator_nodes", 0, group="controller")


def test_the_built_in_cluster_is_kept_under_the_state_path(conf, cat, placement_service, caplog):  # noqa: F811
    """A second start finds what the first one wrote (same objects, same uids); a second cluster on the
    same state path is refused with one clear line; an empty emulator_state_dir keeps it in memory only."""
    from openkeel_compute.cmd.common import OperatorError

    cat.create("44", vcpus=3)
    conf.set_override("emulator_delay_scale", 0, group="controller")

    def instancetypes(kubeconfig):
        client = Client(KubeConfig.from_dict(yaml.safe_load(pathlib.Path(kubeconfig).read_text())), trust_env=False)
        try:
            return {o.metadata.name: o.metadata.uid for o in client.list(CIT)}
        finally:
            client.close()

    with emulated_cluster(conf) as kubeconfig:
        assert service.run(conf, kubeconfig=kubeconfig, once=True, placement_url=placement_service) == 0
        first = instancetypes(kubeconfig)
    assert first and (pathlib.Path(conf.state_path) / "emulator" / "snapshot.json").is_file()
    caplog.set_level(logging.INFO)
    with emulated_cluster(conf) as kubeconfig:
        assert instancetypes(kubeconfig) == first  # the controller did not run: the cluster kept them
        with pytest.raises(OperatorError, match="is in use by another process"), emulated_cluster(conf):
            pass
    assert any("objects read back from" in r.getMessage() for r in caplog.records)
    conf.set_override("emulator_state_dir", "", group="controller")
    with emulated_cluster(conf) as kubeconfig:
        assert instancetypes(kubeconfig) == {}
