"""What keeps the emulated cluster fast enough for a controller booting many servers, checked without
timing anything (tests never assert timings: bench/emulator_boot.py measures the speed)."""

from __future__ import annotations

import itertools

from openkeel_compute.controller.kube import http_of
from openkeel_compute.emulator import server


def test_the_api_server_keeps_connections_and_answers_without_nagles_wait() -> None:
    """HTTP/1.1 keep-alive, so no connection is set up per request; headers and body leave in separate
    segments, so with Nagle's algorithm on each answer would wait for the client's delayed ACK (~40 ms)."""
    assert server._Handler.protocol_version == "HTTP/1.1"
    assert server._Handler.disable_nagle_algorithm is True


def test_a_watch_reads_only_the_changes_after_its_resource_version() -> None:
    """A watcher woken by a change looks at the new end of the change record, not all 20,000 entries;
    what it gets is still every change after its resource version, oldest first."""
    from openkeel_compute.emulator.store import Store

    store = Store()
    with store.lock:
        for i in range(30):
            store.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{i}"}})
        all_rvs = [e[0] for e in store.events]
        assert all_rvs == sorted(all_rvs)
        mark = all_rvs[10]
        assert [e[0] for e in store.events_after(mark)] == [rv for rv in all_rvs if rv > mark]
        assert store.events_after(store.rv) == []
        assert [e[0] for e in store.events_after(0)] == all_rvs

    class Counting(list):
        """The record, counting how many entries a reader touches."""
        touched = 0

        def __reversed__(self):
            for item in super().__reversed__():
                Counting.touched += 1
                yield item

        def __iter__(self):
            for item in super().__iter__():
                Counting.touched += 1
                yield item

    store.events = Counting(store.events)
    with store.lock:
        store.events_after(store.rv - 2)
    assert Counting.touched == 3  # two new changes and the one that stops the reading


