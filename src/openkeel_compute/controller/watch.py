"""The watch cache: the servers' VirtualMachines, VMIs and DataVolumes as the cluster last showed them.

``Snapshot`` is what one pass sees (from the cache, or from three cluster-wide lists when the cache is
not in step); ``WatchedObjects`` keeps the cache current with one watch per kind, so that a pass reads no
object from the cluster. Both hold the API server's JSON, never client-side model objects.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from openkeel_compute.kubevirt import mapping
from openkeel_compute.kubevirt.names import server_vm_name
from openkeel_compute.kubevirt.server import SERVER_ID

if TYPE_CHECKING:
    from openkeel_compute.controller.gateway import Gateway

LOG = logging.getLogger(__name__)
#: the kinds watched: (attribute of Snapshot, API group/version, plural)
WATCHED = (("vms", "kubevirt.io/v1", "virtualmachines"), ("vmis", "kubevirt.io/v1", "virtualmachineinstances"),
           ("dvs", "cdi.kubevirt.io/v1beta1", "datavolumes"))
SELECTOR = f"{mapping.MANAGED_BY}={mapping.MANAGER}"

ObjectView = tuple[dict[str, Any] | None, dict[str, Any] | None, list[dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The servers' VMs, VMIs and DataVolumes as one pass saw them."""

    vms: dict[tuple[str, str], dict[str, Any]]
    vmis: dict[tuple[str, str], dict[str, Any]]
    dvs: dict[tuple[str, str], list[dict[str, Any]]]  # (namespace, server id) -> its DataVolumes
    cached: bool = False  # from the watches: may lag the cluster by an event

    def look(self, namespace: str, uuid: str) -> ObjectView:
        key = (namespace, server_vm_name(uuid))
        return self.vms.get(key), self.vmis.get(key), list(self.dvs.get(key, ()))

    @classmethod
    def of(cls, vms: list[dict[str, Any]], vmis: list[dict[str, Any]], dvs: list[dict[str, Any]], *,
           cached: bool = False) -> Snapshot:
        """A snapshot of listed objects: VMs and VMIs by (namespace, name), DataVolumes by their server."""
        return cls({key_of(o): o for o in vms}, {key_of(o): o for o in vmis}, _by_server(dvs), cached=cached)


def _by_server(dvs: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """DataVolumes by (namespace, the server named by their label)."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for dv in dvs:
        server = (dv["metadata"].get("labels") or {}).get(SERVER_ID)
        if server:
            found.setdefault((dv["metadata"].get("namespace") or "", server), []).append(dv)
    return found


def key_of(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


class WatchedObjects:
    """The servers' VMs, VMIs and DataVolumes (labelled managed-by openkeel, every namespace), kept current
    by one watch per kind.

    Each kind is listed once (paged), then watched from the list's resourceVersion; a watch that ends is
    resumed from the last version seen, a 410 Expired or any error relists. While a kind is not in step
    (starting, or after an error) ``snapshot()`` returns None and the loop lists instead.
    """

    def __init__(self, cluster: Gateway, *, watch_timeout: int = 300, retry_delay: float = 1.0) -> None:
        self.cluster = cluster
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self._lock = threading.Lock()
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {kind: {} for kind, _a, _p in WATCHED}
        self._synced: dict[str, bool] = {kind: False for kind, _a, _p in WATCHED}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> WatchedObjects:
        for kind, api, plural in WATCHED:
            thread = threading.Thread(target=self._run, args=(kind, f"/apis/{api}/{plural}"),
                                      name=f"openkeel-watch-{plural}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def synced(self) -> bool:
        with self._lock:
            return all(self._synced.values())

    def snapshot(self) -> Snapshot | None:
        with self._lock:
            if not all(self._synced.values()):
                return None
            return Snapshot(dict(self._objects["vms"]), dict(self._objects["vmis"]),
                            _by_server(self._objects["dvs"].values()), cached=True)

    def _run(self, kind: str, path: str) -> None:
        while not self._stop.is_set():
            try:
                version = self._relist(kind, path)
                while not self._stop.is_set():
                    version = self._watch(kind, path, version)
            except Exception as exc:  # noqa: BLE001 - any failure: out of step, list again after a pause
                with self._lock:
                    self._synced[kind] = False
                LOG.info("watch of %s: %s; listing again", path.rsplit("/", 1)[-1], exc)
                self._stop.wait(self.retry_delay)

    def _relist(self, kind: str, path: str) -> str:
        items, version = self.cluster.list_json(path, SELECTOR)
        with self._lock:
            self._objects[kind] = {key_of(obj): obj for obj in items}
            self._synced[kind] = True
        return version

    def _watch(self, kind: str, path: str, version: str) -> str:
        for line in self.cluster.watch_lines(path, SELECTOR, version, self.watch_timeout):
            if self._stop.is_set():
                break
            event = orjson.loads(line)
            obj = event.get("object") or {}
            kind_of_event = event.get("type")
            if kind_of_event == "ERROR":
                raise RuntimeError(f"watch ended: {obj.get('code')} {obj.get('message')}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind_of_event == "BOOKMARK":
                continue
            with self._lock:
                if kind_of_event == "DELETED":
                    self._objects[kind].pop(key_of(obj), None)
                else:
                    self._objects[kind][key_of(obj)] = obj
        return version
