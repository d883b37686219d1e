"""Record the Kubernetes API calls the controller makes in the test suite: the evidence for its RBAC.

    python tools/rbac_calls.py              # run the tests that drive a controller, rewrite the record
    python tools/rbac_calls.py --check      # the same, and fail if the record changed
    python tools/rbac_calls.py --from LOG   # only aggregate an audit log written earlier

The tests run with OPENKEEL_EMULATOR_AUDIT_LOG set, so every emulated API server (in the test
process and in the controllers scripts/serve starts) logs each request it answers. Only requests of
the controller's own client (its User-Agent, controller/kube.py) are kept, reduced to what RBAC
decides on: verb, API group, resource, subresource and scope. The scope is ``cluster`` (no
namespace in the path), ``own`` (the controller's own namespace: the Lease's, ``default`` in the
tests) or ``project`` (any other namespace: the projects' namespaces). The distinct calls go to
tests/deploy/controller-calls.json, which tests/deploy/test_rbac.py checks against the rendered
ClusterRole and Role.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "deploy" / "controller-calls.json"
# The tests in which a controller talks to an emulated cluster (in process or in a child process).
TESTS = [
    "tests/controller",
    "tests/test_server_end_to_end.py",
    "tests/api/servers/test_actions_e2e.py",
    "tests/api/keypairs_quotas/test_availability_zones.py",
    "tests/serve",
    "tests/clients",
    "tests/scripts/test_serve_script.py",
    "tests/scripts/test_serve_stack.py",
]
CONTROLLER_AGENT = "openkeel-compute-controller/"
OWN_NAMESPACE = "default"  # [controller] lease_namespace in the tests


def scope(namespace: str | None) -> str:
    if namespace is None:
        return "cluster"
    return "own" if namespace == OWN_NAMESPACE else "project"


def aggregate(lines: list[str]) -> list[dict[str, str | None]]:
    """The distinct calls of the controller's client, sorted."""
    calls = set()
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        if not entry.get("userAgent", "").startswith(CONTROLLER_AGENT):
            continue
        calls.add((entry["verb"], entry["apiGroup"], entry["resource"], entry["subresource"] or "",
                   scope(entry["namespace"])))
    return [{"verb": v, "apiGroup": g, "resource": r, "subresource": s or None, "scope": sc}
            for v, g, r, s, sc in sorted(calls, key=lambda c: (c[1], c[2], c[3], c[4], c[0]))]


def record(log: pathlib.Path, tests: list[str], workers: str) -> int:
    env = dict(os.environ, OPENKEEL_EMULATOR_AUDIT_LOG=str(log))
    command = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-n", workers,
               *tests]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the record differs from what the tests do")
    parser.add_argument("--from", dest="source", help="aggregate this audit log instead of running the tests")
    parser.add_argument("-n", dest="workers", default="2", help="pytest-xdist workers (default 2)")
    parser.add_argument("tests", nargs="*", default=TESTS, help="test paths (default: the controller's)")
    args = parser.parse_args(argv)
    if args.source:
        lines = pathlib.Path(args.source).read_text().splitlines()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            log = pathlib.Path(tmp) / "audit.jsonl"
            code = record(log, args.tests, args.workers)
            if code != 0:
                print(f"rbac_calls: the tests failed (exit {code}); the record is left as it was", file=sys.stderr)
                return code
            lines = log.read_text().splitlines() if log.exists() else []
    calls = aggregate(lines)
    if not calls:
        print("rbac_calls: no request of the controller was logged", file=sys.stderr)
        return 1
    text = json.dumps(calls, indent=1) + "\n"
    if args.check:
        if RECORD.read_text() != text:
            print(f"rbac_calls: {RECORD.relative_to(ROOT)} is out of date: run tools/rbac_calls.py",
                  file=sys.stderr)
            return 1
        return 0
    RECORD.write_text(text)
    print(f"rbac_calls: {len(calls)} distinct calls written to {RECORD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
