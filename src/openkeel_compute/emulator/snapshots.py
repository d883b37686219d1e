"""VirtualMachineSnapshot, VirtualMachineSnapshotContent and VirtualMachineExport, as KubeVirt v1.9 runs them.

- **VirtualMachineSnapshot** (snapshot.kubevirt.io/v1beta1): its source VM must exist (else the snapshot
  fails: ``Failed``, condition ``Failure``; so does one the fault ``snapshot-failure`` matches). The snapshot records ``indications``: ``Online`` when the VM's
  guest runs, then ``GuestAgent`` (the agent froze the guest's filesystems for the copy, KubeVirt's
  ``fsfreeze``) or ``NoGuestAgent`` (a crash-consistent copy of a running guest). A
  VirtualMachineSnapshotContent (``vmsnapshot-content-<snapshot uid>``, owned by the snapshot: deleting the
  snapshot deletes it, KubeVirt's ``deletionPolicy: Delete``) lists one ``volumeBackups`` entry per claim
  or DataVolume of the VM; the snapshot is ``InProgress`` for ``Delays.snapshot``, then ``Succeeded`` with
  ``readyToUse: true``.
- **The data**: the built-in cluster runs no guest, so a disk holds what was imported into it. When the
  content is made, each volume's bytes are copied into the cluster's snapshot store: the DataVolume's
  HTTP source read with its extra headers (the image service's token), or zeros of the claim's size for a
  blank or non-HTTP volume. The copy stays while the content exists, whatever happens to the VM.
- **VirtualMachineExport** (export.kubevirt.io/v1) of a VirtualMachineSnapshot: ``Pending`` until the
  snapshot is ready to use and the token Secret (``spec.tokenSecretRef``, key ``token``) exists, then
  ``Ready`` with ``status.links.internal`` and ``external``: per volume the ``raw`` (``disk.img``) and
  ``gzip`` (``disk.img.gz``) URLs, served by this API server under ``/exports/`` to a request carrying the
  token (header ``x-kubevirt-export-token`` or query ``x_kubevirt_export_token``), 401 otherwise, as
  virt-exportserver answers. ``spec.ttlDuration`` ends it (``Terminated``, links gone).
"""

from __future__ import annotations

import base64
import gzip
import os
import pathlib
import re
import urllib.request
from collections.abc import Iterator
from typing import Any

from openkeel_compute.emulator.disks import claim_name
from openkeel_compute.emulator.store import ApiError, condition, now, own_copy
from openkeel_compute.kubevirt.quantity import to_bytes

EXPORT_PATH = re.compile(r"^/exports/([^/]+)/([^/]+)/volumes/([^/]+)/(disk\.img(?:\.gz)?)$")
TOKEN_HEADER = "x-kubevirt-export-token"
_CHUNK = 1 << 20
_TTL = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")




def _ttl_seconds(text: str | None) -> float | None:
    match = _TTL.match(text or "")
    if not text or not match:
        return None
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600.0 + minutes * 60.0 + seconds


