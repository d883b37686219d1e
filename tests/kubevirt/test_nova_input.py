"""The mapping, given the API's check, refuses exactly what Nova's flavor API refuses, with Nova's messages
(checked on Nova 34.0.0).

The messages below are what POST /flavors and POST /flavors/{id}/os-extra_specs (2.86) of Nova
34.0.0 answered for the same values. Page sizes follow Nova's own reading of hw:mem_page_size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openkeel_compute.api.flavor_checks import check_fields
from openkeel_compute.cmd.main import main
from openkeel_compute.kubevirt.flavor import InvalidFlavor
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt

GOOD: dict[str, Any] = {"id": "1", "name": "tiny", "ram": 4096, "vcpus": 1, "disk": 1}
MAX_INT = 2147483647


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"vcpus": MAX_INT + 1}, "vcpus", ("Invalid input for field/attribute vcpus. Value: 2147483648. "
                                      "2147483648 is greater than the maximum of 2147483647")),
    ({"disk": MAX_INT + 1}, "disk", ("Invalid input for field/attribute disk. Value: 2147483648. "
                                    "2147483648 is greater than the maximum of 2147483647")),
    ({"ram": 2**40}, "ram", ("Invalid input for field/attribute ram. Value: 1099511627776. "
                            "1099511627776 is greater than the maximum of 2147483647")),
    ({"swap": MAX_INT + 1}, "swap", ("Invalid input for field/attribute swap. Value: 2147483648. "
                                    "2147483648 is greater than the maximum of 2147483647")),
    ({"OS-FLV-EXT-DATA:ephemeral": MAX_INT + 1}, "OS-FLV-EXT-DATA:ephemeral",
     ("Invalid input for field/attribute OS-FLV-EXT-DATA:ephemeral. Value: 2147483648. "
     "2147483648 is greater than the maximum of 2147483647")),
    ({"ram": 0}, "ram", "Invalid input for field/attribute ram. Value: 0. 0 is less than the minimum of 1"),
    ({"id": "m1/x"}, "id",
     "Invalid input for field/attribute id. Value: m1/x. 'm1/x' does not match '^(?! )[a-zA-Z0-9. _-]+(?<! )$'"),
    ({"id": " a"}, "id",
     "Invalid input for field/attribute id. Value:  a. ' a' does not match '^(?! )[a-zA-Z0-9. _-]+(?<! )$'"),
    ({"name": " t4"}, "name",
     ("An invalid 'name' value was provided. The name must be: printable characters. "
     "Can not start or end with whitespace.")),
    ({"extra_specs": {"hw:cpu_policy": "pinned"}}, "hw:cpu_policy",
     "Validation failed; 'pinned' is not one of: dedicated, shared, mixed."),
    ({"extra_specs": {"pci_passthrough:alias": "nic"}}, "pci_passthrough:alias",
     "Validation failed; 'nic' is not of the format '[^:]+:\\d+(?:\\s*,\\s*[^:]+:\\d+)*'."),
    ({"extra_specs": {"hw:mem_page_size": "huge"}}, "hw:mem_page_size",
     "Validation failed; 'huge' is not of the format '(large|small|any|\\d+([kKMGT]i?)?(b|bit|B)?)'."),
    ({"extra_specs": {"a/b": "x"}}, "extra_specs",
     ("Invalid input for field/attribute extra_specs. Value: {'a/b': 'x'}. "
     "'a/b' does not match any of the regexes: '^[a-zA-Z0-9-_:. ]{1,255}$'")),
])
def test_what_nova_refuses_is_refused_with_its_message(change: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InvalidFlavor) as caught:
        flavor_to_kubevirt({**GOOD, **change}, check=check_fields)
    assert (caught.value.field, str(caught.value)) == (field, f"{field}: {message}")


def test_a_description_with_a_line_break_is_refused_as_nova_does() -> None:
    with pytest.raises(InvalidFlavor) as caught:
        flavor_to_kubevirt({**GOOD, "description": "a\nb"}, check=check_fields)
    assert str(caught.value).startswith("description: Invalid input for field/attribute description. Value: a\nb. "
                                        "'a\\nb' does not match '^[")


def test_the_largest_values_nova_accepts_are_accepted() -> None:
    result = flavor_to_kubevirt({**GOOD, "id": "a. _-Z9", "vcpus": MAX_INT, "disk": MAX_INT, "swap": MAX_INT,
                                 "OS-FLV-EXT-DATA:ephemeral": MAX_INT, "description": "x" * 65535},
                                check=check_fields)
    assert result.flavor.vcpus == MAX_INT


def test_unknown_keys_nova_stored_before_2_86_are_still_accepted() -> None:
    result = flavor_to_kubevirt({**GOOD, "extra_specs": {"hw:not_a_spec": "1"}}, check=check_fields)
    assert [e.fidelity for e in result.report if e.key == "hw:not_a_spec"] == ["none"]


@pytest.mark.parametrize("command", ["convert", "explain"])
def test_the_cli_prints_one_error_line_and_exits_1(command: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "flavor.json"
    path.write_text(json.dumps({**GOOD, "id": "x", "vcpus": MAX_INT + 1}))
    status = main(["flavor", command, str(path)])
    captured = capsys.readouterr()
    assert (status, captured.out) == (1, "")
    assert captured.err == ("error: flavor x: vcpus: Invalid input for field/attribute vcpus. Value: 2147483648. "
                            "2147483648 is greater than the maximum of 2147483647\n")


def _page(value: str, ram: int = 4096) -> tuple[Any, str, str]:
    result = flavor_to_kubevirt({**GOOD, "ram": ram, "extra_specs": {"hw:mem_page_size": value}})
    entry = next(e for e in result.report if e.key == "hw:mem_page_size")
    return result.instancetypes[0]["spec"]["memory"].get("hugepages"), str(entry.fidelity), entry.note


@pytest.mark.parametrize(("value", "page"), [
    ("2MB", "2Mi"), ("2MiB", "2Mi"), ("2048", "2Mi"), ("2048KB", "2Mi"), ("16Mb", "2Mi"), ("16Mib", "2Mi"),
    ("1GB", "1Gi"), ("1GiB", "1Gi"), ("1048576", "1Gi"), ("8Gb", "1Gi"), ("8192Mbit", "1Gi"),
])
def test_page_sizes_nova_reads_as_2mi_or_1gi_become_those_pages(value: str, page: str) -> None:
    assert _page(value) == ({"pageSize": page}, "exact", f"hugepages.pageSize: {page}.")


@pytest.mark.parametrize(("value", "note"), [
    ("2Mb", "Nova asks for 256 KiB pages; KubeVirt supports 2Mi and 1Gi only."),  # b is bits
    ("1Gb", "Nova asks for 131072 KiB pages; KubeVirt supports 2Mi and 1Gi only."),
    ("3MB", "Nova asks for 3072 KiB pages; KubeVirt supports 2Mi and 1Gi only."),
    ("2M", "Nova refuses to boot with it: Invalid memory page size '2M'."),  # no unit: refused at boot
    ("1Gi", "Nova refuses to boot with it: Invalid memory page size '1Gi'."),
    ("2kB", "Nova refuses to boot with it: Invalid memory page size '2kB'."),  # lower-case k
])
def test_page_sizes_kubevirt_lacks_or_nova_refuses_at_boot_are_none(value: str, note: str) -> None:
    assert _page(value) == (None, "none", note)


def test_4_kib_pages_are_the_default() -> None:
    assert _page("4KB") == (None, "exact", "4 KiB pages: KubeVirt's default.")
    assert _page("4") == (None, "exact", "4 KiB pages: KubeVirt's default.")


_EDGE_INTS = st.sampled_from([0, 1, MAX_INT, MAX_INT + 1, -1]) | st.integers() | st.booleans() | st.just("1")


@settings(max_examples=400, deadline=None)
@given(ram=_EDGE_INTS, vcpus=_EDGE_INTS, disk=_EDGE_INTS, swap=_EDGE_INTS | st.just(""),
       flavor_id=st.text(max_size=8) | st.text(alphabet="ab. _-/", max_size=6),
       name=st.text(max_size=8), description=st.none() | st.text(max_size=8),
       rxtx=st.sampled_from([1.0, 0.0, -1.0, 3.5e38, 2]) | st.floats(), is_public=st.booleans() | st.just("yes"),
       specs=st.dictionaries(st.text(alphabet="hw:_a/ .", max_size=6), st.text(max_size=4) | st.integers(),
                             max_size=3))
def test_the_shortcut_accepts_only_what_the_api_schemas_accept(
        ram: Any, vcpus: Any, disk: Any, swap: Any, flavor_id: str, name: str, description: Any, rxtx: Any,
        is_public: Any, specs: dict[str, Any]) -> None:
    """check_like_nova skips the schemas for plain flavors: that shortcut must never accept more."""
    from openkeel_compute.api import faults, validation
    from openkeel_compute.api.flavor_checks import _plainly_valid
    from openkeel_compute.api.schemas import flavor_extra_specs, flavors

    create = {"ram": ram, "vcpus": vcpus, "disk": disk, "swap": swap, "id": flavor_id, "name": name,
              "description": description, "rxtx_factor": rxtx, "os-flavor-access:is_public": is_public}
    if swap == "":
        del create["swap"]
    if _plainly_valid(create, specs):
        try:
            validation.validate_body(flavors.create_v255, {"flavor": create})
            validation.validate_body(flavor_extra_specs.create, {"extra_specs": specs})
        except faults.BadRequest as refusal:
            pytest.fail(f"the shortcut accepted what the API refuses: {refusal.message}")
