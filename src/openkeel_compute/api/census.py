"""Every operation of Nova 34.0.0's compute API and how OpenKeel answers it.

Nova's operations are read from api/data/nova_operations.json, written from Nova's own route table
by tools/nova_operations.py (one operation per URI template and method, one per body action).
Each is looked up in api/router.py: routed with a handler that serves it, that answers as Nova's
removed handler, or that answers as Nova does without the service behind it (the handler's
``@operation`` says which); or not routed yet. docs/api.md's table is rendered from this.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import re

from openkeel_compute.api import microversion
from openkeel_compute.api.microversion import Version
from openkeel_compute.api.wsgi import Operation

TABLE = pathlib.Path(__file__).parent / "data" / "nova_operations.json"
_PARAM = re.compile(r"\{[^}]*\}")

SERVED = "served"
REMOVED = "removed"
NOT_YET = "not yet"


def shape(template: str) -> str:
    """A URI template with its parameters unnamed (Nova's ``{id}`` is OpenKeel's ``{server_id}``)."""
    return _PARAM.sub("{}", template)


@dataclasses.dataclass(frozen=True)
class Row:
    """One Nova operation: where Nova routes it, its microversions there, and OpenKeel's handler."""

    method: str
    path: str
    action: str | None
    nova_function: str
    nova_versions: tuple[Version, Version]
    nova_removed: bool
    removed_in: str | None
    operation: Operation | None

    @property
    def key(self) -> str:
        """``METHOD /path [action]``, as the census test lists operations."""
        return f"{self.method} {self.path}" + (f" {self.action}" if self.action else "")

    @property
    def standing(self) -> str:
        """served | removed | without <service> | not yet."""
        return NOT_YET if self.operation is None else self.operation.standing


def nova_versions(min_version: str | None, max_version: str | None) -> tuple[Version, Version]:
    """Nova's ``@wsgi.api_version`` range as OpenKeel's: Nova serves /v2 as 2.1, OpenKeel as 2.0."""
    low = microversion.parse_version_string(min_version) if min_version else microversion.LEGACY_V2
    if low == microversion.MIN_VERSION:
        low = microversion.LEGACY_V2
    high = microversion.parse_version_string(max_version) if max_version else microversion.MAX_VERSION
    return low, high


def _routed() -> dict[tuple[str, str, str | None], Operation]:
    from openkeel_compute.api import router

    found = {}
    for template, methods in router.ROUTES.items():
        for method, target in methods.items():
            if isinstance(target, dict):
                for name, func in target.items():
                    found[(shape(template), method, name)] = func.operation
            else:
                found[(shape(template), method, None)] = target.operation
    return found


def nova_operations() -> list[dict]:
    return json.loads(TABLE.read_text())["operations"]


@functools.cache
def rows() -> tuple[Row, ...]:
    routed = _routed()
    return tuple(
        Row(method=op["method"], path=op["path"], action=op["action"], nova_function=op["function"],
            nova_versions=nova_versions(op["min_version"], op["max_version"]), nova_removed=op["removed"],
            removed_in=op.get("removed_in"), operation=routed.get((shape(op["path"]), op["method"], op["action"])))
        for op in nova_operations())


def _versions_text(versions: tuple[Version, Version]) -> str:
    low, high = versions
    if low == microversion.LEGACY_V2 and high == microversion.MAX_VERSION:
        return "all"
    shown_low = "2.1" if low == microversion.LEGACY_V2 else str(low)
    return f"{shown_low}–{high}" if high != microversion.MAX_VERSION else f"{shown_low} and later"


def _standing_text(row: Row) -> str:
    standing = row.standing
    if standing == SERVED:
        return "served"
    if standing == REMOVED:
        code = "400, as Nova" if row.operation is not None and row.operation.success == 400 else "410"
        since = row.removed_in.replace(" (", ", ").rstrip(")") if row.removed_in else None
        return f"answered as removed ({code}; gone since Nova {since})" if since else f"answered as removed ({code})"
    if standing == NOT_YET:
        return "**not yet** (404)"
    return f"answered as Nova {standing}"


def render_table() -> str:
    """docs/api.md's generated part: every Nova operation by resource, with OpenKeel's standing."""
    counts: dict[str, int] = {}
    for row in rows():
        counts[row.standing] = counts.get(row.standing, 0) + 1
    summary = ", ".join(f"{count} {name}" for name, count in sorted(counts.items(), key=lambda kv: -kv[1]))
    lines = [f"{len(rows())} operations: {summary}.", ""]
    resource = None
    for row in rows():
        top = "/" + row.path.strip("/").split("/", 1)[0] if row.path != "/" else "/"
        if top != resource:
            resource = top
            lines += ["", f"### `{resource}`", "", "| method | path | action | microversions | OpenKeel |",
                      "|---|---|---|---|---|"]
        lines.append(f"| {row.method} | `{row.path}` | {('`' + row.action + '`') if row.action else ''} | "
                     f"{_versions_text(row.nova_versions)} | {_standing_text(row)} |")
    return "\n".join(lines).lstrip("\n") + "\n"


BEGIN = "<!-- generated from src/openkeel_compute/api/data/nova_operations.json: tools/nova_operations.py --docs -->"
END = "<!-- end of generated table -->"


def splice(document: str) -> str:
    """``document`` with the part between BEGIN and END replaced by the current table."""
    head, _, rest = document.partition(BEGIN + "\n")
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{render_table()}{END}{tail}"
