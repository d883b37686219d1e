"""Reverse import of preferences: every field is re-rendered or reported lost, never both.

Each preference of the common-instancetypes v1.7.0 bundle (and Cozystack's extra ones) is imported
beside an instancetype of the same name, the flavor is rendered again, and the rendered preference
must equal the source minus exactly the reported paths.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from openkeel_compute.kubevirt.reverse import import_instancetype
from tests._shared import SHARED, shared_path

PREFIX = "preference.spec."


def _preferences() -> list[dict[str, Any]]:
    found = []
    for bundle in ("common-clusterpreferences-bundle.yaml", "cozystack-extra-instancetypes.yaml"):
        path = SHARED / f"kubevirt/common-instancetypes/{bundle}"
        if not path.exists():
            return []
        found += [d for d in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader)
                  if d and d["kind"] == "VirtualMachineClusterPreference"]
    return found


def _instancetype(name: str, vcpus: int) -> dict[str, Any]:
    return {"apiVersion": "instancetype.kubevirt.io/v1beta1", "kind": "VirtualMachineClusterInstancetype",
            "metadata": {"name": name}, "spec": {"cpu": {"guest": vcpus}, "memory": {"guest": "8Gi"}}}


def _split(node: dict[str, Any], dotted: str) -> list[str]:
    """The keys of a dotted path in node; keys may contain dots (vm.kubevirt.io/os)."""
    keys: list[str] = []
    rest = dotted
    while rest:
        match = max((k for k in node if rest == k or rest.startswith(k + ".")), key=len, default=None)
        assert match is not None, f"{dotted}: no such path"
        keys.append(match)
        rest = rest[len(match) + 1:]
        if rest:
            node = node[match]
    return keys


def _without(spec: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    for path in paths:
        keys = _split(spec, path)
        node = spec
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]
        if not node and len(keys) > 1:  # an emptied section goes too
            parent = spec
            for key in keys[:-2]:
                parent = parent[key]
            del parent[keys[-2]]
    return spec


def _get(spec: dict[str, Any], path: str) -> Any:
    node: Any = spec
    for key in _split(spec, path):
        node = node[key]
    return node


PREFERENCES = _preferences()


def test_the_bundles_hold_the_preferences() -> None:
    shared_path("kubevirt/common-instancetypes/common-clusterpreferences-bundle.yaml")  # skips without them
    assert len(PREFERENCES) >= 54


@pytest.mark.parametrize("vcpus", [1, 4, 8])
@pytest.mark.parametrize("preference", PREFERENCES, ids=lambda d: d["metadata"]["name"])
def test_every_preference_field_is_rendered_again_or_reported_lost(preference: dict[str, Any], vcpus: int) -> None:
    name = preference["metadata"]["name"]
    result = import_instancetype(_instancetype(name, vcpus), preference)
    rendered = flavor_to_kubevirt(result.flavor).preferences[0]["spec"]
    lost = [path[len(PREFIX):] for path, _why in result.lost if path.startswith(PREFIX)]
    source = preference["spec"]
    for path in lost:  # nothing reported lost comes back as it was
        try:
            again = _get(rendered, path)
        except (AssertionError, KeyError, TypeError):
            continue
        assert again != _get(source, path), f"{name}: {path} is reported lost, yet rendered again as it was"
    # A lost field may come back changed (a topology spelled another way): compare the rest.
    changed = [path for path in lost if _present(rendered, path)]
    assert _without(rendered, changed) == _without(source, lost), f"{name} ({vcpus} vCPUs): lost {result.lost}"


def _present(spec: dict[str, Any], path: str) -> bool:
    try:
        _get(spec, path)
    except (AssertionError, KeyError, TypeError):
        return False
    return True
