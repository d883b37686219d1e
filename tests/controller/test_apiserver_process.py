"""The benchmark's cluster in a process of its own answers over HTTP and over its pipe."""

from __future__ import annotations

from lightkube.resources.core_v1 import Namespace

from openkeel_compute.controller.kube import make_client
from tests.controller.apiserver import ApiServerProcess
from tests.controller.helpers import CIT


def test_process_serves_and_counts():
    server = ApiServerProcess()
    try:
        server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "p"}})
        from openkeel_compute.controller.kube import RESOURCES

        client = make_client(server.kubeconfig())
        client.create(RESOURCES[CIT].from_dict({"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": CIT,
                                                "metadata": {"name": "x"},
                                                "spec": {"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}}}))
        client.close()
        assert server.count(CIT) == 1 and server.writes() == 1
    finally:
        server.stop()


def test_the_former_test_server_name_is_the_emulator():
    from tests.controller.apiserver import RunningApiServer

    server = RunningApiServer().start()
    try:
        client = make_client(server.kubeconfig())
        assert [n.metadata.name for n in client.list(Namespace)] == ["default"]
        client.close()
    finally:
        server.stop()
