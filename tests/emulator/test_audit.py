"""The emulator's audit log: each request in the terms RBAC authorizes (verb, group, resource, subresource,
namespace), opt-in by argument or by OPENKEEL_EMULATOR_AUDIT_LOG."""

from __future__ import annotations

import json

import httpx2
import pytest
from lightkube import ApiError
from lightkube.resources.core_v1 import Namespace

from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.kube import USER_AGENT, make_client
from openkeel_compute.controller.lease import LeaderElector
from openkeel_compute.emulator import Delays, Emulator
from openkeel_compute.emulator.audit import ENV, attributes
from tests.emulator.conftest import VM, VM_NAME, server_vm


@pytest.mark.parametrize(("method", "path", "params", "expected"), [
    ("GET", "/api/v1/namespaces", {}, ("list", "", "namespaces", None, None, None)),
    ("GET", "/api/v1/namespaces/p1", {}, ("get", "", "namespaces", None, "p1", "p1")),
    ("PUT", "/api/v1/namespaces/p1/finalize", {}, ("update", "", "namespaces", "finalize", "p1", "p1")),
    ("GET", "/api/v1/namespaces/p1/pods/vl-1/log", {}, ("get", "", "pods", "log", "p1", "vl-1")),
    ("GET", "/api/v1/nodes", {"watch": "true"}, ("watch", "", "nodes", None, None, None)),
    ("GET", "/apis/kubevirt.io/v1/virtualmachines", {}, ("list", "kubevirt.io", "virtualmachines", None, None, None)),
    ("PATCH", "/apis/kubevirt.io/v1/namespaces/p1/virtualmachines/vm", {},
     ("patch", "kubevirt.io", "virtualmachines", None, "p1", "vm")),
    ("PUT", "/apis/kubevirt.io/v1/namespaces/p1/virtualmachines/vm/status", {},
     ("update", "kubevirt.io", "virtualmachines", "status", "p1", "vm")),
    ("PUT", "/apis/subresources.kubevirt.io/v1/namespaces/p1/virtualmachines/vm/start", {},
     ("update", "subresources.kubevirt.io", "virtualmachines", "start", "p1", "vm")),
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", {},
     ("create", "coordination.k8s.io", "leases", None, "default", None)),
    ("DELETE", "/api/v1/namespaces/p1/secrets/s", {}, ("delete", "", "secrets", None, "p1", "s")),
    ("DELETE", "/api/v1/namespaces/p1/secrets", {}, ("deletecollection", "", "secrets", None, "p1", None)),
])
def test_attributes_as_the_authorizer_sees_them(method, path, params, expected):
    got = attributes(method, path, params)
    keys = ("verb", "apiGroup", "resource", "subresource", "namespace", "name")
    assert tuple(got[k] for k in keys) == expected


@pytest.mark.parametrize("path", ["/api", "/apis", "/apis/kubevirt.io/v1", "/healthz", "/emulator/v1/faults"])
def test_discovery_and_the_emulators_own_endpoints_are_not_requests_on_resources(path):
    assert attributes("GET", path, {}) is None


def _entries(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_controller_client_is_logged_with_its_user_agent(tmp_path):
    log = tmp_path / "audit.jsonl"
    with Emulator(delays=Delays.fast(), tick=0.01, audit_log=str(log), read_images=False) as cluster:
        client = make_client(cluster.kubeconfig(), timeout=5)
        assert LeaderElector(Gateway(client), "lease", "default", "me", duration=15, renew_interval=5).try_acquire_or_renew()
        list(client.list(Namespace))
        with pytest.raises(ApiError):
            client.get(VM, "absent", namespace="nowhere")
        httpx2.get(f"{cluster.url}/api/v1/nodes", headers={"User-Agent": "kubectl/v1.32"})
        client.close()
    seen = [(e["verb"], e["resource"], e["namespace"], e["code"], e["userAgent"]) for e in _entries(log)]
    assert seen == [("get", "leases", "default", 404, USER_AGENT), ("create", "leases", "default", 201, USER_AGENT),
                    ("list", "namespaces", None, 200, USER_AGENT),
                    ("get", "virtualmachines", "nowhere", 404, USER_AGENT),
                    ("list", "nodes", None, 200, "kubectl/v1.32")]


def test_watches_and_subresource_verbs_are_logged(tmp_path, monkeypatch):
    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv(ENV, str(log))  # the environment variable alone turns it on
    with Emulator(delays=Delays.fast(), tick=0.01, read_images=False) as cluster:
        cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ok-project"}})
        cluster.seed(server_vm())
        base = f"{cluster.url}/apis"
        with httpx2.Client() as http:
            http.get(f"{base}/kubevirt.io/v1/virtualmachines", params={"watch": "true", "timeoutSeconds": "1"})
            http.put(f"{base}/subresources.kubevirt.io/v1/namespaces/ok-project/virtualmachines/{VM_NAME}/start",
                     content=b"{}")
    seen = [(e["verb"], e["apiGroup"], e["resource"], e["subresource"]) for e in _entries(log)]
    assert seen == [("watch", "kubevirt.io", "virtualmachines", None),
                    ("update", "subresources.kubevirt.io", "virtualmachines", "start")]


def test_off_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    emulator = Emulator()
    assert emulator.audit is None
