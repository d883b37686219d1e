"""Strict validation of KubeVirt objects against the compact KubeVirt v1.9.0 schema.

The schema file is derived from KubeVirt's OpenAPI document by tools/kubevirt_schema.py. Validation
follows what kube-apiserver does with ``fieldValidation=Strict``: fields the schema does not declare
are reported (every one of them, in the API server's ``unknown field "path"`` form) and values of
the wrong type are invalid. Structs without declared fields (``masquerade: {}``) accept nothing
inside; a schema node without a type accepts anything.
"""

from __future__ import annotations

import functools
import json
import pathlib
from typing import Any

SCHEMA_FILE = pathlib.Path(__file__).with_name("kubevirt-v1.9.0-schema.json")
OPEN = frozenset({"k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1"})

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,), "null": (type(None),),
}


@functools.cache
def load() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


def definition_of(kind: str) -> str | None:
    return load()["roots"].get(kind)


class Problems:
    """What one object breaks: unknown fields (a 400 under Strict) and invalid values (a 422)."""

    def __init__(self) -> None:
        self.unknown: list[str] = []
        self.invalid: list[tuple[str, str, str]] = []  # (path, value type, expected type)

    def __bool__(self) -> bool:
        return bool(self.unknown or self.invalid)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _type_ok(value: Any, expected: str | list[str]) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    for name in names:
        types = _PY_TYPES.get(name, (object,))
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, types):
            return True
    return False


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(value: Any, node: dict[str, Any], path: str, problems: Problems, defs: dict[str, Any]) -> None:
    ref = node.get("$ref")
    if ref is not None:
        if ref in OPEN or ref not in defs:
            return
        node = defs[ref]
    expected = node.get("type")
    if value is None:
        return  # null is "unset" for every optional field, as the API server decodes it
    if expected is not None and not _type_ok(value, expected):
        shown = expected if isinstance(expected, str) else "/".join(expected)
        problems.invalid.append((path, _type_name(value), shown))
        return
    if isinstance(value, dict):
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props is not None or (expected == "object" and extra is None):
            props = props or {}
            for key, sub in value.items():
                if key in props:
                    _walk(sub, props[key], _join(path, key), problems, defs)
                else:
                    problems.unknown.append(_join(path, key))
        elif isinstance(extra, dict):
            for key, sub in value.items():
                _walk(sub, extra, _join(path, key), problems, defs)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            _walk(item, node["items"], f"{path}[{index}]", problems, defs)


def validate(obj: dict[str, Any], definition: str) -> Problems:
    """Every unknown field and wrongly typed value of ``obj`` against one definition of the schema."""
    defs = load()["definitions"]
    problems = Problems()
    _walk(obj, {"$ref": definition}, "", problems, defs)
    return problems


def validate_node(obj: Any, node: dict[str, Any]) -> Problems:
    """The same against an ad-hoc schema node (kinds KubeVirt's document does not describe)."""
    defs = load()["definitions"]
    problems = Problems()
    _walk(obj, node, "", problems, defs)
    return problems


def prune(obj: dict[str, Any], unknown: list[str]) -> None:
    """Drop the unknown fields, as the API server does without Strict validation."""
    for path in sorted(unknown, key=len, reverse=True):
        parts = path.replace("]", "").replace("[", ".").split(".")
        target: Any = obj
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target.get(part)
            if target is None:
                break
        if isinstance(target, dict):
            target.pop(parts[-1], None)
