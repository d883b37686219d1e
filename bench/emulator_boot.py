"""Built-in cluster boot benchmark (run by hand, not in the suite).

N VirtualMachines shaped as the controller emits a server's (HTTP root-disk import, pod network), created
and started through lightkube over HTTP, as fast as one client sends them; then the time until every VM
is Running with the realistic phase durations (``--scale 1``: import about 12 s, start about 5 s), and
the writes the cluster makes once everything is steady (must be 0). Prints, never asserts.
Issue 15 target for the whole path (API + controller + cluster): 1,000 servers ACTIVE within 60 s.
``--state DIR`` keeps the cluster on disk as the controller does (``[controller] emulator_state_dir``)
and reports the state's size and how long reading it back takes.

    .venv/bin/python bench/emulator_boot.py [--servers 1000] [--scale 1.0] [--state DIR]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openkeel_compute.controller.kube import http_of, make_client
from openkeel_compute.emulator import Delays, Emulator
from tests.emulator.conftest import CIT, CPREF, NS, VM, header_secret, instancetype, preference, server_vm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--state", help="keep the cluster in this directory (emptied first)")
    args = parser.parse_args()
    if args.state:
        shutil.rmtree(args.state, ignore_errors=True)
    # the VMs' image URL (glance.example) is never served: the cluster's phases are measured, not image reads
    emulator = Emulator(delays=Delays.from_scale(args.scale), state_dir=args.state, read_images=False).start()
    emulator.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    client = make_client(emulator.kubeconfig())
    client.create(CIT.from_dict(instancetype()))
    client.create(CPREF.from_dict(preference()))
    http = http_of(client)
    started, cpu = time.monotonic(), time.process_time()
    for i in range(args.servers):
        name = f"00000000-0000-4000-8000-{i:012d}"
        emulator.seed(header_secret(name))  # the import's token Secret, as the controller writes it
        client.create(VM.from_dict(server_vm(name=name)), namespace=NS)
        http.put(f"/apis/subresources.kubevirt.io/v1/namespaces/{NS}/virtualmachines/{name}/start", json={})
    sent = time.monotonic() - started
    print(f"{args.servers} VMs created and started in {sent:.1f} s ({args.servers / sent:.0f}/s)")
    while True:
        running = sum(1 for o in emulator.objects("VirtualMachine").values()
                      if (o.get("status") or {}).get("printableStatus") == "Running")
        if running == args.servers:
            break
        time.sleep(0.5)
    print(f"all Running {time.monotonic() - started:.1f} s after the first create")
    before = emulator.store.rv
    time.sleep(2)
    print(f"writes in 2 s of steady state: {emulator.store.rv - before}")
    client.close()
    kept = emulator.persistence
    if kept is not None:
        print(f"kept: {kept.written / 1e6:.1f} MB of journal, {kept.snapshots} snapshots, journal thread "
              f"{kept.thread_cpu:.2f} CPU s")
    print(f"process CPU {time.process_time() - cpu:.1f} s")
    stopping = time.monotonic()
    emulator.stop()
    if args.state:
        size = sum(f.stat().st_size for f in pathlib.Path(args.state).iterdir())
        print(f"stopped in {time.monotonic() - stopping:.2f} s; state on disk {size / 1e6:.1f} MB")
        reading = time.monotonic()
        again = Emulator(state_dir=args.state)
        print(f"read back {len(again.store.objects)} objects in {time.monotonic() - reading:.2f} s")
        again.stop()


if __name__ == "__main__":
    main()
