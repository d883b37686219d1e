"""Flavors converted per second on one core by the KubeVirt mapping (target: >= 20,000 typical flavors/s).

Usage: .venv/bin/python bench/mapping_throughput.py [--seconds 2] [--callgrind]

--callgrind also prints CPU instructions per flavor, counted by valgrind: the same number whatever
else the machine is doing, so two versions of the mapping can be compared on a noisy machine.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
import timeit

from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt


def typical_flavors() -> list[dict[str, object]]:
    """A catalogue mix: mostly plain sizes, some with a few extra specs, one private flavor in ten."""
    flavors: list[dict[str, object]] = []
    for i in range(100):
        specs: dict[str, str] = {}
        if i % 3 == 0:
            specs["hw:cpu_policy"] = "dedicated"
            specs["hw:mem_page_size"] = "2MB"
        if i % 5 == 0:
            specs.update({"hw:vif_multiqueue_enabled": "true", "trait:HW_CPU_X86_AVX2": "required"})
        flavor: dict[str, object] = {
            "id": str(i), "name": f"f{i}", "description": None, "ram": 1024 * (1 + i % 8), "disk": 20,
            "vcpus": 1 + i % 8, "swap": "", "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False,
            "os-flavor-access:is_public": i % 10 != 0, "rxtx_factor": 1.0, "extra_specs": specs,
        }
        if i % 10 == 0:
            flavor["access"] = ["0123456789abcdef0123456789abcdef"]
        flavors.append(flavor)
    return flavors


def _instructions(passes: int) -> int:
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
            "--passes", str(passes)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--callgrind", action="store_true", help="also count instructions per flavor (valgrind)")
    parser.add_argument("--passes", type=int, help=argparse.SUPPRESS)  # internal: the run valgrind counts
    args = parser.parse_args()
    flavors = typical_flavors()
    if args.passes is not None:
        for _ in range(args.passes):
            for flavor in flavors:
                flavor_to_kubevirt(flavor)
        return
    for flavor in flavors:  # unmeasured: the first flavor imports and compiles what the mapping loads lazily
        flavor_to_kubevirt(flavor)
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for flavor in flavors:
            flavor_to_kubevirt(flavor)
        done += len(flavors)
    elapsed = time.perf_counter() - start
    print(f"{done / elapsed:,.0f} flavors/s ({done} flavors in {elapsed:.2f} s)")
    # A loaded or throttled machine shows here: about 60 ns on an idle modern core.
    calibration = min(timeit.repeat("{'a': 1, 'b': 2, 'c': [1, 2]}", number=200_000, repeat=5)) / 200_000
    print(f"calibration: a 3-key dict literal costs {calibration * 1e9:.0f} ns on this machine now")
    if args.callgrind:
        if shutil.which("valgrind") is None:
            print("callgrind: valgrind is not installed")
            return
        passes = 10  # start-up counted once and subtracted: (run with N passes) - (run with 0)
        per_flavor = (_instructions(passes) - _instructions(0)) / (passes * len(flavors))
        print(f"callgrind: {per_flavor:,.0f} instructions per flavor")


if __name__ == "__main__":
    main()
