"""YAML that every reader reads the same: PyYAML, ruamel.yaml (YAML 1.2) and a YAML 1.1 resolver with y/n.

kubectl reads manifests through sigs.k8s.io/yaml, whose go-yaml v2 resolver takes y/Y/n/N (and yes, on,
off...) for booleans; YAML 1.2 readers take 1e3 and 0o17 for numbers. A flavor id, name, description or
extra spec that one of them reads as something other than a string makes the API server refuse the object,
so every generated document must read back as exactly the data that was dumped, with the same types.
"""

from __future__ import annotations

import io
import random
import re
import string
from typing import Any, ClassVar

import pytest
import yaml
from ruamel.yaml import YAML

from openkeel_compute.api import validation
from openkeel_compute.api.flavor_checks import check_like_nova
from openkeel_compute.api.schemas.flavors import FLAVOR_ID
from openkeel_compute.cmd.flavor import _dump_objects
from openkeel_compute.kubevirt.flavor import InvalidFlavor
from openkeel_compute.kubevirt.guard import RefusedByKubeVirt
from openkeel_compute.kubevirt.kubeyaml import comment, dump, dump_all, needs_quotes
from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from tests.kubevirt.strategies import EXTRA_SPECS, PROPERTY_OPTIONS

# -- the three readers ---------------------------------------------------------------------------------


class YnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's YAML 1.1 safe loader plus the single-letter booleans of the YAML 1.1 type repository
    (y, Y, n, N), which go-yaml v2 — and so kubectl — reads as booleans."""

    bool_values: ClassVar[dict[str, bool]] = {**yaml.constructor.SafeConstructor.bool_values, "y": True, "n": False}


YnLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


_PYYAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RUAMEL = YAML(typ="safe")  # YAML 1.2 core schema (its C parser when ruamel.yaml.clib is there)


def read_pyyaml(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=_PYYAML_LOADER))


def read_yaml11_yn(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=YnLoader))


def read_ruamel(text: str) -> list[Any]:
    return list(_RUAMEL.load_all(text))


READERS = {"PyYAML": read_pyyaml, "YAML 1.1 with y/n": read_yaml11_yn, "ruamel.yaml 1.2": read_ruamel}


def same(a: Any, b: Any) -> bool:
    """Equal *and* of the same types all the way down (True == 1 and 1.0 == 1 in Python)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


# -- the scalars -----------------------------------------------------------------------------------------

# Each is a string some resolver reads as a boolean, null, number, timestamp or special key.
TRICKY = [
    "Y", "y", "N", "n", "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
    "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL", "~", "", "<<", "=",
    "0", "1", "-1", "+1", "007", "019", "0o17", "0O17", "0x1F", "0X1f", "0b101", "-0b1", "1_000", "1:20", "-1:20:30",
    "190:20:30.15", "1e3", "1E3", "-1e-3", "+1e+3", "1.5", "1.", ".5", "-.5", "+.5", ".5e3", "1_0.0_1",
    ".inf", ".Inf", ".INF", "+.inf", "-.inf", ".nan", ".NaN", ".NAN", "inf", "nan", "NaN",
    "2026-01-01", "2026-1-1", "2026-01-01T00:00:00Z", "2026-01-01 10:20:30.5 +01:00", "2001-12-14t21:59:43.10-05:00",
    "1.0.0", "0.", "0x", "0o", "-", "--", "---", "...", "? x", "- x", "x: y", "#x", "x #y", "'q'", '"q"',
    "[a]", "{a: b}", "!tag", "&a", "*a", "|", ">", "%x", "@x", "`x", " lead", "trail ", "a\nb", "a\rb",
    "tab\there", "\u2028", "\x85", "caf\u00e9", "\U0001f600", "\ufeffbom", "\x00", "bell\x07", "\x7f", "\x9f",
    "\ud7ff", "\ufffe",
]
_TEXT = string.ascii_letters + string.digits + string.punctuation + " "


def _random_text(rng: random.Random, max_size: int) -> str:
    if rng.random() < 0.2:  # now and then beyond ASCII: what names and descriptions may hold
        return "".join(chr(rng.choice([rng.randrange(0xa0, 0x3000), rng.randrange(32, 127)]))
                       for _ in range(rng.randrange(1, max_size + 1)))
    return "".join(rng.choice(_TEXT) for _ in range(rng.randrange(1, max_size + 1)))


def _scalar(rng: random.Random, max_size: int = 30) -> str:
    if rng.random() < 0.6:
        return rng.choice(TRICKY)
    return _random_text(rng, max_size)


_ID_TRICKY = [s for s in TRICKY if s and re.fullmatch(r"[a-zA-Z0-9._-]+", s) and s not in ("-", "--", "---", "...")]
_SPEC_KEYS = sorted(EXTRA_SPECS)


_ID_OK = re.compile(FLAVOR_ID["pattern"]).match
_NAME_OK = re.compile(validation.name_regex()).search
_DESCRIPTION_OK = re.compile(validation.description_regex()).match


def _drawn(rng: random.Random, draw, ok) -> str:
    """The first value ``draw`` gives that Nova's flavor API accepts: tricky, but never refused."""
    while True:
        value = draw(rng)
        if ok(value):
            return value


def _spec_ok(key: str, value: str) -> bool:
    try:
        check_like_nova({"id": "x", "name": "x", "ram": 512, "vcpus": 1, "disk": 0, "extra_specs": {key: value}})
    except InvalidFlavor:
        return False
    return True


