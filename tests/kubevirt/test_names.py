"""The id -> Kubernetes name and project -> namespace encodings: a contract between components."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from openkeel_compute.kubevirt.names import former_names, kubernetes_name, project_namespace
from tests._shared import shared_path

LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def sha(flavor_id: str) -> str:
    return "fl-" + hashlib.sha1(flavor_id.encode()).hexdigest()[:16]


@pytest.mark.parametrize("flavor_id", ["1", "2", "42", "6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c", "m1-small",
                                       "83f488446f2fada0", "a" * 63, "f", "fl", "flx-1"])
def test_dns1123_label_ids_not_starting_with_fl_are_kept(flavor_id: str) -> None:
    assert kubernetes_name(flavor_id) == flavor_id


@pytest.mark.parametrize(("flavor_id", "expected"), [
    ("m1.small", "fl-m1.small"),
    ("u1.medium", "fl-u1.medium"),  # an operator catalogue name: never taken, the fl- prefix keeps it apart
    ("ubuntu", "fl-ubuntu"),  # a preference virt-operator deploys: a label, but never kept
    ("fl-abc", "fl-fl-abc"),  # kept ids never start with fl-, so this cannot meet another id's name
    ("fl-83f488446f2fada0", "fl-fl-83f488446f2fada0"),
    ("x." + "a" * 58, "fl-x." + "a" * 58),  # 60 characters: the longest that is kept behind fl-
    ("1.0", "fl-1.0"),
])
def test_lower_case_subdomains_of_at_most_60_characters_get_the_fl_prefix(flavor_id: str, expected: str) -> None:
    assert kubernetes_name(flavor_id) == expected


@pytest.mark.parametrize("flavor_id", ["M1", "M1.small", "a b", "-x", "x-", "x_y", "a..b", "a.", ".a", "a.-b",
                                       "x." + "a" * 59, "a" * 64, "m1.small ", "ü"])
def test_everything_else_becomes_fl_and_16_hex_of_sha1(flavor_id: str) -> None:
    assert kubernetes_name(flavor_id) == sha(flavor_id)


def test_encoding_is_pinned_for_known_ids() -> None:
    assert kubernetes_name("m1.small") == "fl-m1.small"
    assert kubernetes_name("Flavor_1") == "fl-6b5af9173182bcb0", kubernetes_name("Flavor_1")


@pytest.mark.parametrize(("flavor_id", "former"), [
    ("m1.small", ("fl-83f488446f2fada0",)),  # hashed before the readable names: moved by the controller
    ("ubuntu", (sha("ubuntu"),)),
    ("fl-abc", (sha("fl-abc"),)),
    ("1", ()), ("m1-small", ()), ("Flavor_1", ()), ("a" * 64, ()),
])
def test_former_names_are_what_the_previous_contract_gave(flavor_id: str, former: tuple[str, ...]) -> None:
    assert former_names(flavor_id) == former


_ID_CHARS = "abcXYZ019. _-"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ID_CHARS, min_size=1, max_size=80) | st.sampled_from(["fl-", "fl-a", "a.b", "ubuntu"]))
def test_every_name_is_a_short_subdomain_and_a_label_value(flavor_id: str) -> None:
    """Instancetype names are DNS-1123 subdomains; the VM's labels carry the name, so it stays <= 63."""
    name = kubernetes_name(flavor_id)
    assert SUBDOMAIN.fullmatch(name) and len(name) <= 63, f"{flavor_id!r} -> {name!r}"
    assert LABEL_VALUE.fullmatch(name), f"{flavor_id!r} -> {name!r} is not a label value"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ID_CHARS + "fl", min_size=1, max_size=70), st.text(alphabet=_ID_CHARS + "fl", min_size=1,
                                                                             max_size=70))
def test_two_ids_never_share_a_name(a: str, b: str) -> None:
    if a != b:
        assert kubernetes_name(a) != kubernetes_name(b), (a, b)
    for other in (a, b):
        prefixed = "fl-" + other
        if prefixed != a:
            assert kubernetes_name(prefixed) != kubernetes_name(a), (prefixed, a)


def test_no_flavor_can_take_the_name_of_an_operator_catalogue_object() -> None:
    for bundle in ("common-clusterinstancetypes-bundle.yaml", "common-clusterpreferences-bundle.yaml"):
        docs = yaml.load_all(shared_path(f"kubevirt/common-instancetypes/{bundle}").read_text(), Loader=yaml.CSafeLoader)
        for doc in docs:
            if not doc:
                continue
            name = doc["metadata"]["name"]
            assert kubernetes_name(name) != name, f"a flavor with id {name!r} would be overwritten by virt-operator"
            assert doc["metadata"]["labels"].get("instancetype.kubevirt.io/vendor") == "kubevirt.io"


@pytest.mark.parametrize(("project", "prefix", "expected"), [
    ("0123456789abcdef0123456789abcdef", "", "0123456789abcdef0123456789abcdef"),
    ("proj-a", "", "proj-a"),
    ("proj-a", "openkeel-", "openkeel-proj-a"),
    ("Proj_A", "", "proj-a-" + hashlib.sha1(b"Proj_A").hexdigest()[:8]),
])
def test_project_namespace(project: str, prefix: str, expected: str) -> None:
    assert project_namespace(project, prefix) == expected


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=100), st.sampled_from(["", "ok-", "OpenKeel_"]))
def test_every_namespace_is_a_dns1123_label(project: str, prefix: str) -> None:
    namespace = project_namespace(project, prefix)
    assert LABEL.fullmatch(namespace), f"{project!r} -> {namespace!r}"
