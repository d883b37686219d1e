"""Shared fixtures: KubeVirt v1.9.0's swagger made strict, read from ../shared at run time."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from tests._shared import shared_path

KINDS = {
    "VirtualMachineClusterInstancetype": "v1beta1.VirtualMachineClusterInstancetype",
    "VirtualMachineInstancetype": "v1beta1.VirtualMachineInstancetype",
    "VirtualMachineClusterPreference": "v1beta1.VirtualMachineClusterPreference",
    "VirtualMachinePreference": "v1beta1.VirtualMachinePreference",
    "VirtualMachine": "v1.VirtualMachine",
}


def _close(node: Any) -> None:
    """additionalProperties: false wherever properties are listed and nothing else is allowed."""
    if isinstance(node, dict):
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for value in node.values():
            _close(value)
    elif isinstance(node, list):
        for value in node:
            _close(value)


@pytest.fixture(scope="session")
def strict_errors() -> Callable[[dict[str, Any]], list[str]]:
    """A function returning the strict-swagger validation errors of a KubeVirt object."""
    swagger = json.loads(shared_path("kubevirt/swagger.json").read_text())
    definitions = copy.deepcopy(swagger["definitions"])
    _close(definitions)
    validators = {
        kind: jsonschema.Draft4Validator({"definitions": definitions, "$ref": f"#/definitions/{name}"})
        for kind, name in KINDS.items()
    }

    def errors(obj: dict[str, Any]) -> list[str]:
        validator = validators.get(obj.get("kind", ""))
        if validator is None:
            return [f"unexpected kind {obj.get('kind')!r}"]
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]

    return errors
