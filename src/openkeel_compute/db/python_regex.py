"""Python's regular expressions with their Unicode meaning, run by RE2 in linear time.

Nova matches its regular-expression filters with Python's ``re`` (SQLite's REGEXP), where ``\\w``,
``\\d``, ``\\s`` and ``\\b`` are Unicode classes and ``$`` also matches before a final newline.
RE2's own syntax differs: its classes are ASCII-only, it has no ``\\Z``, ``\\uXXXX`` or
``\\N{name}``, and its ``$`` is the end of the text. So a pattern is parsed by Python's own parser
(Python's syntax, flags and escapes, exactly) and written back in RE2's syntax:

* every character and class as explicit code points; ``\\w \\W \\d \\D \\s \\S`` as the code points
  Python's ``re`` itself gives them (computed once, from the running Python), ASCII under ``(?a)``;
* case-insensitive parts under RE2's Unicode case folding (ASCII-only folding under ``(?a)``);
* ``\\b``, ``\\B`` and ``$`` directly where the text cannot tell RE2 and Python apart (an ASCII text;
  a text that does not end in a newline); elsewhere the text is matched in a spelled-out form:
  each character between two marker characters that say whether it is a word character (and where
  the final newline is), so that RE2's ASCII word boundary between two markers is Python's Unicode
  one.

Only the match/no-match answer is kept, so groups are not captured and lazy repetition is greedy.
Constructs that need backtracking (backreferences, lookaround, conditionals, atomic groups and
possessive repetition) are refused (``Unsupported``).
"""

from __future__ import annotations

import functools
import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]

_MAX = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_ASCII_CATEGORY = {
    C.CATEGORY_DIGIT: ((0x30, 0x39),),
    C.CATEGORY_WORD: ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    C.CATEGORY_SPACE: ((0x09, 0x0D), (0x20, 0x20)),
}
_NEGATED = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_WORD: C.CATEGORY_WORD,
            C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE}
_PYTHON_CLASS = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_WORD: r"\w", C.CATEGORY_SPACE: r"\s"}
# The spelled-out text: a word character between "a"s, a newline between newlines (RE2's multi-line
# ^ and $ then see it), any other character between "-"s; a newline that is not the text's last
# one is "-\n\n" when the pattern's $ is the end of the text (Python's $ sees the last one only).
_MARK = "[\\-\\na]"
_SPELLED_ATOM = _MARK + "(?:{})" + _MARK


class Unsupported(ValueError):
    """A pattern the linear-time engine cannot run (the message says why)."""


@functools.cache
def _every_character() -> str:
    return "".join(map(chr, range(_SURROGATES[0]))) + "".join(map(chr, range(_SURROGATES[1] + 1, _MAX + 1)))


def _runs(python_class: str, flags: int = 0) -> tuple[tuple[int, int], ...]:
    """The code-point ranges a one-character Python class matches (surrogates aside)."""
    found = []
    for match in re.finditer(f"(?:{python_class})+", _every_character(), flags):
        low, high = ord(match.group()[0]), ord(match.group()[-1])
        if low < _SURROGATES[0] < high:
            found += [(low, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, high)]
        else:
            found.append((low, high))
    return tuple(found)


@functools.cache
def _category(category, ascii_only: bool) -> tuple[tuple[int, int], ...]:
    if category in _NEGATED:
        return _complement(_category(_NEGATED[category], ascii_only))
    return _ASCII_CATEGORY[category] if ascii_only else _runs(_PYTHON_CLASS[category])


def _complement(ranges) -> tuple[tuple[int, int], ...]:
    out, start = [], 0
    for low, high in sorted(ranges):
        if low > start:
            out.append((start, low - 1))
        start = max(start, high + 1)
    if start <= _MAX:
        out.append((start, _MAX))
    return tuple(out)


def is_word(ch: str) -> bool:
    """Python's Unicode ``\\w`` for one character."""
    return ch.isalnum() or ch == "_"


def _code(point: int) -> str:
    return f"\\x{{{point:x}}}"


def _ranges_text(ranges) -> str:
    parts = []
    for low, high in ranges:
        if high < _SURROGATES[0] or low > _SURROGATES[1]:
            parts.append((low, high))
        else:  # RE2 has no surrogates, nor does any text in a database
            if low < _SURROGATES[0]:
                parts.append((low, _SURROGATES[0] - 1))
            if high > _SURROGATES[1]:
                parts.append((_SURROGATES[1] + 1, high))
    return "".join(_code(low) if low == high else f"{_code(low)}-{_code(high)}" for low, high in parts)


