"""Request validation with Nova's JSON-Schema dialect and its exact error messages.

Nova validates with Draft 2020-12 plus three twists that clients can see:
- ``minimum``/``maximum`` also apply to numeric strings ("10");
- the ``name`` formats reject non-printable characters with their own message;
- on the legacy /v2 endpoint unknown properties are dropped instead of refused.
Messages embed Python reprs of the offending value, as Nova's do.
"""

from __future__ import annotations

import array
import functools
import re
import unicodedata

import jsonschema

from openkeel_compute.api import faults


class InvalidName(Exception):
    def __init__(self, reason: str):
        super().__init__(f"An invalid 'name' value was provided. The name must be: {reason}")


def _is_printable(char: str) -> bool:
    # Printable: no "other" category (control, format, unassigned, private, surrogate) and
    # no line/paragraph separator; horizontal spaces are printable.
    category = unicodedata.category(char)
    return not category.startswith("C") and (not category.startswith("Z") or category == "Zs")


_BMP_END = 0xFFFF  # the BMP, U+FFFF excluded, as Nova's validator does


def _printable_runs(text: str, lo: int, hi: int, runs: list[list[int]]) -> None:
    # Runs of str.isprintable() characters of text[lo:hi] by bisection: whole chunks are tested
    # in C, so only the few hundred run boundaries cost Python steps.
    if text[lo:hi].isprintable():
        if runs and runs[-1][1] == lo:
            runs[-1][1] = hi
        else:
            runs.append([lo, hi])
    elif hi - lo > 1:
        mid = (lo + hi) // 2
        _printable_runs(text, lo, mid, runs)
        _printable_runs(text, mid, hi, runs)


@functools.cache
def _isprintable_runs() -> tuple[tuple[tuple[int, int], ...], str]:
    """[start, stop) runs of the BMP that str.isprintable() accepts, and the BMP's space separators.

    str.isprintable() agrees with the printable test on every character but the space
    separators (Zs): it calls them unprintable, U+0020 aside. A per-character loop over the BMP
    costs ~50 ms per pattern at start-up; this costs a few milliseconds once.
    """
    bmp = array.array("I", range(_BMP_END)).tobytes().decode("utf-32-le", "surrogatepass")
    runs: list[list[int]] = []
    _printable_runs(bmp, 0, _BMP_END, runs)
    separators = "".join(c for c in re.findall(r"\s", bmp) if unicodedata.category(c) == "Zs")
    return tuple((a, b) for a, b in runs), separators


def build_char_ranges(*, ws: bool = True, invert: bool = False, exclude: tuple[str, ...] = ()) -> str:
    """A regex character-class body covering the BMP characters that pass the printable test.

    ``ws=False`` leaves the space separators out; ``invert`` covers the characters that fail.
    The class is kept as the set of code points where membership flips: toggling [a, b) is a
    symmetric difference with {a, b}.
    """
    base, separators = _isprintable_runs()
    flips: set[int] = set()

    def toggle(a: int, b: int) -> None:
        flips.symmetric_difference_update((a, b))

    def put(code: int, wanted: bool) -> None:
        inside = sum(1 for edge in flips if edge <= code) % 2 == 1
        if inside != wanted:
            toggle(code, code + 1)

    for a, b in base:
        toggle(a, b)
    for char in separators:
        put(ord(char), ws)
    for char in exclude:
        put(ord(char), False)
    if invert:
        toggle(0, _BMP_END)
    edges = sorted(flips)
    parts: list[str] = []
    for start, stop in zip(edges[::2], edges[1::2]):
        first, last = chr(start), chr(stop - 1)
        if first == last and stop != _BMP_END:
            parts.append(re.escape(first))
        else:
            # A range still open at U+FFFE is always written "a-b", even when a == b: Nova's
            # pattern has "\ufffe-\ufffe" there, and the pattern text is part of its messages.
            parts.append(f"{re.escape(first)}-{re.escape(last)}")
    return "".join(parts)


@functools.cache
def name_regex() -> str:
    not_printable_or_space = build_char_ranges(ws=False, invert=True)
    return f"^(?![{not_printable_or_space}])[{build_char_ranges()}]*(?<![{not_printable_or_space}])$"


@functools.cache
def name_with_spaces_regex() -> str:
    ws = build_char_ranges()
    no_ws = build_char_ranges(ws=False)
    return f"^[{ws}]*[{no_ws}]+[{ws}]*$|^[{ws}]*[{no_ws}][{no_ws}{ws}]+[{no_ws}][{ws}]*$"


@functools.cache
def description_regex() -> str:
    return f"^[{build_char_ranges()}]*$"


@functools.cache
def _compiled(which: str) -> re.Pattern:
    return re.compile({"name": name_regex, "name_with_leading_trailing_spaces": name_with_spaces_regex}[which]())


FORMAT_CHECKER = jsonschema.FormatChecker()


@FORMAT_CHECKER.checks("name", InvalidName)
def _check_name(instance) -> bool:
    try:
        if _compiled("name").search(instance):
            return True
    except TypeError:
        pass
    raise InvalidName("printable characters. Can not start or end with whitespace.")


@FORMAT_CHECKER.checks("name_with_leading_trailing_spaces", InvalidName)
def _check_name_with_spaces(instance) -> bool:
    try:
        if _compiled("name_with_leading_trailing_spaces").search(instance):
            return True
    except TypeError:
        pass
    raise InvalidName("printable characters with at least one non space character")


