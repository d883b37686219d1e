"""Record the Kubernetes API calls the controller makes in the test suite: the evidence for its RBAC.

    python tools/rbac_calls.py              # run the tests that drive a controller, rewrite the record
    python tools/rbac_calls.py --check      # the same, and fail if the record changed
    python tools/rbac_calls.py --from LOG   # only aggregate an audit log written earlier
    python tools/rbac_calls.py --keep-log LOG   # record, and keep the audit log in LOG
    python tools/rbac_calls.py --component console-proxy   # the console proxy's calls (a minute)

It takes long (25 to 35 minutes on two cores under heavy load): the last tests it runs start
whole scripts/serve stacks, and pytest prints nothing while they run. A test that fails is run once
more on its own (timing-sensitive tests fail under load); the record is written only when every
test passed, at the first or the second try, since a test that stopped early may have missed calls.

The tests run with OPENKEEL_EMULATOR_AUDIT_LOG set, so every emulated API server (in the test
process and in the controllers scripts/serve starts) logs each request it answers. Only requests of
the controller's own client (its User-Agent, controller/kube.py) are kept, reduced to what RBAC
decides on: verb, API group, resource, subresource and scope. The scope is ``cluster`` (no
namespace in the path), ``own`` (the controller's own namespace: the Lease's, ``default`` in the
tests) or ``project`` (any other namespace: the projects' namespaces). The distinct calls go to
tests/deploy/controller-calls.json, which tests/deploy/test_rbac.py checks against the rendered
ClusterRole and Role.

``--component console-proxy`` does the same for the console proxy (its client's User-Agent,
consoles/upstream.py): it runs the console proxy's tests (a scripts/serve stack) and writes
tests/deploy/console-proxy-calls.json, checked against the proxy's ClusterRole.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

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
# What each component's record is made of: (its client's User-Agent prefix, its record, its tests).
COMPONENTS = {
    "controller": (CONTROLLER_AGENT, RECORD, TESTS),
    "console-proxy": ("openkeel-compute-console-proxy/", ROOT / "tests" / "deploy" / "console-proxy-calls.json",
                      ["tests/consoles/test_console_proxy.py"]),
}
OWN_NAMESPACE = "default"  # [controller] lease_namespace in the tests


def scope(namespace: str | None) -> str:
    if namespace is None:
        return "cluster"
    return "own" if namespace == OWN_NAMESPACE else "project"


def aggregate(lines, agent: str = CONTROLLER_AGENT) -> list[dict[str, str | None]]:
    """The distinct calls of one client (by default the controller's), sorted."""
    calls = set()
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        if not entry.get("userAgent", "").startswith(agent):
            continue
        calls.add((entry["verb"], entry["apiGroup"], entry["resource"], entry["subresource"] or "",
                   scope(entry["namespace"])))
    return [{"verb": v, "apiGroup": g, "resource": r, "subresource": s or None, "scope": sc}
            for v, g, r, s, sc in sorted(calls, key=lambda c: (c[1], c[2], c[3], c[4], c[0]))]


def failed_tests(junit: pathlib.Path) -> list[str] | None:
    """The node ids of the tests that failed or errored, from pytest's JUnit report (None: no report)."""
    if not junit.exists():
        return None
    failed = []
    for case in ET.parse(junit).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "")
            parts = module.split(".")
            # classname is the module's dotted path, then the class if any: back to a node id
            path = "/".join(parts)
            while parts and not (ROOT / (path + ".py")).exists():
                parts.pop()
                path = "/".join(parts)
            if not parts:
                return None
            rest = module.split(".")[len(parts):]
            failed.append("::".join([path + ".py", *rest, case.get("name", "")]))
    return failed


def pytest(log: pathlib.Path, junit: pathlib.Path, tests: list[str], workers: str) -> int:
    env = dict(os.environ, OPENKEEL_EMULATOR_AUDIT_LOG=str(log))
    command = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
               f"--junitxml={junit}", *(["-n", workers] if workers != "0" else []), *tests]
    return subprocess.run(command, cwd=ROOT, env=env, check=False, stdin=subprocess.DEVNULL).returncode


def record(log: pathlib.Path, tests: list[str], workers: str) -> int:
    """Run the tests with the audit log on; a failed test gets one more run on its own."""
    junit = log.with_suffix(".xml")
    code = pytest(log, junit, tests, workers)
    if code == 0:
        return 0
    failed = failed_tests(junit)
    if code != 1 or not failed:  # interrupted, a usage or collection error: nothing to retry
        return code
    print(f"rbac_calls: running the {len(failed)} failed test(s) once more, one at a time: {' '.join(failed)}",
          file=sys.stderr)
    return pytest(log, junit, failed, "0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the record differs from what the tests do")
    parser.add_argument("--from", dest="source", help="aggregate this audit log instead of running the tests")
    parser.add_argument("--keep-log", help="keep the audit log of the run in this file")
    parser.add_argument("-n", dest="workers", default="2", help="pytest-xdist workers (default 2; 0: none)")
    parser.add_argument("--component", choices=sorted(COMPONENTS), default="controller",
                        help="whose calls to record (default: the controller's)")
    parser.add_argument("tests", nargs="*", help="test paths (default: the component's)")
    args = parser.parse_args(argv)
    agent, record_path, default_tests = COMPONENTS[args.component]
    tests = args.tests or default_tests
    started = time.monotonic()
    if args.source:
        with open(args.source) as lines:
            calls = aggregate(lines, agent)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            log = pathlib.Path(args.keep_log).resolve() if args.keep_log else pathlib.Path(tmp) / "audit.jsonl"
            log.unlink(missing_ok=True)
            code = record(log, tests, args.workers)
            took = f"{time.monotonic() - started:.0f} s"
            if code != 0:
                print(f"rbac_calls: the tests failed (exit {code}, after {took}); the record is left as it was",
                      file=sys.stderr)
                return code
            calls = []
            if log.exists():
                with log.open() as lines:
                    calls = aggregate(lines, agent)
            print(f"rbac_calls: the tests passed in {took}", file=sys.stderr)
    if not calls:
        print(f"rbac_calls: no request of the {args.component} was logged", file=sys.stderr)
        return 1
    text = json.dumps(calls, indent=1) + "\n"
    if args.check:
        if record_path.read_text() != text:
            print(f"rbac_calls: {record_path.relative_to(ROOT)} is out of date: run tools/rbac_calls.py "
                  f"--component {args.component}",
                  file=sys.stderr)
            return 1
        return 0
    record_path.write_text(text)
    print(f"rbac_calls: {len(calls)} distinct calls written to {record_path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