def _class(ranges, negated: bool = False) -> str:
    body = _ranges_text(ranges)
    if not body:
        return "[^\\x{0}-\\x{10ffff}]" if not negated else "(?s:.)"
    return f"[{'^' if negated else ''}{body}]"


class _Writer:
    """One pattern's RE2 text, in the plain form and in the spelled-out form."""

    def __init__(self, spelled: bool) -> None:
        self.spelled = spelled
        self.boundaries: set[bool] = set()  # \b or \B: under ASCII rules (True), Unicode rules (False)
        self.end = False  # $ without MULTILINE
        self.end_line = False  # $ with MULTILINE

    def write(self, items, flags: int) -> str:
        return "".join(self.item(op, av, flags) for op, av in items)

    def atom(self, text: str) -> str:
        return _SPELLED_ATOM.format(text) if self.spelled else text

    def item(self, op, av, flags: int) -> str:
        fold = bool(flags & C.SRE_FLAG_IGNORECASE)
        ascii_only = bool(flags & C.SRE_FLAG_ASCII)
        if op is C.LITERAL or op is C.NOT_LITERAL:
            return self.atom(self.chars([(C.LITERAL, av)], fold, ascii_only, negated=op is C.NOT_LITERAL))
        if op is C.IN:
            negated = bool(av) and av[0][0] is C.NEGATE
            return self.atom(self.chars(av[1:] if negated else av, fold, ascii_only, negated))
        if op is C.ANY:
            return self.atom("(?s:.)" if flags & C.SRE_FLAG_DOTALL else "[^\\n]")
        if op is C.SUBPATTERN:
            _group, add, remove, inner = av
            return f"(?:{self.write(inner, (flags | add) & ~remove)})"
        if op is C.BRANCH:
            return "(?:" + "|".join(self.write(branch, flags) for branch in av[1]) + ")"
        if op is C.MAX_REPEAT or op is C.MIN_REPEAT:
            low, high, inner = av
            bound = "" if high is C.MAXREPEAT else str(high)
            return f"(?:{self.write(inner, flags)}){{{low},{bound}}}"
        if op is C.AT:
            return self.at(av, flags)
        raise Unsupported(f"{str(op).lower().replace('_', ' ')} needs a backtracking engine")

    def at(self, where, flags: int) -> str:
        multiline = bool(flags & C.SRE_FLAG_MULTILINE)
        if where is C.AT_BEGINNING_STRING or (where is C.AT_BEGINNING and not multiline):
            return "\\A"
        if where is C.AT_BEGINNING:
            return "(?m:^)"
        if where is C.AT_END_STRING:
            return "\\z"
        if where is C.AT_END:
            if multiline:
                self.end_line = True
                return "(?m:$)"
            self.end = True
            return "(?m:$)" if self.spelled else "\\z"
        self.boundaries.add(bool(flags & C.SRE_FLAG_ASCII))
        if len(self.boundaries) > 1:
            raise Unsupported("word boundaries under both ASCII and Unicode rules")
        return "\\b" if where is C.AT_BOUNDARY else "\\B"

    def chars(self, items, fold: bool, ascii_only: bool, negated: bool) -> str:
        """A class (or one character) as the code points Python matches with it."""
        if fold:
            return _class(_folded(tuple(items), ascii_only, negated))
        return _class(_members(items, ascii_only), negated)


def _members(items, ascii_only: bool) -> list[tuple[int, int]]:
    """A class's characters, ranges and categories (``\\w`` …) as code-point ranges."""
    ranges = []
    for op, av in items:
        if op is C.LITERAL:
            ranges.append((av, av))
        elif op is C.RANGE:
            ranges.append(av)
        elif op is C.CATEGORY:
            ranges += _category(av, ascii_only)
        else:
            raise Unsupported(f"{op} in a class")
    return ranges


