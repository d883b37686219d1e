"""Discovery names every kind with the short names and categories its real API server gives, so that
kubectl resolves ``get vm,vmi,dv`` and ``get all`` (the README's command, run with the real kubectl)."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from openkeel_compute.controller.kube import http_of
from tests.emulator.conftest import (
    CIT,
    CPREF,
    NS,
    VM,
    VM_NAME,
    instancetype,
    preference,
    put,
    running,
    server_vm,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Kubernetes' own discovery (core kinds) and the CRDs KubeVirt's virt-operator and CDI install.
EXPECTED = {
    ("", "v1", "namespaces"): (["ns"], None),
    ("", "v1", "nodes"): (["no"], None),
    ("", "v1", "secrets"): (None, None),
    ("", "v1", "pods"): (["po"], ["all"]),
    ("", "v1", "persistentvolumeclaims"): (["pvc"], None),
    ("", "v1", "persistentvolumes"): (["pv"], None),
    ("coordination.k8s.io", "v1", "leases"): (None, None),
    ("apps", "v1", "controllerrevisions"): (None, None),
    ("kubevirt.io", "v1", "virtualmachines"): (["vm", "vms"], ["all"]),
    ("kubevirt.io", "v1", "virtualmachineinstances"): (["vmi", "vmis"], ["all"]),
    ("kubevirt.io", "v1", "virtualmachineinstancemigrations"): (["vmim", "vmims"], ["all"]),
    ("migrations.kubevirt.io", "v1alpha1", "migrationpolicies"): (None, None),
    ("instancetype.kubevirt.io", "v1beta1", "virtualmachineinstancetypes"): (
        ["vminstancetype", "vminstancetypes", "vmf", "vmfs"], ["all"]),
    ("instancetype.kubevirt.io", "v1beta1", "virtualmachineclusterinstancetypes"): (
        ["vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"], None),
    ("instancetype.kubevirt.io", "v1beta1", "virtualmachinepreferences"): (["vmpref", "vmprefs", "vmp", "vmps"],
                                                                           ["all"]),
    ("instancetype.kubevirt.io", "v1beta1", "virtualmachineclusterpreferences"): (["vmcp", "vmcps"], None),
    ("cdi.kubevirt.io", "v1beta1", "datavolumes"): (["dv", "dvs"], ["all"]),
    # Multus's CRD
    ("k8s.cni.cncf.io", "v1", "network-attachment-definitions"): (["net-attach-def"], None),
}


def test_discovery_gives_every_kind_its_short_names_and_categories(cluster, client):
    http = http_of(client)
    seen = {}
    for group_version in sorted({(g, v) for g, v, _ in EXPECTED}):
        path = f"/apis/{group_version[0]}/{group_version[1]}" if group_version[0] else "/api/v1"
        got = http.get(path)
        assert got.status_code == 200, got.text
        for entry in got.json()["resources"]:
            if "/" in entry["name"]:
                assert "shortNames" not in entry and "categories" not in entry  # subresources have none
                continue
            seen[(*group_version, entry["name"])] = (entry.get("shortNames"), entry.get("categories"))
            assert "watch" in entry["verbs"]  # kubectl get -w needs it; the cluster serves watches
    assert seen == EXPECTED


def _kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        reason = "kubectl is not installed: the README's kubectl command is checked with the real one"
        if os.environ.get("OPENKEEL_REQUIRE_KUBECTL") == "1":
            pytest.fail(reason + " and OPENKEEL_REQUIRE_KUBECTL=1", pytrace=False)
        pytest.skip(reason)
    return path


def readme_kubectl_command() -> str:
    """The README's command for looking inside the built-in cluster, as written (line breaks joined)."""
    text = " ".join((ROOT / "README.md").read_text().split())
    found = re.search(r"`(kubectl --kubeconfig var/emulator\.kubeconfig get [^`]+)`", text)
    assert found, "README.md no longer shows the kubectl command for the built-in cluster"
    return found.group(1)


def test_the_readmes_kubectl_command_lists_the_vm_its_vmi_and_datavolume(cluster, client, tmp_path):
    kubectl = _kubectl()
    command = readme_kubectl_command()
    assert command == "kubectl --kubeconfig var/emulator.kubeconfig get vm,vmi,dv -A"
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    running(cluster)
    (tmp_path / "var").mkdir()
    (tmp_path / "var/emulator.kubeconfig").write_text(yaml.safe_dump(cluster.kubeconfig()))
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}  # a discovery cache of its own
    got = subprocess.run([kubectl, *command.split()[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert got.returncode == 0, got.stderr
    for kind, name in (("virtualmachine.kubevirt.io", VM_NAME), ("virtualmachineinstance.kubevirt.io", VM_NAME),
                       ("datavolume.cdi.kubevirt.io", f"{VM_NAME}-root")):
        assert re.search(rf"^{NS}\s+{re.escape(kind)}/{name}\s", got.stdout, re.MULTILINE), got.stdout
    everything = subprocess.run([kubectl, "--kubeconfig", "var/emulator.kubeconfig", "get", "all", "-A", "-o", "name"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert everything.returncode == 0, everything.stderr
    names = everything.stdout.split()
    assert f"virtualmachine.kubevirt.io/{VM_NAME}" in names
    assert f"virtualmachineinstance.kubevirt.io/{VM_NAME}" in names
    assert any(n.startswith(f"pod/virt-launcher-{VM_NAME}-") for n in names)
    assert not any(n.startswith(("virtualmachineclusterinstancetype", "namespace/", "node/")) for n in names)
