"""Fixtures: an emulated cluster on a real port (fast delays) and a lightkube client on it, as the controller has."""

from __future__ import annotations

import pytest
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from openkeel_compute.controller.kube import http_of, make_client
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
    emulator = Emulator(delays=Delays.fast(), tick=0.01, read_images=False).start()  # glance.example: never served
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


def put(client, plural: str, name: str, verb: str, body: dict | None = None):
    """PUT a subresources.kubevirt.io verb through the client's own HTTP connection, as virtctl does."""
    http = http_of(client)
    return http.put(f"/apis/subresources.kubevirt.io/v1/namespaces/{NS}/{plural}/{name}/{verb}", json=body or {})


def phase(obj):
    return ((obj or {}).get("status") or {}).get("phase")


def printable(obj):
    return ((obj or {}).get("status") or {}).get("printableStatus")


def running(cluster, name=VM_NAME):
    return cluster.wait_for("VirtualMachine", name, NS, lambda o: printable(o) == "Running")


@pytest.fixture
def kept(tmp_path):
    """Start an emulated cluster kept in one state directory: ``kept()`` again after ``stop()`` is that
    cluster restarted (the keyword arguments go to Emulator)."""
    started = []

    def start(delays: Delays | None = None, run: bool = True, **kwargs) -> Emulator:
        """``run=False``: read back only (no controllers, no journal thread, no port)."""
        emulator = Emulator(delays=delays or Delays.fast(), tick=0.01, state_dir=tmp_path / "state",
                            **{"read_images": False, **kwargs})  # glance.example: never served
        started.append(emulator)
        return emulator.start() if run else emulator

    yield start
    for emulator in started:
        emulator.stop()


def boot(cluster, client, name: str = VM_NAME, flavor: str = "m1.small", start: bool = True) -> None:
    """A server's VM (its namespace, import Secret and flavor made as needed), started unless ``start`` is False."""
    if cluster.get("Namespace", NS) is None:
        cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    if cluster.get("Secret", f"{name}-glance", NS) is None:
        cluster.seed(header_secret(name))
    if cluster.get("VirtualMachineClusterInstancetype", flavor) is None:
        client.create(CIT.from_dict(instancetype(flavor)))
        client.create(CPREF.from_dict(preference(flavor)))
    client.create(VM.from_dict(server_vm(name, flavor)), namespace=NS)
    if start:
        assert put(client, "virtualmachines", name, "start").status_code == 202