@functools.cache
def _cased() -> tuple[int, ...]:
    """Every character case-insensitive matching can treat as another: those with another case, the
    lower case of those, and Python's extra equivalences (``ſ`` for ``s`` …). Any other character
    matches a case-insensitive class exactly when it matches the class as written."""
    import _sre  # type: ignore[import-not-found]
    from re import _casefix  # type: ignore[attr-defined]

    found: set[int] = set()
    for point in range(_MAX + 1):
        if _sre.unicode_iscased(point):
            found.update((point, _sre.unicode_tolower(point)))
    for key, others in _casefix._EXTRA_CASES.items():
        found.add(key)
        found.update(others)
    return tuple(sorted(found))


def _union(ranges) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def _python_class(items, negated: bool) -> str:
    names = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_WORD: r"\w",
             C.CATEGORY_NOT_WORD: r"\W", C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S"}
    parts = []
    for op, av in items:
        if op is C.LITERAL:
            parts.append(f"\\U{av:08x}")
        elif op is C.RANGE:
            parts.append(f"\\U{av[0]:08x}-\\U{av[1]:08x}")
        else:
            parts.append(names[av])
    return "[" + ("^" if negated else "") + "".join(parts) + "]"


@functools.lru_cache(maxsize=4096)
def _folded(items, ascii_only: bool, negated: bool) -> tuple[tuple[int, int], ...]:
    """The code points a case-insensitive class matches in Python: as written for the characters
    without case, and Python's own answer for each of the others."""
    written = _members(items, ascii_only)
    if negated:
        written = list(_complement(written))
    cased = _cased()
    others = _complement(_union((point, point) for point in cased))
    kept = _intersect(_union(written), others)
    test = re.compile(_python_class(items, negated), re.IGNORECASE | (re.ASCII if ascii_only else 0)).match
    return tuple(_union([*kept, *((point, point) for point in cased if test(chr(point)))]))


def _intersect(a, b) -> list[tuple[int, int]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if low <= high:
            out.append((low, high))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


# The longest program handed to RE2: each \w is ~11 KiB of code points, and RE2's compile time grows
# with the text (~0.1 s for this much), before its own memory bound (8 MiB) refuses what repeats.
_MAX_PROGRAM = 512 * 1024


def _bounded(program: str) -> str:
    if len(program) > _MAX_PROGRAM:
        raise Unsupported("pattern too large once its Unicode classes are spelled out")
    return program


class Pattern:
    """A compiled filter: ``search(text)`` is whether Python's ``re.search`` would find a match."""

    def __init__(self, source: str, compile_re2) -> None:
        self.source = source
        parsed = _parser.parse(source, 0)
        flags = parsed.state.flags
        plain = _Writer(spelled=False)
        self._plain = compile_re2(_bounded(plain.write(list(parsed), flags)))
        self._boundary, self._end = bool(plain.boundaries), plain.end
        self._spelled = None
        if plain.boundaries or plain.end:
            if plain.end and plain.end_line:
                raise Unsupported("$ both with and without MULTILINE")
            spelled = _Writer(spelled=True)
            body = spelled.write(list(parsed), flags)
            self._spelled = compile_re2(_bounded(f"\\A(?s:...)*(?:{body})"))
            self._all_newlines = plain.end_line
            self._spelling = _SPELLINGS[True in plain.boundaries]

    def search(self, text: str) -> bool:
        if not text:
            # Python's own engine on the empty text (its \B never matches there): nothing to backtrack over
            return re.search(self.source, text) is not None
        if self._spelled is not None and ((self._boundary and not text.isascii())
                                          or (self._end and text.endswith("\n"))):
            return self._spelled.search(_spell(text, self._spelling, self._all_newlines)) is not None
        return self._plain.search(text) is not None


class _Spelling(dict):
    """``str.translate``'s table: each character between its two markers."""

    def __init__(self, word) -> None:
        super().__init__({0x0A: "-\n\n"})
        self.word = word

    def __missing__(self, point: int) -> str:
        ch = chr(point)
        mark = "a" if self.word(ch) else "-"
        self[point] = spelled = mark + ch + mark
        return spelled


# by the rules of the pattern's word boundaries: ASCII-only (True) or Unicode
_SPELLINGS = {True: _Spelling(lambda ch: ch.isascii() and is_word(ch)), False: _Spelling(is_word)}


def _spell(text: str, spelling: _Spelling, all_newlines: bool) -> str:
    spelled = text.translate(spelling)
    if all_newlines:
        return spelled.replace("-\n\n", "\n\n\n")
    if text.endswith("\n"):
        return spelled[:-3] + "\n\n\n"
    return spelled