def random_flavor(rng: random.Random) -> dict[str, Any]:
    """A flavor Nova accepts whose id, name, description and extra specs are drawn from the tricky scalars
    and random text (what Nova refuses, the mapping refuses too: tests/kubevirt/test_nova_input.py)."""
    flavor_id = _drawn(rng, lambda r: r.choice(_ID_TRICKY) if r.random() < 0.7 else "".join(
        r.choice(string.ascii_letters + string.digits + "._-") for _ in range(r.randrange(1, 20))), _ID_OK)
    name = _drawn(rng, lambda r: _scalar(r).strip() or "x", _NAME_OK)
    specs: dict[str, str] = {}
    for _ in range(rng.randrange(0, 5)):
        key = rng.choice(_SPEC_KEYS) if rng.random() < 0.5 else rng.choice(
            ["my:" + _random_text(rng, 10).replace(" ", "_"), "aggregate_instance_extra_specs:" + rng.choice(
                ["ssd", "zone", "Y"]), "capabilities:" + rng.choice(["on", "n", "x"])])
        value = _scalar(rng, 40)
        if _spec_ok(key, value):
            specs[key] = value
    flavor: dict[str, Any] = {
        "id": flavor_id, "name": name,
        "description": rng.choice([None, _drawn(rng, lambda r: _scalar(r, 80), _DESCRIPTION_OK)]),
        "ram": rng.choice([512, 2048, 4096]), "disk": rng.randrange(0, 100), "vcpus": rng.randrange(1, 9),
        "swap": rng.choice(["", 0, 512]), "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": rng.random() < 0.2,
        "os-flavor-access:is_public": rng.random() < 0.7, "rxtx_factor": 1.0, "extra_specs": specs,
    }
    if not flavor["os-flavor-access:is_public"]:
        flavor["access"] = [rng.choice(["proj-a", "0123456789abcdef0123456789abcdef", "Y", "1e3"])]
    return flavor


# -- the tests -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", TRICKY)
@pytest.mark.parametrize("reader", READERS)
def test_every_tricky_scalar_stays_a_string(value: str, reader: str) -> None:
    doc = {"metadata": {"name": value, "annotations": {"openkeel.io/flavor-id": value, value or "k": value}}}
    text = dump(doc)
    assert text is not None
    [back] = READERS[reader](text)
    assert same(back, doc), f"{reader} reads {value!r} back as {back!r} from:\n{text}"


def test_the_yn_reader_is_a_real_yaml11_reader() -> None:
    """The reader above must be able to fail: plain y/n are booleans to it, as to go-yaml v2."""
    assert read_yaml11_yn("a: Y\nb: n\nc: 'Y'\n") == [{"a": True, "b": False, "c": "Y"}]
    assert read_ruamel("a: 1e3\nb: 0o17\n") == [{"a": 1000.0, "b": 15}]
    assert not needs_quotes("m1.small") and not needs_quotes("fl-1") and not needs_quotes("gold")


def test_output_stays_block_style_in_the_objects_key_order() -> None:
    doc = {"kind": "K", "metadata": {"name": "Y", "labels": {"b": "1", "a": "x"}}, "spec": {"cpu": {"guest": 2}}}
    assert dump(doc) == ("kind: K\nmetadata:\n  name: 'Y'\n  labels:\n    b: '1'\n    a: x\n"
                         "spec:\n  cpu:\n    guest: 2\n")
    assert dump_all([{"a": "n"}, {"b": "1e3"}]) == "a: 'n'\n---\nb: '1e3'\n"


def test_a_comment_never_spills_onto_the_next_line() -> None:
    text = comment("x: a\nkind: Injected\u2028y\x85z\r\x00\x07\x7f\x9f\ufeff\ufffe end") + dump({"a": 1})
    assert text.startswith("# x: a\\x0akind: Injected\\u2028y\\x85z\\x0d\\x00\\x07\\x7f\\x9f\\ufeff\\ufffe end\n")
    for read in READERS.values():
        assert read(text) == [{"a": 1}]


N_FLAVORS = 10_000


def test_ten_thousand_generated_flavors_read_back_identically_under_three_resolvers() -> None:
    """What ``flavor convert`` (with and without --vm) writes; the controller's render directory uses the same
    emitter. Deterministic: a fixed seed, so a failure names a flavor that fails again."""
    rng = random.Random(20261201)
    converted = refused = 0
    batch: list[Any] = []
    expected: list[Any] = []

    chunks = 0

    def check() -> None:
        nonlocal chunks
        chunks += 1
        with_vm = chunks % 4 == 1  # the VM fragments repeat the flavor's strings: one chunk in four is enough
        if not with_vm:
            expected[:] = [doc for doc in expected if doc["kind"] != "VirtualMachine"]
        out = io.StringIO()
        _dump_objects(batch, out, with_vm=with_vm)
        text = out.getvalue()
        for reader, read in READERS.items():
            back = read(text)
            assert len(back) == len(expected), reader
            for got, want in zip(back, expected, strict=True):
                assert same(got, want), f"{reader} reads back\n{got!r}\ninstead of\n{want!r}\nfrom:\n{text}"
        batch.clear()
        expected.clear()

    while converted < N_FLAVORS:
        flavor = random_flavor(rng)
        try:
            result = flavor_to_kubevirt(flavor, PROPERTY_OPTIONS)
        except (InvalidFlavor, RefusedByKubeVirt):
            refused += 1
            continue
        converted += 1
        batch.append(result)
        expected.extend([*result.documents(), result.vm])
        if len(batch) == 250:
            check()
    if batch:
        check()
    assert refused < converted, f"the generator is off: {refused} refused for {converted} converted"
