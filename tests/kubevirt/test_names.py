"""The id -> Kubernetes name and project -> namespace encodings: a contract between components."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from openkeel_compute.kubevirt.names import kubernetes_name, project_namespace
from tests._shared import shared_path

LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@pytest.mark.parametrize("flavor_id", ["1", "2", "42", "6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c", "m1-small"])
def test_dns1123_label_ids_are_kept(flavor_id: str) -> None:
    assert kubernetes_name(flavor_id) == flavor_id


@pytest.mark.parametrize("flavor_id", ["m1.small", "M1", "a b", "-x", "x_y", "a" * 64, "ubuntu", "fl-abc"])
def test_other_ids_become_fl_and_16_hex_of_sha1(flavor_id: str) -> None:
    expected = "fl-" + hashlib.sha1(flavor_id.encode()).hexdigest()[:16]
    assert kubernetes_name(flavor_id) == expected


def test_encoding_is_pinned_for_a_known_id() -> None:
    assert kubernetes_name("m1.small") == "fl-83f488446f2fada0", kubernetes_name("m1.small")


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abcXYZ019. _-", min_size=1, max_size=80))
def test_every_name_is_a_dns1123_label(flavor_id: str) -> None:
    name = kubernetes_name(flavor_id)
    assert LABEL.fullmatch(name), f"{flavor_id!r} -> {name!r} is not a DNS-1123 label"


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
