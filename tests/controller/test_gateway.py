"""The cluster gateway against the built-in cluster: one retry policy for every request but the watches and
the Lease, the one reach into lightkube's internals, and the answers its callers rely on."""

from __future__ import annotations

import httpx2
import pytest
from lightkube import ApiError

from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.kube import USER_AGENT, Retry, http_of, make_client, transient
from openkeel_compute.emulator import Fault
from tests.controller.helpers import add_namespaces


@pytest.fixture
def gateway(apiserver):
    retries: list[str] = []
    cluster = Gateway(make_client(apiserver.kubeconfig()), Retry(3, 0.01, on_retry=retries.append))
    cluster.retries = retries  # type: ignore[attr-defined]
    yield cluster
    cluster.close()


def test_http_of_is_the_client_lightkube_sends_with(apiserver, gateway):
    http = http_of(gateway.client)
    assert isinstance(http, httpx2.Client) and http.headers["User-Agent"] == USER_AGENT
    add_namespaces(apiserver, "p1")
    assert http.get("/api/v1/namespaces/p1").status_code == 200


def test_reads_and_writes_are_retried_on_5xx_and_409s_are_not(apiserver, gateway):
    add_namespaces(apiserver, "p1")
    apiserver.inject(Fault(503, method="GET", plural="namespaces", times=2))
    assert gateway.get("Namespace", "p1") is not None and gateway.retries == ["HTTP 503", "HTTP 503"]
    apiserver.inject(Fault(409, method="DELETE", plural="secrets", times=1))
    with pytest.raises(ApiError) as refused:
        gateway.delete(ObjectKey("Secret", "p1", "s"))
    assert refused.value.status.code == 409 and len(gateway.retries) == 2
    gateway.delete(ObjectKey("Secret", "p1", "s"))  # already gone is what a delete wants


def test_a_retry_policy_that_runs_out_raises_a_transient_error(apiserver, gateway):
    apiserver.inject(Fault(503, method="GET", plural="nodes", times=10))
    with pytest.raises(httpx2.HTTPStatusError) as caught:
        gateway.nodes()
    assert transient(caught.value) and len(gateway.retries) == 3


def test_the_lease_is_never_retried(apiserver, gateway):
    apiserver.inject(Fault(503, method="GET", plural="leases", times=1))
    with pytest.raises(ApiError):
        gateway.lease("lease", "default")
    assert gateway.retries == [] and gateway.lease("lease", "default") is None


def test_a_verb_whose_end_state_is_there_is_done_and_a_missing_object_is_not(apiserver, gateway):
    apiserver.inject(Fault(409, method="PUT", plural="virtualmachines", message="VM is already running"))
    gateway.subresource("p1", "vm", "start")  # 409 "already running": done
    with pytest.raises(httpx2.HTTPStatusError):
        gateway.subresource("p1", "vm", "restart")  # no such VM


def test_a_patch_of_an_object_that_is_not_there_says_so(apiserver, gateway):
    add_namespaces(apiserver, "p1")
    assert gateway.patch("PersistentVolumeClaim", "p1", "absent", {"spec": {}}, patch="merge") is False
    assert gateway.pod_log("p1", "absent", "guest-console-log", None, 1024) is None


def test_an_apply_answers_the_object_as_the_cluster_has_it_and_errors_as_lightkube_raises_them(apiserver, gateway):
    add_namespaces(apiserver, "p1")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "p1"},
              "data": {"k": "dg=="}}
    apiserver.inject(Fault(503, method="PATCH", plural="secrets", times=1))
    made = gateway.applied(secret)
    assert made["kind"] == "Secret" and made["metadata"]["uid"] and made["data"] == {"k": "dg=="}
    assert gateway.retries == ["HTTP 503"]
    assert gateway.get("Secret", "s", "p1")["metadata"]["uid"] == made["metadata"]["uid"]
    apiserver.inject(Fault(403, method="PATCH", plural="secrets", message="no writes here"))
    with pytest.raises(ApiError) as refused:  # the API server's Status, as lightkube's patch raised it
        gateway.apply(secret)
    assert refused.value.status.code == 403 and "no writes here" in str(refused.value)
    with pytest.raises(ApiError) as strict:  # strict field validation, as every write of the controller
        gateway.apply({**secret, "metadata": {**secret["metadata"], "name": "t"}, "unknownField": 1})
    assert strict.value.status.code in (400, 422)
