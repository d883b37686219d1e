"""Controller convergence benchmark (run by hand, not in the suite).

From an empty built-in cluster (openkeel_compute.emulator over real HTTP; tests/controller/apiserver.py
runs it in a process of its own; the real lightkube client): 10,000 private flavors spread over 100 project namespaces (20,000 objects), converged by the
controller from its outbox backlog; then a resync with nothing to change, which must send no writes.
Prints, never asserts. Target: convergence <= 60 s.

    .venv/bin/python bench/controller_convergence.py [--flavors 10000] [--projects 100] [--workers 8]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openkeel_compute.catalog import flavors as catalog
from openkeel_compute.conf import build_conf
from openkeel_compute.conf.kubevirt import mapping_options
from openkeel_compute.controller import outbox
from openkeel_compute.controller.engine import Controller
from openkeel_compute.controller.gateway import Gateway
from openkeel_compute.controller.kube import Retry, make_client
from openkeel_compute.controller.settings import Settings
from openkeel_compute.db import api as db_api
from openkeel_compute.db import migration
from tests.controller.apiserver import ApiServerProcess


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flavors", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    state = tempfile.mkdtemp(prefix="openkeel-bench-")
    conf_file = os.path.join(state, "bench.conf")
    with open(conf_file, "w") as handle:
        handle.write(f"[DEFAULT]\nstate_path = {state}\n[controller]\nworkers = {args.workers}\n")
    conf = build_conf(["--config-file", conf_file])
    engine = db_api.get_engine(conf)
    migration.sync(engine)

    started = time.perf_counter()
    with db_api.transaction(engine) as conn:
        for i in range(args.flavors):
            flavor = catalog.create(conn, name=f"bench-{i}", memory_mb=512 + i % 64, vcpus=1 + i % 8, root_gb=10,
                                    flavorid=f"bench-{i}", is_public=False, description=f"flavor {i}")
            catalog.add_access(conn, flavor, f"project-{i % args.projects:03d}")
    print(f"catalogue: {args.flavors} flavors, {outbox.summary(engine)[0]} outbox rows "
          f"({time.perf_counter() - started:.1f}s to write)")

    server = ApiServerProcess()
    for p in range(args.projects):
        server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"project-{p:03d}"}})
    backend = Gateway(make_client(server.kubeconfig(), timeout=30), Retry(5, 0.05))
    controller = Controller(engine, backend, mapping_options(conf), Settings.from_conf(conf))
    try:
        started = time.perf_counter()
        report = controller.run_once()
        converged = time.perf_counter() - started
        objects = sum(server.count(k) for k in ("VirtualMachineInstancetype", "VirtualMachinePreference"))
        pending = outbox.summary(engine)[0]
        print(f"convergence: {converged:.1f}s for {objects} objects ({report.writes}), "
              f"{pending} outbox rows pending, problems: {len(report.problems)} (target <= 60 s)")

        writes_before = server.writes()
        started = time.perf_counter()
        again = controller.resync()
        idle = time.perf_counter() - started
        sent = server.writes() - writes_before
        print(f"no-op resync: {idle:.1f}s, {again.total_writes} writes planned, {sent} writes received by the "
              f"API server ({'OK' if sent == 0 else 'NOT OK'})")
    finally:
        backend.close()
        server.stop()


if __name__ == "__main__":
    main()
