"""How long the libraries OpenKeel must use take to import, before any OpenKeel code runs.

The start-up target (first 200 within a fifth of Nova's start-up) cannot beat this floor: oslo.config,
oslo.middleware, oslo.policy (without its http/https check plugins, which OpenKeel imports only when a
rule uses one: they bring requests), SQLAlchemy with the
SQLite dialect (with --postgresql: psycopg and its dialect) and jsonschema, imported by a fresh
interpreter pinned to one core as bench/compare pins the servers, with the cyclic collector off as
OpenKeel's start-up runs. It prints that floor, the same for the whole API worker (granian, Falcon and
OpenKeel's own modules included) and a bare interpreter, each the best of --runs.

Usage: .venv/bin/python bench/import_floor.py [--runs 7] [--core 1] [--postgresql]
(bench/compare calls measure() for each database and prints the floor beside the start-up times.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

# With the cyclic collector off, as OpenKeel's own start-up runs (openkeel_compute/startup.py).
REQUIRED = """
import gc; gc.disable()
import oslo_config.cfg, oslo_middleware, sqlalchemy, sqlalchemy.dialects.sqlite, jsonschema
from oslo_policy import _checks, policy
_checks.extension_checks = {}  # as OpenKeel: the check plugins are imported only when a rule uses one
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


# What the PostgreSQL variant adds: the driver and SQLAlchemy's dialect for it.
POSTGRESQL = "\nimport psycopg, sqlalchemy.dialects.postgresql.psycopg\n"


def measure(runs: int = 7, core: str | None = "1", postgresql: bool = False) -> dict[str, float]:
    """Best-of-``runs`` seconds for a bare interpreter, the required libraries and the whole worker."""
    with tempfile.TemporaryDirectory(prefix="okfloor") as tmp:
        url = ("postgresql+psycopg://postgres@127.0.0.1:5432/never_connected" if postgresql
               else f"sqlite:///{tmp}/floor.sqlite")
        conf = os.path.join(tmp, "openkeel.conf")
        with open(conf, "w") as f:
            f.write(f"[api]\nauth_strategy = noauth2\n[database]\nconnection = {url}\n")
        env = dict(os.environ, OPENKEEL_CONFIG_FILES=conf)
        return {
            "bare_s": best_of("pass", runs, core, env),
            "required_s": best_of(REQUIRED + (POSTGRESQL if postgresql else ""), runs, core, env),
            "worker_s": best_of(WORKER, runs, core, env),
        }


def required_once(core: str | None = "1", postgresql: bool = False) -> float:
    """One import of the required libraries, in seconds: bench/compare takes one beside each start-up
    it times, so that both see the machine as it is at that moment (a shared machine drifts)."""
    return best_of(REQUIRED + (POSTGRESQL if postgresql else ""), 1, core, dict(os.environ))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--core", default="1", help="CPU to pin to (taskset), as bench/compare pins the servers")
    parser.add_argument("--postgresql", action="store_true", help="with psycopg and the PostgreSQL dialect")
    args = parser.parse_args()
    m = measure(args.runs, args.core, args.postgresql)
    print(f"bare interpreter: {m['bare_s']:.3f} s")
    print(f"required libraries (oslo.config, oslo.middleware, oslo.policy, SQLAlchemy"
          f"{', psycopg' if args.postgresql else ''}, jsonschema): {m['required_s']:.3f} s")
    print(f"API worker imports and app (granian, Falcon, OpenKeel included): {m['worker_s']:.3f} s")
    print(f"(best of {args.runs} runs each, pinned to CPU {args.core})")


if __name__ == "__main__":
    main()
