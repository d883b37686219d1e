"""The built-in KubeVirt cluster in a process of its own, for ``bench/servers_compare.py --cluster-apart``.

The controller normally runs the built-in cluster inside its own process, so the CPU time of the
controller's process holds the cluster's work too. Run apart, the cluster here and the controller given
its kubeconfig (``--kubeconfig``), each process's CPU time is its own: the controller's is what the
controller costs. The benchmark runs this file with the source tree it lives in, whichever tree's
controller it measures, so both controllers of a comparison drive the same cluster code.

    python bench/cluster_apart.py --port P --nodes N --scale S --kubeconfig FILE
"""

from __future__ import annotations

import argparse
import signal
import threading

import yaml

from openkeel_compute.emulator import Delays, Emulator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--kubeconfig", required=True, help="written once the cluster listens")
    args = parser.parse_args()
    emulator = Emulator(port=args.port, delays=Delays.from_scale(args.scale), nodes=args.nodes).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with open(args.kubeconfig, "w") as f:
        f.write(yaml.safe_dump(emulator.kubeconfig(), sort_keys=False))
    stop.wait()
    emulator.stop()


if __name__ == "__main__":
    main()
