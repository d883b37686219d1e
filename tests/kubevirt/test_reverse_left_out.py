"""Objects whose description or extra specs did not fit Kubernetes' annotation limit cannot give the
flavor back exactly: the import says so instead of crashing or returning a flavor without them."""

from __future__ import annotations

from typing import Any

import pytest

from openkeel_compute.cmd.flavor import import_documents
from openkeel_compute.kubevirt.mapping import ANN_LEFT_OUT, flavor_to_kubevirt
from openkeel_compute.kubevirt.options import DEFAULT_OPTIONS
from openkeel_compute.kubevirt.reverse import IncompleteObjects, objects_to_flavor


def _flavor(**fields: Any) -> dict[str, Any]:
    return {"id": "big", "name": "big", "vcpus": 2, "ram": 2048, "disk": 10, "extra_specs": {}, **fields}


SPECS = {f"custom:{i:04d}{'k' * 240}": "\u00e9" * 255 for i in range(600)}  # ~1 MB as escaped JSON


@pytest.mark.parametrize(("fields", "left_out", "says"), [
    ({"extra_specs": SPECS}, "extra_specs", "its extra_specs did not fit"),
    # The largest goes first: ~196 KB of description against ~72 KB of extra specs.
    ({"description": "\u4e2d" * 65535, "extra_specs": dict(list(SPECS.items())[:40])}, "description",
     "its description did not fit"),
])
def test_what_did_not_fit_is_named_and_the_import_refuses_to_guess(fields, left_out, says) -> None:
    result = flavor_to_kubevirt(_flavor(**fields))
    annotations = result.instancetypes[0]["metadata"]["annotations"]
    assert annotations[ANN_LEFT_OUT] == left_out
    with pytest.raises(IncompleteObjects, match=says):
        objects_to_flavor(result.instancetypes)
    flavors, notes = import_documents(result.instancetypes, DEFAULT_OPTIONS)
    assert flavors == []
    assert any(says in note and note.endswith("skipped") for note in notes), notes


def test_objects_that_fit_carry_no_left_out_marker_and_round_trip() -> None:
    result = flavor_to_kubevirt(_flavor(description="small", extra_specs={"hw:cpu_policy": "dedicated"}))
    assert ANN_LEFT_OUT not in result.instancetypes[0]["metadata"]["annotations"]
    assert objects_to_flavor(result.instancetypes)["extra_specs"] == {"hw:cpu_policy": "dedicated"}
