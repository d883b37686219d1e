"""The rendered configuration loads: `openkeel-compute status` reads each overlay's files as the pods get
them (ConfigMap keys, Secrets as OS_<GROUP>__<OPTION> variables) and its checks pass."""

from __future__ import annotations

import json
import pathlib

import certifi
import pytest

from openkeel_compute.cmd.main import main
from openkeel_compute.conf import build_conf
from openkeel_compute.db import api as db_api
from openkeel_compute.emulator import Emulator
from tests.deploy.conftest import find

CONFIG_DIR = "/etc/openkeel-compute"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _files(objects, tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    """The ConfigMap's files written to tmp_path; {key: path}."""
    config = find(objects, "ConfigMap", "openkeel-compute-config")
    paths = {}
    for key, text in config["data"].items():
        paths[key] = tmp_path / key
        paths[key].write_text(text)
    return paths


def _args(objects, deployment: str, files: dict[str, pathlib.Path]) -> list[str]:
    """The container's --config-file arguments, pointed at the written files."""
    (container,) = find(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    paths = [args[i + 1] for i, a in enumerate(args) if a == "--config-file"]
    assert all(p.startswith(CONFIG_DIR + "/") for p in paths)
    return [x for p in paths for x in ("--config-file", str(files[p.rsplit("/", 1)[1]]))]


def _status(args: list[str], capsys) -> dict[str, tuple[int, str]]:
    capsys.readouterr()
    try:
        main(["status", "--json", *args])
    finally:
        db_api.dispose_all()
    out = capsys.readouterr().out
    return {c["check"]: (c["result"], c["details"]) for c in json.loads(out)["checks"]}


@pytest.fixture(scope="module")
def database(rendered, tmp_path_factory):
    """One database for the module, migrated by what the db-sync Job runs; its URL is the Secret's value,
    as the pods get it."""
    tmp = tmp_path_factory.mktemp("database")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OS_DATABASE__CONNECTION", f"sqlite:///{tmp}/openkeel.sqlite")
        objects = rendered["production"]
        job = find(objects, "Job", "openkeel-compute-db-sync")["spec"]["template"]["spec"]["containers"][0]
        files = _files(objects, tmp)
        args = [x if not x.startswith(CONFIG_DIR + "/") else str(files[x.rsplit("/", 1)[1]]) for x in job["args"]]
        assert args[:2] == ["db", "sync"] and main(args) == 0
        db_api.dispose_all()
        yield


@pytest.mark.parametrize("render", ["production", "dev"])
def test_api_configuration_loads_and_passes_status(rendered, render, tmp_path, database, capsys):
    objects = rendered[render]
    args = _args(objects, "openkeel-compute-api", _files(objects, tmp_path))
    checks = _status(args, capsys)
    assert checks["Database"][0] == 0, checks
    assert "at revision" in checks["Database"][1]
    assert checks["API Authentication"][0] == 0, checks  # Keystone in both: noauth2 cannot serve a Service
    # The API's configuration names no cluster: the API never calls Kubernetes.
    assert "no [controller] kubeconfig" in checks["Kubernetes"][1]


PASSWORDS = ("OS_KEYSTONE_AUTHTOKEN__PASSWORD", "OS_SERVICE_USER__PASSWORD", "OS_PLACEMENT__PASSWORD",
             "OS_NEUTRON__PASSWORD", "OS_CINDER__PASSWORD")


@pytest.mark.parametrize("render", ["production", "dev"])
@pytest.mark.parametrize(("deployment", "passwords"), [("openkeel-compute-api", PASSWORDS),
                                                       ("openkeel-compute-controller", PASSWORDS[1:])])
def test_keystone_passwords_come_from_the_secret(rendered, render, deployment, passwords, tmp_path, monkeypatch):
    from keystoneauth1 import loading
    from keystonemiddleware import auth_token

    from openkeel_compute.conf import cinder as cinder_conf
    from openkeel_compute.conf import neutron as neutron_conf
    from openkeel_compute.controller import images
    from openkeel_compute.placement import client as placement_client

    objects = rendered[render]
    args = _args(objects, deployment, _files(objects, tmp_path))
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in find(objects, "Deployment", deployment)
           ["spec"]["template"]["spec"]["containers"][0]["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    for name in passwords:
        # Required: a pod without the Secret does not start (rather than failing every login).
        assert env[name]["key"] == "password" and "optional" not in env[name], env[name]
        assert env[name]["name"].startswith("openkeel-compute-keystone"), env[name]
        monkeypatch.setenv(name, f"value of {name}")
    conf = build_conf(args)
    images.register_opts(conf)  # [service_user]: the controller registers it when it starts
    neutron_conf.register_neutron_opts(conf)  # [neutron] and [cinder]: at their first use
    cinder_conf.register_cinder_opts(conf)
    assert placement_client.configured(conf)
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    groups = {"OS_KEYSTONE_AUTHTOKEN__PASSWORD": "keystone_authtoken", "OS_SERVICE_USER__PASSWORD": "service_user",
              "OS_PLACEMENT__PASSWORD": "placement", "OS_NEUTRON__PASSWORD": "neutron",
              "OS_CINDER__PASSWORD": "cinder"}
    keystones = set()
    for name in passwords:
        group = groups[name]
        assert loading.load_auth_from_conf_options(conf, group) is not None
        assert conf[group].password == f"value of {name}"
        assert conf[group].username == "openkeel-compute"
        keystones.add(conf[group].auth_url)
    assert len(keystones) == 1, keystones  # one Keystone, named alike everywhere
    assert conf.placement.region_name == "RegionOne" and conf.placement.valid_interfaces == ["internal", "public"]
    # Neutron and Cinder found in the same catalog, with Nova's service tokens beside the caller's
    assert conf.neutron.region_name == "RegionOne" and conf.neutron.valid_interfaces == ["internal", "public"]
    assert conf.cinder.os_region_name == "RegionOne" and conf.cinder.catalog_info == "volumev3::internalURL"
    assert conf.service_user.send_service_user_token is True


def test_controller_reaches_the_cluster_with_the_in_cluster_kubeconfig(rendered, tmp_path, database, capsys):
    """The controller's files, with the service account's mount and the API server's address replaced
    by an emulated cluster's: the Kubernetes check lists namespaces with the mounted token."""
    objects = rendered["production"]
    files = _files(objects, tmp_path)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("token-of-the-service-account")
    (account / "ca.crt").write_text(pathlib.Path(certifi.where()).read_text())  # any CA bundle: plain HTTP here
    with Emulator() as cluster:
        kubeconfig = files["in-cluster.kubeconfig"].read_text()
        assert "https://kubernetes.default.svc" in kubeconfig and SERVICE_ACCOUNT_DIR in kubeconfig
        kubeconfig = kubeconfig.replace("https://kubernetes.default.svc", cluster.url)
        files["in-cluster.kubeconfig"].write_text(kubeconfig.replace(SERVICE_ACCOUNT_DIR, str(account)))
        files["controller.conf"].write_text(files["controller.conf"].read_text().replace(
            f"{CONFIG_DIR}/in-cluster.kubeconfig", str(files["in-cluster.kubeconfig"])))
        args = _args(objects, "openkeel-compute-controller", files)
        checks = _status(args, capsys)
    assert checks["Kubernetes"][0] == 0, checks
    assert cluster.url in checks["Kubernetes"][1]
