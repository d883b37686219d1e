"""What one extra-spec validator is, and how it judges a value.

The checks and their messages follow Nova 34.0.0 byte for byte, because the API returns the message
to the caller as the body of the 400: a different word is a different API.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

ValueType = Literal["str", "int", "bool"]

# Accepted spellings of a boolean, as Nova's strict parsing has them (compared after strip + lower).
TRUE_WORDS = frozenset({"1", "t", "true", "on", "y", "yes"})
FALSE_WORDS = frozenset({"0", "f", "false", "off", "n", "no"})


class InvalidExtraSpec(Exception):
    """An extra spec Nova would refuse with 400; ``message`` is Nova's exact text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A placeholder in a validator name, e.g. ``{num}`` in ``hw:numa_cpus.{num}``."""

    name: str
    pattern: str
    description: str = ""
    example: str = ""  # a value that fullmatches ``pattern``, to build a concrete example key


@dataclasses.dataclass(frozen=True)
class Validator:
    """One registered extra spec: its name (with placeholders), meaning and allowed values.

    ``namespace`` is the part before ':' without the group placeholder ("hw", "resources", "trait"),
    or None for the two bare keys. ``pattern`` is only ever set for ``value_type == "str"``.
    """

    name: str
    namespace: str | None
    description: str
    value_type: ValueType
    enum: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    deprecated: bool = False
    parameters: tuple[Parameter, ...] = ()
    name_regex: str = dataclasses.field(init=False)
    # Compiled once: 525 patterns are more than re's own cache keeps, and lookups run them per key.
    compiled_name: re.Pattern[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A placeholder becomes a named group; the rest of the name is used as a regex unescaped,
        # exactly as Nova does (so the '.' in 'hw:numa_cpus.{num}' matches any character).
        regex = self.name
        for parameter in self.parameters:
            regex = regex.replace(f"{{{parameter.name}}}", f"(?P<{parameter.name}>{parameter.pattern})")
        object.__setattr__(self, "name_regex", regex)
        object.__setattr__(self, "compiled_name", re.compile(regex))
        if self.pattern is not None and self.value_type != "str":
            raise ValueError(f"{self.name}: a value pattern only applies to str validators")

    @property
    def example_key(self) -> str:
        """A concrete key this validator governs: the name with each placeholder replaced by its example."""
        key = self.name
        for parameter in self.parameters:
            key = key.replace(f"{{{parameter.name}}}", parameter.example)
        return key

    def check(self, key: str, value: str) -> None:
        """Raise InvalidExtraSpec if ``value`` is not allowed for ``key`` (a key this validator governs)."""
        if not self.compiled_name.fullmatch(key):
            # Reached only when a key spelled like the template itself ("hw:numa_cpus.{num}") is looked
            # up by exact name; the API's key schema forbids braces, so this is a pure-function edge.
            raise InvalidExtraSpec(
                f"Validation failed; expected a name of format '{self.name}' but got '{key}'."
            )
        if self.value_type == "int":
            check_int(value, self.minimum, self.maximum)
        elif self.value_type == "bool":
            check_bool(value)
        else:
            check_str(value, self.pattern, self.enum)


def check_int(value: str, minimum: int | None, maximum: int | None) -> None:
    """Nova's int rule: Python int() must parse it, then max is checked before min."""
    try:
        number = int(value)
    except ValueError:
        raise InvalidExtraSpec(f"Validation failed; '{value}' is not a valid integer value.") from None
    # The bound messages show the parsed number, not the text sent (' 007 ' is reported as '7').
    if maximum is not None and number > maximum:
        raise InvalidExtraSpec(f"Validation failed; '{number}' is greater than the max value of '{maximum}'.")
    if minimum is not None and number < minimum:
        raise InvalidExtraSpec(f"Validation failed; '{number}' is less than the min value of '{minimum}'.")


def check_bool(value: str) -> None:
    """Nova's strict boolean rule: one of the known words, ignoring case and surrounding whitespace."""
    word = value.strip().lower()
    if word not in TRUE_WORDS and word not in FALSE_WORDS:
        raise InvalidExtraSpec(f"Validation failed; '{value}' is not a valid boolean-like value.")


def check_str(value: str, pattern: str | None, enum: tuple[str, ...] | None) -> None:
    """Nova's string rule: a pattern (full match) wins over an enum; neither means anything goes."""
    if pattern is not None:
        if not re.fullmatch(pattern, value):
            raise InvalidExtraSpec(f"Validation failed; '{value}' is not of the format '{pattern}'.")
    elif enum is not None and value not in enum:
        raise InvalidExtraSpec(f"Validation failed; '{value}' is not one of: {', '.join(enum)}.")


def parse_bool(value: str) -> bool:
    """The boolean a valid bool extra spec means (for consumers such as the KubeVirt mapping)."""
    check_bool(value)
    return value.strip().lower() in TRUE_WORDS