@FORMAT_CHECKER.checks("regex")
def _check_regex(instance) -> bool:
    if not isinstance(instance, str):
        return True
    if not instance:
        return False
    try:
        re.compile(instance)
    except re.error:
        return False
    return True


@FORMAT_CHECKER.checks("uuid")
def _check_uuid(instance) -> bool:
    """A UUID as Nova accepts one: the 32 hex digits, with or without dashes and braces, any case."""
    if not isinstance(instance, str):
        return True
    import uuid

    try:
        return str(uuid.UUID(instance)).replace("-", "") == instance.replace("-", "").lower().strip("{}")
    except (TypeError, ValueError, AttributeError):
        return False


@FORMAT_CHECKER.checks("base64")
def _check_base64(instance) -> bool:
    if not isinstance(instance, str):
        return True
    import base64
    import binascii

    try:
        base64.b64decode(instance, validate=False)
    except (binascii.Error, ValueError):
        return False
    return True


@FORMAT_CHECKER.checks("date-time")
def _check_date_time(instance) -> bool:
    """ISO 8601 as oslo.utils parses it (changes-since, changes-before)."""
    if not isinstance(instance, str):
        return True
    from oslo_utils import timeutils

    try:
        timeutils.parse_isotime(instance)
    except ValueError:
        return False
    return True


def _number_from_str(instance):
    try:
        return int(instance)
    except (ValueError, TypeError):
        try:
            return float(instance)
        except (ValueError, TypeError):
            return None


_BASE = jsonschema.Draft202012Validator


def _minimum(validator, minimum, instance, schema):
    number = _number_from_str(instance)
    if number is None:
        return
    yield from _BASE.VALIDATORS["minimum"](validator, minimum, number, schema)


def _maximum(validator, maximum, instance, schema):
    number = _number_from_str(instance)
    if number is None:
        return
    yield from _BASE.VALIDATORS["maximum"](validator, maximum, number, schema)


def _soft_additional_properties(validator, value, instance, schema):
    # Legacy /v2: unknown properties are removed instead of refused (patternProperties still apply).
    if not validator.is_type(instance, "object") or value is True:
        return
    properties = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    extra = set()
    for prop in instance:
        if prop not in properties:
            if patterns:
                if not re.search(patterns, prop):
                    extra.add(prop)
            else:
                extra.add(prop)
    if not extra:
        return
    if patterns:
        error = "Additional properties are not allowed (%s %s unexpected)"
        verb = "was" if len(extra) == 1 else "were"
        yield jsonschema.ValidationError(error % (", ".join(repr(e) for e in sorted(extra)), verb))
    else:
        for prop in extra:
            del instance[prop]


_STRICT = jsonschema.validators.extend(_BASE, {"minimum": _minimum, "maximum": _maximum})
_RELAXED = jsonschema.validators.extend(
    _BASE, {"minimum": _minimum, "maximum": _maximum, "additionalProperties": _soft_additional_properties}
)

_validators: dict[tuple[int, bool], jsonschema.protocols.Validator] = {}


def _validator(schema: dict, relaxed: bool):
    key = (id(schema), relaxed)
    validator = _validators.get(key)
    if validator is None:
        cls = _RELAXED if relaxed else _STRICT
        validator = cls(schema, format_checker=FORMAT_CHECKER)
        _validators[key] = validator
    return validator


def _detail(ex: jsonschema.ValidationError, *, is_body: bool) -> str:
    if isinstance(ex.cause, InvalidName):
        return str(ex.cause)
    if len(ex.path) > 0:
        if is_body:
            return f"Invalid input for field/attribute {ex.path[-1]}. Value: {ex.instance}. {ex.message}"
        return f"Invalid input for query parameters {ex.path[0]}. Value: {ex.instance}. {ex.message}"
    return ex.message


def _raise(ex: jsonschema.ValidationError, *, is_body: bool):
    raise faults.BadRequest(_detail(ex, is_body=is_body)) from None


def body_refusal(schema: dict, body) -> tuple[str | None, str] | None:
    """What ``validate_body`` would refuse ``body`` with: (the field at fault, None for the body as a
    whole; the 400's message), or None when the schema accepts it."""
    try:
        _validator(schema, False).validate(body)
    except jsonschema.ValidationError as ex:
        field = str(ex.path[-1]) if len(ex.path) > 0 else None
        return field, _detail(ex, is_body=True)
    except TypeError as ex:
        return None, str(ex)
    return None


def validate_body(schema: dict, body, *, legacy_v2: bool = False):
    """Validate ``body``; returns it (on /v2, with unknown properties removed)."""
    try:
        _validator(schema, legacy_v2).validate(body)
    except jsonschema.ValidationError as ex:
        _raise(ex, is_body=True)
    except TypeError as ex:
        raise faults.BadRequest(str(ex)) from None
    return body


def validate_query(schema: dict, query: dict[str, list[str]]) -> None:
    """Validate multi-valued query parameters; properties not in the schema are dropped when allowed."""
    try:
        _validator(schema, False).validate(query)
    except jsonschema.ValidationError as ex:
        _raise(ex, is_body=False)
    if schema.get("additionalProperties", True) is not False:
        allowed = schema.get("properties", {})
        patterns = "|".join(schema.get("patternProperties", {}))
        for key in [k for k in query if k not in allowed and not (patterns and re.search(patterns, k))]:
            del query[key]
