"""Every operation of Nova's compute API, read from Nova's installed source (its route table).

Run with the Python of a virtualenv where Nova is installed (the oracle's, by default
/root/.cache/nova-oracle/venv/bin/python); it imports ``nova.api.openstack.compute.routes``
and walks ``ROUTE_LIST`` as Nova's router does: one operation per URI template and method, and
one per body action on the ``…/action`` routes (the actions of the route's controller and of
the sub-controllers registered on it). For each it prints, as JSON on stdout, the controller
method, its microversion range (``@wsgi.api_version``), whether it is marked
``@wsgi.removed`` (and since which release), and its expected errors' declared range.

``python tools/nova_operations.py --write`` (with any Python) runs this script under the
oracle's Python and writes the table OpenKeel keeps (src/openkeel_compute/api/data/nova_operations.json);
``tests/api/test_operation_census.py`` checks that the table is what Nova's source says.
``.venv/bin/python tools/nova_operations.py --docs`` renders docs/api.md's table from it and from
api/router.py (api/census.py).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE = ROOT / "src" / "openkeel_compute" / "api" / "data" / "nova_operations.json"
DEFAULT_VENV = "/root/.cache/nova-oracle/venv"

_RELEASE = re.compile(r"removed (?:from Nova )?in the ([0-9.]+) \((\w+)\) release")


def _describe(func) -> dict:
    removed = bool(getattr(func, "removed", False))
    entry = {
        "function": f"{func.__module__.rsplit('.', 1)[-1]}.{func.__qualname__}",
        "min_version": getattr(func, "min_version", None),
        "max_version": getattr(func, "max_version", None),
        "removed": removed,
    }
    if removed:
        # wsgi.removed() keeps the reason's text (also as removed_version, a slip of Nova's): the
        # release is named in it
        match = _RELEASE.search(getattr(func, "removed_reason", "") or "")
        entry["removed_in"] = f"{match.group(1)} ({match.group(2)})" if match else None
    return entry


def extract() -> list[dict]:
    from nova.api.openstack.compute import routes

    operations = []
    for path, methods in routes.ROUTE_LIST:
        if isinstance(methods, str):  # the redirection '' → '/'
            continue
        for method, (factory, action) in methods.items():
            # factory is functools.partial(_create_controller, controller, sub_controllers): the
            # classes are read, never instantiated (their constructors want Nova's RPC set up)
            controller, sub_controllers = factory.args
            if action == "action":
                actions = {}  # registered as wsgi.Resource registers them: sub-controllers last
                for cls in (controller, *sub_controllers):
                    for name, attribute in getattr(cls, "wsgi_actions", {}).items():
                        actions[name] = getattr(cls, attribute)
                for name in sorted(actions):
                    entry = {"path": path, "method": method, "action": name}
                    entry.update(_describe(actions[name]))
                    operations.append(entry)
                continue
            entry = {"path": path, "method": method, "action": None}
            entry.update(_describe(getattr(controller, action)))
            operations.append(entry)
    return operations


def nova_python() -> pathlib.Path:
    venv = pathlib.Path(os.environ.get("NOVA_ORACLE_VENV", DEFAULT_VENV))
    return venv / "bin" / "python"


def run_under_nova(python: pathlib.Path) -> list[dict]:
    completed = subprocess.run([str(python), "-W", "ignore", __file__, "--extract"], capture_output=True,
                               text=True, timeout=300, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{python} could not read Nova's route table:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout)


def render(operations: list[dict]) -> str:
    """The table as committed: one operation per line, in the route table's order."""
    lines = ",\n".join("  " + json.dumps(op, sort_keys=True) for op in operations)
    return ('{"source": "Nova 34.0.0, nova/api/openstack/compute/routes.py (ROUTE_LIST) and its controllers",\n'
            f' "operations": [\n{lines}\n ]}}\n')


def main(argv: list[str]) -> int:
    if argv[:1] == ["--extract"]:
        json.dump(extract(), sys.stdout)
        return 0
    if argv[:1] == ["--docs"]:
        sys.path.insert(0, str(ROOT / "src"))
        from openkeel_compute.api import census

        docs = ROOT / "docs" / "api.md"
        docs.write_text(census.splice(docs.read_text()))
        print(f"wrote {docs.relative_to(ROOT)}")
        return 0
    python = nova_python()
    if not python.exists():
        print(f"no Nova virtualenv at {python.parent.parent} (set NOVA_ORACLE_VENV)", file=sys.stderr)
        return 1
    text = render(run_under_nova(python))
    if argv[:1] == ["--write"]:
        TABLE.write_text(text)
        print(f"wrote {TABLE.relative_to(ROOT)}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
