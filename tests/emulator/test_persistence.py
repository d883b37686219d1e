"""The built-in cluster kept on disk (emulator/persist.py): every kind read back as it was, resource
versions that go on, watches from before a restart told to list again, and a process killed in the
middle of a write coming back consistent."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import httpx2 as httpx
import pytest
from lightkube.resources.core_v1 import Secret

from openkeel_compute.controller.kube import make_client
from openkeel_compute.emulator import Emulator, persist
from openkeel_compute.emulator.resources import RESOURCES
from openkeel_compute.emulator.server import node
from tests.emulator.conftest import NS, VM_NAME, boot, put, running

STOPPED = "0b1c2d3e-0000-4000-8000-000000000002"


def _secret(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}, "data": data}


def _every_kind(cluster) -> dict[str, dict]:
    return {res.kind: cluster.objects(res.kind) for res in RESOURCES}


def test_every_kind_comes_back_with_its_status_uid_and_resource_version(kept, tmp_path):
    cluster = kept()
    client = make_client(cluster.kubeconfig(), timeout=5)
    boot(cluster, client)  # Namespace, Secret, instancetype, preference, VM, DataVolume, PVC, VMI, Pod, revisions
    boot(cluster, client, STOPPED, start=False)
    running(cluster)
    cluster.seed(node("worker-7", zone="az-1"))
    cluster.seed({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
        "name": "openkeel-compute-controller", "namespace": "default"}, "spec": {"holderIdentity": "me"}})
    for kind in ("VirtualMachineInstancetype", "VirtualMachinePreference"):
        cluster.seed({"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": kind,
                      "metadata": {"name": "private", "namespace": NS}, "spec": {}})
    cluster.seed({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                  "metadata": {"name": "neutron-net", "namespace": NS}, "spec": {"config": "{}"}})
    cluster.seed({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "vol-1"},
                  "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                           "nfs": {"server": "192.0.2.1", "path": "/exports/vol-1"}}})
    cluster.seed({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
                  "metadata": {"name": "done", "namespace": NS}, "spec": {"vmiName": "gone"},
                  "status": {"phase": "Succeeded"}})
    cluster.seed({"apiVersion": "migrations.kubevirt.io/v1alpha1", "kind": "MigrationPolicy",
                  "metadata": {"name": "post-copy"}, "spec": {"allowPostCopy": True}})
    cluster.seed({"apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshot",
                  "metadata": {"name": "snap", "namespace": NS},
                  "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": VM_NAME}},
                  "status": {"phase": "Succeeded", "readyToUse": True}})
    cluster.seed({"apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshotContent",
                  "metadata": {"name": "vmsnapshot-content-x", "namespace": NS},
                  "spec": {"virtualMachineSnapshotName": "snap", "volumeBackups": []},
                  "status": {"readyToUse": True}})
    cluster.seed({"apiVersion": "export.kubevirt.io/v1", "kind": "VirtualMachineExport",
                  "metadata": {"name": "export", "namespace": NS},
                  "spec": {"source": {"apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot",
                                      "name": "snap"}, "tokenSecretRef": "token"},
                  "status": {"phase": "Terminated"}})
    # a server-side apply: its field manager's configuration is kept too
    client.apply(Secret.from_dict(_secret("applied", a="YQ==", b="Yg==")), field_manager="openkeel")
    pod = next(iter(cluster.objects("Pod").values()))["metadata"]["name"]
    console = httpx.get(f"{cluster.url}/api/v1/namespaces/{NS}/pods/{pod}/log?container=guest-console-log").text
    assert "login: " in console
    client.close()
    cluster.stop()
    before, rv = _every_kind(cluster), cluster.store.rv
    assert all(before.values()), [kind for kind, found in before.items() if not found]  # every kind is covered

    again = kept(run=False)
    assert _every_kind(again) == before
    assert again.store.rv == rv  # a clean stop: exactly where it was
    again.start()
    time.sleep(0.3)  # a few passes of the restarted controllers: a steady cluster stays steady
    assert again.store.rv == rv and _every_kind(again) == before
    assert httpx.get(f"{again.url}/api/v1/namespaces/{NS}/pods/{pod}/log?container=guest-console-log").text == console
    client = make_client(again.kubeconfig(), timeout=5)
    client.apply(Secret.from_dict(_secret("applied", a="YQ==")), field_manager="openkeel")  # b no longer applied
    assert again.get("Secret", "applied", NS)["data"] == {"a": "YQ=="}
    client.close()


def _watch(url: str, since: int) -> list[dict]:
    got = httpx.get(f"{url}/api/v1/namespaces/{NS}/secrets", timeout=10,
                    params={"watch": "true", "resourceVersion": str(since), "timeoutSeconds": "1"})
    return [json.loads(line) for line in got.text.splitlines() if line.strip()]


def test_resource_versions_go_on_and_a_watch_from_before_the_restart_lists_again(kept):
    cluster = kept()
    cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    cluster.seed(_secret("one"))
    listed = httpx.get(f"{cluster.url}/api/v1/namespaces/{NS}/secrets").json()
    old = int(listed["metadata"]["resourceVersion"])
    assert [e["type"] for e in _watch(cluster.url, old - 1)] == ["ADDED"]  # before: the change is still known
    cluster.stop()

    again = kept()
    [event] = _watch(again.url, old - 1)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    relisted = httpx.get(f"{again.url}/api/v1/namespaces/{NS}/secrets").json()
    assert [s["metadata"]["name"] for s in relisted["items"]] == ["one"]
    since = int(relisted["metadata"]["resourceVersion"])
    assert since >= old
    created = httpx.post(f"{again.url}/api/v1/namespaces/{NS}/secrets", json=_secret("two")).json()
    assert int(created["metadata"]["resourceVersion"]) > since
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in _watch(again.url, since)] == [("ADDED", "two")]


def _journal_lines(directory: pathlib.Path) -> tuple[pathlib.Path, list[bytes]]:
    path = max(directory.glob("journal-*.jsonl"))
    return path, path.read_bytes().splitlines(keepends=True)


def test_an_unfinished_last_write_is_left_out_and_what_came_before_is_kept(kept, tmp_path):
    cluster = kept(run=False)  # no threads: the test decides when the journal is written
    cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    cluster.seed(_secret("first"))
    cluster.persistence.flush()
    cluster.seed(_secret("second"))
    cluster.persistence.flush()
    state = tmp_path / "state"
    killed = tmp_path / "killed"
    shutil.copytree(state, killed)  # the directory as a kill leaves it: no final snapshot
    path, lines = _journal_lines(killed)
    [last] = [line for line in lines if b'"second"' in line]
    path.write_bytes(b"".join(lines[:lines.index(last)]) + last[:len(last) // 2])  # the write cut short

    found = persist.read(killed)
    assert found.dropped == len(last) // 2
    assert ("secrets", NS, "first") in found.objects and ("secrets", NS, "second") not in found.objects
    back = Emulator(state_dir=killed)
    try:
        assert back.get("Secret", "first", NS) == cluster.get("Secret", "first", NS)
        assert back.get("Secret", "second", NS) is None
        # the version of the lost write was reserved before it was handed out: it is never handed out again
        assert back.store.rv >= int(cluster.get("Secret", "second", NS)["metadata"]["resourceVersion"])
    finally:
        back.stop()


def test_a_snapshot_that_never_made_it_to_disk_loses_nothing(kept, tmp_path, monkeypatch):
    """Killed while writing a new snapshot: the old snapshot and both journals still say everything."""
    cluster = kept(run=False)
    cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    cluster.seed(_secret("before-the-cut"))

    def killed(*_args):
        raise OSError("killed before the rename")

    with monkeypatch.context() as patched:
        patched.setattr(persist.os, "replace", killed)
        with pytest.raises(OSError):
            cluster.persistence.compact()
    cluster.seed(_secret("after-the-cut"))
    cluster.persistence.flush()
    assert len(list((tmp_path / "state").glob("journal-*.jsonl"))) == 2
    found = persist.read(tmp_path / "state")
    assert {("secrets", NS, "before-the-cut"), ("secrets", NS, "after-the-cut")} <= set(found.objects)
    assert found.dropped == 0


def test_the_journal_alone_gives_back_what_the_last_snapshot_says(kept, tmp_path):
    """Read back after a kill (journal, no final snapshot), the cluster is what a clean stop would have
    written: objects, field managers, phase clocks and each pod's console, a soft reboot included."""
    cluster = kept()
    client = make_client(cluster.kubeconfig(), timeout=5)
    boot(cluster, client)
    running(cluster)
    client.apply(Secret.from_dict(_secret("applied", a="YQ==")), field_manager="openkeel")
    assert put(client, "virtualmachineinstances", VM_NAME, "softreboot").status_code == 202
    client.close()
    time.sleep(0.3)  # settled, and the journal thread has written it all
    killed = tmp_path / "killed"
    shutil.copytree(tmp_path / "state", killed)
    cluster.stop()
    from_journal, from_snapshot = persist.read(killed), persist.read(tmp_path / "state")
    assert from_journal.replayed > 0 and from_snapshot.replayed == 0
    assert from_journal.objects == from_snapshot.objects
    assert from_journal.applied == from_snapshot.applied
    assert from_journal.consoles == from_snapshot.consoles
    [(_boots, text)] = from_journal.consoles.values()
    assert "".join(text).count("Linux version") == 2
    uids = {o["metadata"]["uid"] for o in from_snapshot.objects.values()}
    assert {uid: round(at, 3) for uid, at in from_journal.since.items() if uid in uids} == {
        uid: round(at, 3) for uid, at in from_snapshot.since.items()}


