"""docs/architecture.md: a handler module (one that declares operations) takes what it shares with others
from the shared modules (server_common.py, network_common.py, and the helper modules that declare no
operation), never from another handler module. The one deliberate exception is volumes_boot.py, which
delegates /os-volumes_boot to the /servers handlers themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import openkeel_compute.api.handlers as handlers_pkg

HANDLERS = Path(handlers_pkg.__file__).parent
PACKAGE = "openkeel_compute.api.handlers"
DELEGATES = {"volumes_boot"}  # answers os-volumes_boot with the /servers handlers (Nova's own aliasing)


def _declares_operations(path: Path) -> bool:
    return "@operation" in path.read_text()


def _imported_handler_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == PACKAGE:
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE + "."):
            found.add(node.module.removeprefix(PACKAGE + ".").split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix(PACKAGE + ".").split(".")[0] for a in node.names
                      if a.name.startswith(PACKAGE + ".")}
    return {name for name in found if (HANDLERS / f"{name}.py").exists()}


def test_no_handler_module_imports_another():
    handlers = {p.stem for p in HANDLERS.glob("*.py") if _declares_operations(p)}
    assert {"servers", "networks_proxy", "server_interfaces"} <= handlers  # the rule checks something
    crossing = {path.stem: sorted(_imported_handler_modules(path) & handlers)
                for path in sorted(HANDLERS.glob("*.py")) if path.stem not in DELEGATES}
    assert {module: names for module, names in crossing.items() if names} == {}
