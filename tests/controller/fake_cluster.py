"""A small fake of the cluster gateway (controller/gateway.py), at its interface: what the steps' unit
tests set up as the cluster's objects, and the calls the steps made."""

from __future__ import annotations

from typing import Any

from openkeel_compute.controller.desired import ObjectKey
from openkeel_compute.kubevirt.names import server_vm_name


class FakeCluster:
    def __init__(self) -> None:
        self.vms: dict[str, dict[str, Any]] = {}  # server uuid -> its VM
        self.vmis: dict[str, dict[str, Any]] = {}
        self.dvs: dict[str, list[dict[str, Any]]] = {}
        self.secrets: dict[str, list[str]] = {}
        self.nodes: set[str] = set()
        self.sizing: dict[str, list[ObjectKey]] = {}  # server uuid -> its own instancetypes and preferences
        self.revisions: dict[str, list[str]] = {}  # instancetype or preference name -> its ControllerRevisions
        self.patches: list[tuple[str, str, Any]] = []  # (kind, name, body) of each patch sent
        self.applies: list[dict[str, Any]] = []  # the body of each apply sent
        self.launchers: list[dict[str, Any]] = []  # the launcher pods ``pods`` lists (by their created-by label)
        self.logs: dict[str, bytes] = {}  # pod name -> its guest-console-log container's log
        self.calls: list[tuple[Any, ...]] = []
        self.fail: Exception | None = None  # raised by every write when set

    # -- what a test sets up -------------------------------------------------------------------------

    def vmi_in(self, uuid: str, phase: str, uid: str = "vmi-1") -> None:
        self.vmis[uuid] = {"metadata": {"name": server_vm_name(uuid), "uid": uid}, "status": {"phase": phase}}

    def dv_in(self, uuid: str, name: str, phase: str) -> None:
        self.dvs.setdefault(uuid, []).append({"metadata": {"name": name}, "status": {"phase": phase}})

    def verbs(self) -> list[str]:
        return [call[3] for call in self.calls if call[0] == "subresource"]

    # -- the gateway's interface the steps use ---------------------------------------------------------

    def _write(self, *call: Any) -> None:
        if self.fail is not None:
            raise self.fail
        self.calls.append(call)

    def look(self, namespace: str, uuid: str) -> tuple[Any, Any, list[dict[str, Any]]]:
        return self.vms.get(uuid), self.vmis.get(uuid), list(self.dvs.get(uuid, ()))

    def vmi(self, namespace: str, uuid: str) -> dict[str, Any] | None:
        return self.vmis.get(uuid)

    def subresource(self, namespace: str, name: str, verb: str) -> None:
        self._write("subresource", namespace, name, verb)

    def apply(self, body: dict[str, Any]) -> None:
        self._write("apply", body["kind"], body["metadata"]["name"])
        self.applies.append(body)

    def applied(self, body: dict[str, Any]) -> dict[str, Any]:
        self.apply(body)
        return {**body, "metadata": {**body["metadata"], "uid": f"uid-{body['metadata']['name']}"}}

    def ensure_namespace(self, name: str, project_id: str) -> None:
        self._write("namespace", name)

    def delete(self, key: ObjectKey) -> None:
        self._write("delete", key.kind, key.name)

    def delete_server(self, namespace: str, uuid: str) -> None:
        self._write("delete_server", namespace, uuid)

    def sizing_of(self, namespace: str, uuid: str) -> list[ObjectKey]:
        return list(self.sizing.get(uuid, ()))

    def revisions_of(self, namespace: str, object_name: str) -> list[ObjectKey]:
        return [ObjectKey("ControllerRevision", namespace, name) for name in self.revisions.get(object_name, ())]

    def secrets_of(self, namespace: str, uuid: str) -> list[str]:
        return list(self.secrets.get(uuid, ()))

    def node_exists(self, name: str) -> bool:
        return name in self.nodes

    def patch(self, kind: str, namespace: str, name: str, body: Any, *, patch: str = "json") -> bool:
        self._write("patch", kind, name, patch)
        self.patches.append((kind, name, body))
        return True

    def pods(self, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
        return [p for p in self.launchers
                if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())]

    def pod_log(self, namespace: str, name: str, container: str, tail: int | None, limit: int) -> bytes | None:
        if self.fail is not None:
            raise self.fail
        self.calls.append(("pod_log", name, container, tail))
        return self.logs.get(name)