class Snapshots:
    """The snapshot and export controllers of the built-in cluster (driven by Lifecycle.step)."""

    def __init__(self, lifecycle: Any) -> None:
        self.lifecycle = lifecycle
        self.store = lifecycle.store
        self.base_url = ""  # the API server's URL (set when it listens): the exports' links
        self.data_dir: pathlib.Path | None = None  # where volume copies are kept (set by the Emulator)

    # -- VirtualMachineSnapshot ------------------------------------------------------------------------

    def snapshot(self, snap: dict[str, Any], clock: float) -> None:
        status = snap.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            self.lifecycle._settle(snap)
            return
        ns = snap["metadata"].get("namespace")
        source = (snap.get("spec") or {}).get("source") or {}
        vm = self.store.lookup("VirtualMachine", source.get("name") or "", ns) \
            if source.get("kind") == "VirtualMachine" else None
        new = own_copy(snap)
        fault = self.lifecycle._fault("snapshot-failure", ns, snap["metadata"]["name"], source.get("name"))
        if vm is None or fault is not None:
            message = (f"VirtualMachine {source.get('name')} does not exist" if vm is None else
                       fault.message or "VolumeSnapshot failed: the storage could not take the snapshot")
            new["status"] = {"phase": "Failed", "readyToUse": False, "conditions": [
                condition("Progressing", "False", "Failed"),
                condition("Ready", "False", "Failed"),
                condition("Failure", "True", "Failed", message)]}
            self.lifecycle._write(new)
            return
        if not status.get("phase"):
            vmi = self.store.lookup("VirtualMachineInstance", vm["metadata"]["name"], ns)
            running = vmi is not None and (vmi.get("status") or {}).get("phase") == "Running"
            indications = []
            if running:
                agent = any(c.get("type") == "AgentConnected" and c.get("status") == "True"
                            for c in (vmi.get("status") or {}).get("conditions") or ())  # type: ignore[union-attr]
                indications = ["Online", "GuestAgent" if agent else "NoGuestAgent"]
            content = self._content(snap, vm)
            new["status"] = {"phase": "InProgress", "readyToUse": False, "sourceUID": vm["metadata"]["uid"],
                             "indications": indications,
                             "virtualMachineSnapshotContentName": content["metadata"]["name"],
                             "conditions": [condition("Progressing", "True", "InProgress", "Source locked and "
                                                       "operation in progress"), condition("Ready", "False")]}
            self.lifecycle._moved(snap, clock)
            self.lifecycle._write(new)
            return
        if not self.lifecycle._due(snap, self.lifecycle.delays.snapshot, clock):
            return
        content = self.store.lookup("VirtualMachineSnapshotContent", status.get("virtualMachineSnapshotContentName")
                                    or "", ns)
        if content is None:
            return
        done = own_copy(content)
        done["status"] = {"readyToUse": True, "creationTime": now()}
        self.lifecycle._write(done)
        new["status"].update(phase="Succeeded", readyToUse=True, creationTime=now(), conditions=[
            condition("Progressing", "False", "Operation complete"), condition("Ready", "True", "Operation complete")])
        self.lifecycle._write(new)

    def _content(self, snap: dict[str, Any], vm: dict[str, Any]) -> dict[str, Any]:
        ns, uid = snap["metadata"].get("namespace"), snap["metadata"]["uid"]
        backups = []
        templates = {(t.get("metadata") or {}).get("name"): t for t in (vm.get("spec") or {}).get(
            "dataVolumeTemplates") or ()}
        for volume in ((vm.get("spec") or {}).get("template") or {}).get("spec", {}).get("volumes") or ():
            claim = claim_name(volume)
            if not claim:
                continue
            dv = self.store.lookup("DataVolume", claim, ns)
            pvc = self.store.lookup("PersistentVolumeClaim", claim, ns)
            spec = ((dv or templates.get(claim) or {}).get("spec") or {})
            storage = (spec.get("storage") or spec.get("pvc") or (pvc or {}).get("spec") or {})
            backups.append({"volumeName": volume["name"], "volumeSnapshotName": f"vmsnapshot-{uid}-volume-"
                            f"{volume['name']}", "persistentVolumeClaim": {
                                "metadata": {"name": claim}, "spec": {
                                    "accessModes": storage.get("accessModes") or ["ReadWriteOnce"],
                                    "resources": storage.get("resources") or {}}}})
            self._copy(uid, volume["name"], ns, spec, storage)
        content = {"apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshotContent",
                   "metadata": {"name": f"vmsnapshot-content-{uid}", "namespace": ns, "ownerReferences": [
                       {"apiVersion": snap["apiVersion"], "kind": snap["kind"], "name": snap["metadata"]["name"],
                        "uid": uid, "controller": True, "blockOwnerDeletion": True}]},
                   "spec": {"virtualMachineSnapshotName": snap["metadata"]["name"],
                            "source": {"virtualMachine": {"metadata": {"name": vm["metadata"]["name"],
                                                                       "namespace": ns},
                                                          "spec": vm.get("spec") or {}}},
                            "volumeBackups": backups},
                   "status": {"readyToUse": False}}
        return self.lifecycle._write(content)

    def _path(self, snapshot_uid: str, volume: str) -> pathlib.Path:
        assert self.data_dir is not None, "the emulator gives its snapshot store a directory"
        return self.data_dir / f"{snapshot_uid}-{volume}.img"

    def _copy(self, snapshot_uid: str, volume: str, ns: str | None, spec: dict[str, Any],
              storage: dict[str, Any]) -> None:
        """The volume's bytes as they are now, into the snapshot store."""
        path = self._path(snapshot_uid, volume)
        path.parent.mkdir(parents=True, exist_ok=True)
        http = (spec.get("source") or {}).get("http") or {}
        tmp = path.with_name(f".{path.name}.tmp")
        if http.get("url"):
            headers = {}
            for name in http.get("secretExtraHeaders") or ():
                secret = self.store.lookup("Secret", name, ns) or {}
                for value in (secret.get("data") or {}).values():
                    line = base64.b64decode(value).decode(errors="replace")
                    key, _, val = line.partition(":")
                    headers[key.strip()] = val.strip()
            for line in http.get("extraHeaders") or ():
                key, _, val = line.partition(":")
                headers[key.strip()] = val.strip()
            try:
                with urllib.request.urlopen(urllib.request.Request(http["url"], headers=headers), timeout=60) as r, \
                        tmp.open("wb") as f:
                    while chunk := r.read(_CHUNK):
                        f.write(chunk)
            except OSError:
                tmp.unlink(missing_ok=True)  # the source is gone: what the disk held is not known; an empty disk
                tmp.write_bytes(b"")
        else:
            size = to_bytes(((storage.get("resources") or {}).get("requests") or {}).get("storage") or "0")
            with tmp.open("wb") as f:
                f.truncate(int(size))
        os.replace(tmp, path)

    def forget_data(self) -> None:
        """Drop the copies of contents that are gone."""
        if self.data_dir is None or not self.data_dir.is_dir():
            return
        live = {o["metadata"]["name"].removeprefix("vmsnapshot-content-")
                for o in self.store.of_kind("VirtualMachineSnapshotContent")}
        for path in self.data_dir.glob("*.img"):
            if path.name[:36] not in live:
                path.unlink(missing_ok=True)

    # -- VirtualMachineExport ----------------------------------------------------------------------------

    def export(self, exp: dict[str, Any], clock: float) -> None:
        status = exp.get("status") or {}
        phase = status.get("phase")
        if phase == "Terminated":
            self.lifecycle._settle(exp)
            return
        ns, name = exp["metadata"].get("namespace"), exp["metadata"]["name"]
        spec = exp.get("spec") or {}
        new = own_copy(exp)
        snap, ready, reason = self._source(exp)
        if phase == "Ready":
            ttl = _ttl_seconds(spec.get("ttlDuration"))
            if ttl is not None and self.lifecycle._due(exp, ttl, clock):
                new["status"] = {"phase": "Terminated", "conditions": [
                    condition("Ready", "False", "Terminated", "The export has reached its time to live")]}
                self.lifecycle._write(new)
                return
            if ready:
                return  # a source gone: Pending again, its links gone (below)
        token = self.store.lookup("Secret", spec.get("tokenSecretRef") or "", ns)
        if not ready or token is None:
            message = reason if not ready else f"Secret {spec.get('tokenSecretRef')} not found"
            if phase != "Pending" or (status.get("conditions") or [{}])[0].get("message") != message:
                new["status"] = {"phase": "Pending", "tokenSecretRef": spec.get("tokenSecretRef"),
                                 "conditions": [condition("Ready", "False", "NotReady", message)]}
                self.lifecycle._write(new)
            return
        assert snap is not None
        content = self.store.lookup("VirtualMachineSnapshotContent",
                                    (snap.get("status") or {}).get("virtualMachineSnapshotContentName") or "", ns)
        volumes = []
        for backup in ((content or {}).get("spec") or {}).get("volumeBackups") or ():
            claim = backup["persistentVolumeClaim"]["metadata"]["name"]
            base = f"{self.base_url}/exports/{ns}/{name}/volumes/{claim}"
            volumes.append({"name": claim, "formats": [{"format": "raw", "url": f"{base}/disk.img"},
                                                       {"format": "gzip", "url": f"{base}/disk.img.gz"}]})
        links = {"cert": "", "volumes": volumes}
        new["status"] = {"phase": "Ready", "tokenSecretRef": spec.get("tokenSecretRef"),
                         "serviceName": f"virt-export-{name}", "links": {"internal": links, "external": links},
                         "conditions": [condition("Ready", "True", "PodReady")]}
        self.lifecycle._moved(exp, clock)
        self.lifecycle._write(new)

    def _source(self, exp: dict[str, Any]) -> tuple[dict[str, Any] | None, bool, str]:
        ns = exp["metadata"].get("namespace")
        source = (exp.get("spec") or {}).get("source") or {}
        if source.get("kind") != "VirtualMachineSnapshot":
            return None, False, f"the built-in cluster exports VirtualMachineSnapshots, not {source.get('kind')}"
        snap = self.store.lookup("VirtualMachineSnapshot", source.get("name") or "", ns)
        if snap is None:
            return None, False, f"VirtualMachineSnapshot {source.get('name')} not found"
        if not (snap.get("status") or {}).get("readyToUse"):
            return snap, False, f"VirtualMachineSnapshot {source.get('name')} is not ready to use"
        return snap, True, ""

    def serve(self, path: str, token: str | None) -> tuple[int, Iterator[bytes] | bytes, int | None]:
        """(status, body, length) of a download from an export's link, as virt-exportserver answers it."""
        match = EXPORT_PATH.match(path)
        if not match:
            raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
        ns, name, claim, fmt = match.groups()
        with self.store.lock:
            exp = self.store.lookup("VirtualMachineExport", name, ns)
            if exp is None or (exp.get("status") or {}).get("phase") != "Ready":
                return 404, b"export not found or not ready\n", None
            secret = self.store.lookup("Secret", (exp.get("spec") or {}).get("tokenSecretRef") or "", ns) or {}
            wanted = base64.b64decode((secret.get("data") or {}).get("token") or "").decode()
            snap, ready, _reason = self._source(exp)
        if not wanted or token != wanted:
            return 401, b"Unauthorized\n", None
        if snap is None or not ready:
            return 404, b"export not found or not ready\n", None
        volume = next((b["volumeName"] for b in ((self.store.lookup(
            "VirtualMachineSnapshotContent", snap["status"].get("virtualMachineSnapshotContentName") or "", ns) or {})
            .get("spec") or {}).get("volumeBackups") or () if b["persistentVolumeClaim"]["metadata"]["name"] == claim),
            None)
        path_ = self._path(snap["metadata"]["uid"], volume) if volume else None
        if path_ is None or not path_.is_file():
            return 404, b"volume not found\n", None
        if fmt.endswith(".gz"):
            return 200, gzip.compress(path_.read_bytes()), None
        return 200, _read(path_), path_.stat().st_size


def _read(path: pathlib.Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            yield chunk