def test_a_full_disk_leaves_no_half_line_and_loses_nothing_once_there_is_space(kept, tmp_path, monkeypatch):
    cluster = kept(run=False)
    cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    cluster.persistence.flush()
    cluster.seed(_secret("waits"))
    real = persist._write_all

    def half_then_full(fd, data):
        real(fd, data[:len(data) // 2])
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(persist, "_write_all", half_then_full)
        with pytest.raises(OSError):
            cluster.persistence.flush()
    _path, lines = _journal_lines(tmp_path / "state")
    assert all(line.endswith(b"\n") for line in lines)  # what was cut short was taken back
    found = persist.read(tmp_path / "state")
    assert ("secrets", NS, "waits") not in found.objects
    assert found.rv >= int(cluster.get("Secret", "waits", NS)["metadata"]["resourceVersion"])  # still reserved
    cluster.persistence.flush()  # space again: the records kept waiting are written
    found = persist.read(tmp_path / "state")
    assert ("secrets", NS, "waits") in found.objects and found.dropped == 0


def test_a_killed_process_comes_back_with_a_prefix_of_its_writes_and_never_reuses_a_version(tmp_path):
    """A real SIGKILL while one client creates Secrets one after another: what comes back is every
    Secret up to some point (no hole), and later writes get versions above any the client was given."""
    state = tmp_path / "state"
    program = ("import time\n"
               "from openkeel_compute.emulator import Emulator\n"
               f"e = Emulator(state_dir={str(state)!r}).start()\n"
               "print(e.url, flush=True)\n"
               "time.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        url = child.stdout.readline().strip()
        httpx.post(f"{url}/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": NS}}).raise_for_status()
        seen, answered = 0, []  # when each create was answered
        with httpx.Client(base_url=url, timeout=10) as http:
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                got = http.post(f"/api/v1/namespaces/{NS}/secrets", json=_secret(f"s-{len(answered):05d}"))
                got.raise_for_status()
                seen = max(seen, int(got.json()["metadata"]["resourceVersion"]))
                answered.append(time.monotonic())
        os.kill(child.pid, signal.SIGKILL)
        killed = time.monotonic()
    finally:
        child.kill()
        child.wait(10)
    assert len(answered) > 50
    back = Emulator(state_dir=state)
    try:
        names = sorted(name for (_ns, name) in back.objects("Secret"))
        assert names == [f"s-{i:05d}" for i in range(len(names))]  # a prefix of what was created
        lost = answered[len(names):]
        # only the last moment is lost (the journal is appended every 0.2 s; 2 s leaves room for a busy machine)
        assert all(killed - at < 2.0 for at in lost), (len(names), len(answered), killed - answered[len(names)])
        assert back.store.rv >= seen
        assert int(back.seed(_secret("after"))["metadata"]["resourceVersion"]) > seen
    finally:
        back.stop()


def test_one_state_directory_serves_one_cluster_at_a_time(kept):
    cluster = kept()
    with pytest.raises(persist.StateError, match="in use by another process"):
        kept()
    cluster.stop()
    kept().stop()  # once the first one stopped, the directory is free


def test_a_snapshot_it_cannot_read_is_refused_and_left_as_it_is(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "snapshot.json").write_text("{not json")
    with pytest.raises(persist.StateError, match="snapshot.json cannot be read"):
        Emulator(state_dir=state)
    assert (state / "snapshot.json").read_text() == "{not json"


def test_in_memory_by_default_nothing_is_recorded():
    cluster = Emulator()
    cluster.seed(node("worker-2"))
    assert cluster.store.pending is None and cluster.persistence is None
