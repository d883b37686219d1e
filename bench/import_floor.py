"""How long the libraries OpenKeel must use take to import, before any OpenKeel code runs.

The start-up target (first 200 within a fifth of Nova's start-up) cannot beat this floor: oslo.config,
oslo.middleware, oslo.policy (with the check plugins its first rule parse loads), SQLAlchemy with the
SQLite dialect and jsonschema, imported by a fresh interpreter pinned to one core as bench/compare pins
the servers. It prints that floor, the same for the whole API worker (granian, Falcon and OpenKeel's
own modules included), and a bare interpreter, each the best of --runs.

Usage: .venv/bin/python bench/import_floor.py [--runs 7] [--core 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REQUIRED = """
import oslo_config.cfg, oslo_middleware, sqlalchemy, sqlalchemy.dialects.sqlite, jsonschema
from oslo_policy import policy
policy.RuleDefault("probe", "role:admin")
"""

WORKER = """
import granian.server.mp
import openkeel_compute.wsgi
"""


def best_of(code: str, runs: int, core: str | None, env: dict) -> float:
    argv = (["taskset", "-c", core] if core is not None and shutil.which("taskset") else []) + [sys.executable, "-c", code]
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--core", default="1", help="CPU to pin to (taskset), as bench/compare pins the servers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="okfloor") as tmp:
        conf = os.path.join(tmp, "openkeel.conf")
        with open(conf, "w") as f:
            f.write(f"[api]\nauth_strategy = noauth2\n[database]\nconnection = sqlite:///{tmp}/floor.sqlite\n")
        env = dict(os.environ, OPENKEEL_CONFIG_FILES=conf)
        bare = best_of("pass", args.runs, args.core, env)
        required = best_of(REQUIRED, args.runs, args.core, env)
        worker = best_of(WORKER, args.runs, args.core, env)
    print(f"bare interpreter: {bare:.3f} s")
    print(f"required libraries (oslo.config, oslo.middleware, oslo.policy + plugins, SQLAlchemy, jsonschema): "
          f"{required:.3f} s")
    print(f"API worker imports and app (granian, Falcon, OpenKeel included): {worker:.3f} s")
    print("(best of %d runs each, pinned to CPU %s)" % (args.runs, args.core))


if __name__ == "__main__":
    main()
