"""The one YAML emitter for objects handed to kubectl: every string stays a string for every reader.

PyYAML quotes a string only when *its own* resolver (YAML 1.1 without ``y``/``n``) would read it as
something else. kubectl reads manifests with a YAML 1.1 resolver that also takes ``y``/``Y``/``n``/``N``
for booleans, and other tools read YAML 1.2 (where ``1e3`` is a float and ``0o17`` an integer), so a
plain ``Y`` or ``1e3`` would change type on the way to the API server, which then refuses the object.

This emitter quotes, on top of what PyYAML already quotes, every string that any of those resolvers
could take for a boolean, a null, a number (decimal, octal, hexadecimal, binary, sexagesimal, with
underscores, infinities and not-a-numbers), a timestamp, or the merge (``<<``) and value (``=``) keys.
The test is deliberately wide: whatever *starts* like a number is quoted. Output stays block style with
the keys in the order the objects define them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import IO, Any

import yaml

try:  # libyaml when present: the render directory can hold ten thousand files
    _BaseDumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover
    _BaseDumper = yaml.SafeDumper

# Words that some YAML 1.1 or 1.2 resolver reads as a boolean or a null, in any letter case.
_WORDS = frozenset({
    "y", "yes", "n", "no", "true", "false", "on", "off",  # booleans (YAML 1.1 incl. y/n, YAML 1.2)
    "null", "~", "",  # nulls
    "<<", "=",  # the merge key and the value key of YAML 1.1
})
# Anything that starts like a number: an optional sign, then a digit, or a dot followed by a digit or one of
# the infinity / not-a-number spellings. Covers ints in every base, floats, sexagesimals and timestamps.
_NUMBER_LIKE = re.compile(r"[-+]?(?:[0-9]|\.[0-9]|\.(?:inf|nan)\b)", re.IGNORECASE)
# What a comment must not hold: YAML line breaks (the comment would end there) and the characters a
# YAML stream may not contain at all (a reader refuses the whole stream), plus the byte order mark.
_NOT_IN_COMMENT = re.compile("[^\t\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def needs_quotes(value: str) -> bool:
    """True when some YAML resolver could read the plain scalar ``value`` as anything but a string."""
    return value.lower() in _WORDS or _NUMBER_LIKE.match(value) is not None


class _Dumper(_BaseDumper):  # type: ignore[misc]  # yaml has no type information
    pass


def _represent_str(dumper: Any, value: str) -> Any:
    if needs_quotes(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    return dumper.represent_str(value)


_Dumper.add_representer(str, _represent_str)


def dump(doc: Any, stream: IO[str] | None = None) -> str | None:
    """One document, block style, keys in their order; into ``stream``, or returned as text."""
    text: str | None = yaml.dump(doc, stream, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)
    return text


def dump_all(docs: Iterable[Any], stream: IO[str] | None = None) -> str | None:
    """Several documents separated by ``---``."""
    text: str | None = yaml.dump_all(docs, stream, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                                     width=1000)
    return text


def comment(text: str) -> str:
    """A one-line YAML comment (``# text``): line breaks and characters YAML refuses are written as escapes."""
    return "# " + _NOT_IN_COMMENT.sub(_escape, text) + "\n"
