"""Bad flavors are refused with a message naming the field or extra-spec key."""

from __future__ import annotations

from typing import Any

import pytest

from openkeel_compute.kubevirt.flavor import InvalidFlavor
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt

GOOD: dict[str, Any] = {"id": "1", "name": "tiny", "ram": 512, "vcpus": 1, "disk": 1}


@pytest.mark.parametrize(("change", "field"), [
    ({"id": None}, "id"),
    ({"name": ""}, "name"),
    ({"ram": 0}, "ram"),
    ({"vcpus": "2"}, "vcpus"),
    ({"disk": True}, "disk"),
    ({"swap": -1}, "swap"),
    ({"OS-FLV-EXT-DATA:ephemeral": 1.5}, "OS-FLV-EXT-DATA:ephemeral"),
    ({"os-flavor-access:is_public": "yes"}, "os-flavor-access:is_public"),
    ({"rxtx_factor": 0}, "rxtx_factor"),
    ({"access": ["p1"]}, "access"),
    ({"bogus": 1}, "bogus"),
    ({"extra_specs": {"hw:cpu_policy": 3}}, "hw:cpu_policy"),
    ({"extra_specs": {"hw:cpu_policy": "pinned"}}, "hw:cpu_policy"),
    ({"extra_specs": {"hw:numa_nodes": "zero"}}, "hw:numa_nodes"),
    ({"extra_specs": {"hw:mem_page_size": "huge"}}, "hw:mem_page_size"),
    ({"extra_specs": {"hw:redirected_usb_ports": "16"}}, "hw:redirected_usb_ports"),
    ({"extra_specs": {"trait:HW_CPU_X86_AVX": "wanted"}}, "trait:HW_CPU_X86_AVX"),
])
def test_invalid_flavor_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidFlavor) as caught:
        flavor_to_kubevirt({**GOOD, **change})
    assert caught.value.field == field and str(caught.value).startswith(f"{field}: "), str(caught.value)


def test_unknown_keys_are_kept_and_reported_not_dropped() -> None:
    result = flavor_to_kubevirt({**GOOD, "extra_specs": {"hw:not_a_spec": "1", "mine": "x"}})
    reported = {e.key: str(e.fidelity) for e in result.report if e.key in ("hw:not_a_spec", "mine")}
    assert reported == {"hw:not_a_spec": "none", "mine": "none"}
    annotation = result.instancetypes[0]["metadata"]["annotations"]["openkeel.io/extra-specs"]
    assert annotation == '{"hw:not_a_spec":"1","mine":"x"}'


def test_a_get_flavor_body_with_links_is_accepted() -> None:
    result = flavor_to_kubevirt({**GOOD, "links": [{"rel": "self", "href": "http://x/flavors/1"}]})
    assert result.name == "1"
