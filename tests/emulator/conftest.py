"""Fixtures: an emulated cluster on a real port (fast delays) and a lightkube client on it, as the controller has."""

from __future__ import annotations

import pytest
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from openkeel_compute.controller.kube import make_client
from openkeel_compute.emulator import Delays, Emulator

VM = create_namespaced_resource("kubevirt.io", "v1", "VirtualMachine", "virtualmachines")
VMI = create_namespaced_resource("kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances")
DV = create_namespaced_resource("cdi.kubevirt.io", "v1beta1", "DataVolume", "datavolumes")
CR = create_namespaced_resource("apps", "v1", "ControllerRevision", "controllerrevisions")
CIT = create_global_resource("instancetype.kubevirt.io", "v1beta1", "VirtualMachineClusterInstancetype",
                             "virtualmachineclusterinstancetypes")
CPREF = create_global_resource("instancetype.kubevirt.io", "v1beta1", "VirtualMachineClusterPreference",
                               "virtualmachineclusterpreferences")
NS = "ok-project"


@pytest.fixture
def cluster():
    emulator = Emulator(delays=Delays.fast(), tick=0.01).start()
    emulator.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    emulator.seed(header_secret())  # what server_vm's import sends (an import waits for its Secrets)
    yield emulator
    emulator.stop()


@pytest.fixture
def client(cluster):
    client = make_client(cluster.kubeconfig(), timeout=5)
    yield client
    client.close()


def instancetype(name: str = "m1.small", cpus: int = 1, memory: str = "512Mi") -> dict:
    return {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineClusterInstancetype",
            "metadata": {"name": name}, "spec": {"cpu": {"guest": cpus}, "memory": {"guest": memory}}}


def preference(name: str = "m1.small") -> dict:
    return {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineClusterPreference",
            "metadata": {"name": name}, "spec": {"devices": {"preferredDiskBus": "virtio"}}}


VM_NAME = "0b1c2d3e-0000-4000-8000-000000000001"


def header_secret(name: str = VM_NAME) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-glance", "namespace": NS},
            "data": {"header": "WC1BdXRoLVRva2VuOmFiYw=="}}


def server_vm(name: str = VM_NAME, flavor: str = "m1.small",
              url: str = "http://glance.example/v2/images/abc/file") -> dict:
    """A VirtualMachine shaped as the controller emits one for a server (root disk imported over HTTP)."""
    return {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": NS, "labels": {"openkeel.io/server-id": name}},
        "spec": {
            "runStrategy": "Manual",
            "instancetype": {"kind": "VirtualMachineClusterInstancetype", "name": flavor},
            "preference": {"kind": "VirtualMachineClusterPreference", "name": flavor},
            "dataVolumeTemplates": [{
                "metadata": {"name": f"{name}-root"},
                "spec": {"source": {"http": {"url": url, "secretExtraHeaders": [f"{name}-glance"]}},
                         "storage": {"resources": {"requests": {"storage": "1Gi"}}}}}],
            "template": {
                "metadata": {"labels": {"openkeel.io/server-id": name}},
                "spec": {
                    "domain": {"firmware": {"uuid": name},
                               "devices": {"disks": [{"name": "root", "disk": {}}],
                                           "interfaces": [{"name": "default", "masquerade": {}}]}},
                    "networks": [{"name": "default", "pod": {}}],
                    "volumes": [{"name": "root", "dataVolume": {"name": f"{name}-root"}}]}}}}
