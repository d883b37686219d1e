"""The printable-character classes behind Nova's name and description patterns.

build_char_ranges works on runs found by bisection with str.isprintable(); here every BMP code
point is classified one by one with unicodedata (the definition) and the class bodies must be equal.
"""

from __future__ import annotations

import re
import unicodedata

import pytest

from openkeel_compute.api import validation


def _printable(char: str) -> bool:
    category = unicodedata.category(char)
    return not category.startswith("C") and (not category.startswith("Z") or category == "Zs")


def _reference(*, ws: bool = True, invert: bool = False, exclude: tuple[str, ...] = ()) -> str:
    def wanted(char: str) -> bool:
        ok = char not in exclude and _printable(char) and (ws or unicodedata.category(char) != "Zs")
        return ok != invert

    parts: list[str] = []
    start = previous = None
    for code in range(0xFFFF):
        char = chr(code)
        if wanted(char):
            if start is None:
                start = char
        elif start is not None:
            parts.append(re.escape(start) if start == previous else f"{re.escape(start)}-{re.escape(previous)}")
            start = None
        previous = char
    if start is not None:
        parts.append(f"{re.escape(start)}-{re.escape(previous)}")
    return "".join(parts)


@pytest.mark.parametrize("kwargs", [
    {}, {"ws": False}, {"invert": True}, {"ws": False, "invert": True},
    {"exclude": (" ", "a", "\u3000")}, {"invert": True, "exclude": ("\x00", "\ufffe")},
    {"ws": False, "exclude": ("\ufffd", "\ufffe")},
], ids=repr)
def test_char_ranges_equal_a_per_character_classification(kwargs):
    assert validation.build_char_ranges(**kwargs) == _reference(**kwargs)


def test_the_patterns_accept_and_refuse_what_nova_does():
    name = re.compile(validation.name_regex())
    assert name.search("m1.small") and name.search("a\u00a0b")
    assert not name.search(" leading") and not name.search("trailing\u3000") and not name.search("a\nb")
    assert re.compile(validation.description_regex()).search("line one\u2028") is None
