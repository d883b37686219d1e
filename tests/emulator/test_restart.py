"""What runs in the built-in cluster across a restart of its process: guests keep running (a node runs
them while the controller is away), paused ones stay paused, stopped ones stay stopped, and whatever was
under way (an import, a VMI being scheduled) goes on from where wall-clock time says it is."""

from __future__ import annotations

import dataclasses
import json
import time

from openkeel_compute.controller.kube import make_client
from openkeel_compute.emulator import Delays
from tests.emulator.conftest import NS, VM_NAME, boot, phase, printable, put, running

PAUSED = "0b1c2d3e-0000-4000-8000-000000000003"
STOPPED = "0b1c2d3e-0000-4000-8000-000000000004"
LATER = "0b1c2d3e-0000-4000-8000-000000000005"


def _conditions(obj) -> dict:
    return {c["type"]: c.get("status") for c in (obj.get("status") or {}).get("conditions") or ()}


def test_running_paused_and_stopped_vms_are_found_as_they_were(kept):
    cluster = kept()
    client = make_client(cluster.kubeconfig(), timeout=5)
    for name in (VM_NAME, PAUSED, STOPPED):
        boot(cluster, client, name)
    for name in (VM_NAME, PAUSED, STOPPED):
        running(cluster, name)
    assert put(client, "virtualmachineinstances", PAUSED, "pause").status_code == 202
    assert put(client, "virtualmachines", STOPPED, "stop").status_code == 202
    cluster.wait_for("VirtualMachine", STOPPED, NS, lambda o: printable(o) == "Stopped")
    cluster.wait_for("VirtualMachine", PAUSED, NS, lambda o: printable(o) == "Paused")
    vmis = cluster.objects("VirtualMachineInstance")
    pods = cluster.objects("Pod")
    client.close()
    cluster.stop()

    again = kept()
    time.sleep(0.2)  # passes of the restarted controllers
    assert again.objects("VirtualMachineInstance") == vmis  # same uids, phases, addresses: nothing restarted
    assert again.objects("Pod") == pods
    assert printable(again.get("VirtualMachine", VM_NAME, NS)) == "Running"
    assert printable(again.get("VirtualMachine", PAUSED, NS)) == "Paused"
    assert _conditions(again.get("VirtualMachineInstance", PAUSED, NS))["Paused"] == "True"
    assert printable(again.get("VirtualMachine", STOPPED, NS)) == "Stopped"
    assert again.get("VirtualMachineInstance", STOPPED, NS) is None

    client = make_client(again.kubeconfig(), timeout=5)
    assert put(client, "virtualmachineinstances", PAUSED, "unpause").status_code == 202
    assert put(client, "virtualmachines", STOPPED, "start").status_code == 202
    boot(again, client, LATER)
    running(again, STOPPED)
    running(again, LATER)
    addresses = [v["status"]["interfaces"][0]["ipAddress"] for v in again.objects("VirtualMachineInstance").values()]
    assert len(set(addresses)) == len(addresses) == 4  # new guests get addresses the others do not have
    assert printable(again.get("VirtualMachine", PAUSED, NS)) == "Running"
    client.close()


def test_a_build_cut_off_while_its_vmi_was_scheduled_finishes_after_the_restart(kept):
    slow = dataclasses.replace(Delays.fast(), scheduling=60.0)
    cluster = kept(delays=slow)
    client = make_client(cluster.kubeconfig(), timeout=5)
    boot(cluster, client)
    vmi = cluster.wait_for("VirtualMachineInstance", VM_NAME, NS, lambda o: phase(o) == "Scheduling")
    client.close()
    cluster.stop()

    again = kept()  # the same VMI goes on (and its launcher pod): no new one
    running(again)
    assert again.get("VirtualMachineInstance", VM_NAME, NS)["metadata"]["uid"] == vmi["metadata"]["uid"]
    assert len(again.objects("Pod")) == 1


def test_an_import_under_way_resumes_from_wall_clock_time_not_from_the_restart(kept, tmp_path):
    """An hour-long import cut off in its first seconds, the cluster started again as if it had been away
    for the hour: the import is over at once (a timer started again at the restart would need the hour),
    and the VM it held back starts."""
    delays = dataclasses.replace(Delays.fast(), import_duration=3600.0)
    cluster = kept(delays=delays)
    client = make_client(cluster.kubeconfig(), timeout=5)
    boot(cluster, client)
    root = f"{VM_NAME}-root"
    cluster.wait_for("DataVolume", root, NS, lambda o: phase(o) == "ImportInProgress")
    client.close()
    cluster.stop()
    snapshot = tmp_path / "state" / "snapshot.json"
    state = json.loads(snapshot.read_text())
    uid = cluster.get("DataVolume", root, NS)["metadata"]["uid"]
    assert time.time() - state["since"][uid] < 60  # it entered ImportInProgress moments ago, by the wall clock
    state["since"] = {key: at - 3600 for key, at in state["since"].items()}  # the hour away
    snapshot.write_text(json.dumps(state))

    again = kept(delays=delays)
    again.wait_for("DataVolume", root, NS, lambda o: phase(o) == "Succeeded", timeout=10)
    running(again)


def test_the_node_pool_keeps_its_nodes_and_follows_emulator_nodes(kept):
    cluster = kept(nodes=3)
    cluster.stop()
    again = kept(nodes=3, run=False)
    assert sorted(name for _ns, name in again.objects("Node")) == [f"emulated-node-{i}" for i in (1, 2, 3)]
    rv = again.store.rv
    again.stop()
    assert again.store.rv == rv  # nodes found are not written again
    smaller = kept(nodes=2, run=False)  # scaled down: the third goes
    assert sorted(name for _ns, name in smaller.objects("Node")) == ["emulated-node-1", "emulated-node-2"]