def test_an_import_reports_its_progress_once_a_second_not_on_every_pass() -> None:
    """The built-in CDI brings status.progress up to date once a second (scaled with the other
    durations): a thousand imports do not rewrite their DataVolumes on every pass of its controllers."""
    from openkeel_compute.emulator.lifecycle import Delays, Lifecycle
    from openkeel_compute.emulator.store import Store

    store = Store()
    store.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "p"}})
    store.put({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
               "metadata": {"name": "dv", "namespace": "p"},
               "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}}})
    life = Lifecycle(store, Delays(), [])
    clock = 100.0
    while (store.lookup("DataVolume", "dv", "p").get("status") or {}).get("phase") != "ImportInProgress":
        life.step(clock)
        clock += 0.05
    progress = []
    for _ in range(int(3 / 0.05)):  # three seconds of passes every 50 ms
        life.step(clock)
        clock += 0.05
        progress.append(store.lookup("DataVolume", "dv", "p")["status"]["progress"])
    changes = [b for a, b in itertools.pairwise(progress) if a != b]
    assert 2 <= len(changes) <= 3, changes  # about one a second, each larger than the last
    assert changes == sorted(changes, key=lambda p: float(p.rstrip("%")))


def test_a_pass_looks_only_at_what_was_written_since_it_settled(cluster, client) -> None:
    """Once a VM runs, the controllers' passes look at none of its objects (a thousand settled servers
    cost nothing); writing its VMI has the VMI and its VM looked at again, and stopping it still works."""
    import time

    from tests.emulator.conftest import (
        CIT,
        CPREF,
        NS,
        VM,
        VM_NAME,
        instancetype,
        preference,
        printable,
        put,
        server_vm,
    )

    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Running")
    time.sleep(0.2)  # a few passes: everything settles
    lifecycle = cluster.lifecycle
    looked: list[str] = []
    for owner, name in ((lifecycle, "_datavolume"), (lifecycle, "_expand"), (lifecycle, "_vmi"), (lifecycle, "_vm"),
                        (lifecycle.binder, "claim"), (lifecycle.binder, "volume"), (lifecycle.migrator, "step"),
                        (lifecycle.nodes, "node")):
        real = getattr(owner, name)
        setattr(owner, name, lambda obj, *args, _real=real: (looked.append(obj["kind"]), _real(obj, *args))[1])
    time.sleep(0.2)
    assert looked == []
    http = http_of(client)
    patched = http.patch(f"/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances/{VM_NAME}",
                         json={"metadata": {"labels": {"touched": "yes"}}},
                         headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    time.sleep(0.2)
    assert {"VirtualMachineInstance", "VirtualMachine"} <= set(looked)
    assert "DataVolume" not in looked
    put(client, "virtualmachines", VM_NAME, "stop")
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Stopped")


def test_a_vmi_waiting_to_be_scheduled_is_placed_once_until_a_node_changes(cluster, client) -> None:
    """kube-scheduler's choice for a VMI in Scheduling reads its spec and the nodes only: the passes
    that find its phase not yet due do not choose again among every node, until a node joins."""
    import time

    from openkeel_compute.emulator import Delays
    from openkeel_compute.emulator.server import node
    from tests.emulator.conftest import (
        CIT,
        CPREF,
        NS,
        VM,
        VM_NAME,
        instancetype,
        phase,
        preference,
        put,
        server_vm,
    )

    cluster.lifecycle.delays = Delays(0.02, 0.05, 0.01, 30.0, 0.02, 0.02, 0.01)  # Scheduling lasts 30 s
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: phase(o) == "Scheduling")
    time.sleep(0.1)  # the next pass chooses its node
    lifecycle = cluster.lifecycle
    placed: list[int] = []
    real = lifecycle._place
    lifecycle._place = lambda spec, *args: (placed.append(1), real(spec, *args))[1]
    time.sleep(0.3)  # dozens of passes
    assert placed == []
    cluster.seed(node("emulated-node-9"))
    deadline = time.monotonic() + 5
    while not placed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(placed) == 1
    assert phase(cluster.get("VirtualMachineInstance", VM_NAME, NS)) == "Scheduling"


def test_a_vm_waiting_for_its_import_costs_its_passes_nothing_until_the_import_moves_on(cluster, client,
                                                                                       monkeypatch) -> None:
    """While a root disk imports, the passes neither copy its DataVolume (nothing is due) nor look at the
    VM whose start waits for it; the import's end still starts the VM."""
    import time

    from openkeel_compute.emulator import Delays
    from openkeel_compute.emulator import lifecycle as lifecycle_module
    from tests.emulator.conftest import (
        CIT,
        CPREF,
        NS,
        VM,
        VM_NAME,
        instancetype,
        phase,
        preference,
        printable,
        put,
        server_vm,
    )

    cluster.lifecycle.delays = Delays(0.02, 30.0, 0.01, 0.02, 0.02, 0.02, 100.0)  # a 30 s import, no progress
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    client.create(VM.from_dict(server_vm()), namespace=NS)
    put(client, "virtualmachines", VM_NAME, "start")
    dv_name = server_vm()["spec"]["dataVolumeTemplates"][0]["metadata"]["name"]
    cluster.wait_for("DataVolume", dv_name, NS, lambda o: phase(o) == "ImportInProgress")
    time.sleep(0.1)
    lifecycle = cluster.lifecycle
    copied: list[str] = []
    looked: list[str] = []
    real_own, real_vm = lifecycle_module.own_copy, lifecycle._vm
    monkeypatch.setattr(lifecycle_module, "own_copy", lambda obj: (copied.append(obj["kind"]), real_own(obj))[1])
    lifecycle._vm = lambda vm, clock: (looked.append(vm["metadata"]["name"]), real_vm(vm, clock))[1]
    time.sleep(0.3)  # dozens of passes
    assert (copied, looked) == ([], [])
    lifecycle.delays = Delays.fast()  # the import is due now
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Running")
    assert VM_NAME in looked
