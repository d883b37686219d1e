"""Property tests: keys and values drawn from the registry pass; mutated ones fail with the right kind."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from openkeel_compute.extra_specs import (
    VALIDATORS,
    InvalidExtraSpec,
    Validator,
    find_validator,
    is_policed_namespace,
    validate,
)
from openkeel_compute.extra_specs.model import FALSE_WORDS, TRUE_WORDS

PROPERTY_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BOOL_WORDS = sorted(TRUE_WORDS | FALSE_WORDS)

any_validator = st.sampled_from(list(VALIDATORS.values()))


@st.composite
def key_of(draw: st.DrawFn, validator: Validator) -> str:
    key = validator.name
    for parameter in validator.parameters:
        filler = draw(st.from_regex(parameter.pattern, fullmatch=True))
        key = key.replace(f"{{{parameter.name}}}", filler)
    return key


@st.composite
def valid_value_of(draw: st.DrawFn, validator: Validator) -> str:
    if validator.value_type == "int":
        number = draw(st.integers(min_value=validator.minimum, max_value=validator.maximum))
        # int() tolerates surrounding whitespace, so Nova does too
        return draw(st.sampled_from(["", " ", "\t"])) + str(number) + draw(st.sampled_from(["", " ", "\n"]))
    if validator.value_type == "bool":
        word = draw(st.sampled_from(BOOL_WORDS))
        word = "".join(c.upper() if draw(st.booleans()) else c for c in word)
        return draw(st.sampled_from(["", " "])) + word + draw(st.sampled_from(["", " "]))
    if validator.pattern is not None:
        return draw(st.from_regex(validator.pattern, fullmatch=True))
    if validator.enum is not None:
        return draw(st.sampled_from(validator.enum))
    return draw(st.text(max_size=255))


def is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


@st.composite
def invalid_value_of(draw: st.DrawFn, validator: Validator) -> tuple[str, str]:
    """A value the validator must refuse, and the exact message Nova gives for it."""
    if validator.value_type == "int":
        kinds = ["unparsable"]
        kinds += ["too small"] if validator.minimum is not None else []
        kinds += ["too large"] if validator.maximum is not None else []
        kind = draw(st.sampled_from(kinds))
        if kind == "too small":
            assert validator.minimum is not None
            number = draw(st.integers(max_value=validator.minimum - 1))
            return str(number), f"Validation failed; '{number}' is less than the min value of '{validator.minimum}'."
        if kind == "too large":
            assert validator.maximum is not None
            number = draw(st.integers(min_value=validator.maximum + 1))
            return str(number), (
                f"Validation failed; '{number}' is greater than the max value of '{validator.maximum}'."
            )
        text = draw(st.text(max_size=20).filter(lambda t: not is_int(t)))
        return text, f"Validation failed; '{text}' is not a valid integer value."
    if validator.value_type == "bool":
        text = draw(st.text(max_size=20).filter(lambda t: t.strip().lower() not in BOOL_WORDS))
        return text, f"Validation failed; '{text}' is not a valid boolean-like value."
    if validator.pattern is not None:
        pattern = validator.pattern
        text = draw(st.text(max_size=20).filter(lambda t: re.fullmatch(pattern, t) is None))
        return text, f"Validation failed; '{text}' is not of the format '{pattern}'."
    assert validator.enum is not None
    enum = validator.enum
    text = draw(st.one_of(st.text(max_size=20), st.sampled_from(enum).map(str.upper)).filter(lambda t: t not in enum))
    return text, f"Validation failed; '{text}' is not one of: {', '.join(enum)}."


@PROPERTY_SETTINGS
@given(data=st.data(), validator=any_validator)
def test_registry_keys_with_allowed_values_are_accepted(data: st.DataObject, validator: Validator) -> None:
    key = data.draw(key_of(validator))
    value = data.draw(valid_value_of(validator))
    assert find_validator(key) is validator, f"{key!r} is governed by another validator"
    validate(key, value)


constrained_validator = any_validator.filter(lambda v: v.value_type != "str" or v.pattern or v.enum)


@PROPERTY_SETTINGS
@given(data=st.data(), validator=constrained_validator)
def test_disallowed_values_are_refused_with_the_message_of_their_kind(
    data: st.DataObject, validator: Validator
) -> None:
    key = data.draw(key_of(validator))
    value, message = data.draw(invalid_value_of(validator))
    with pytest.raises(InvalidExtraSpec) as refusal:
        validate(key, value)
    assert refusal.value.message == message


KEY_MUTATIONS = {
    "suffix": lambda key: key + "_Zz",
    "truncated": lambda key: key[:-1],
    "lowercased value part": lambda key: key.split(":", 1)[0] + ":" + key.split(":", 1)[1].lower() + "q",
}


@PROPERTY_SETTINGS
@given(data=st.data(), validator=any_validator.filter(lambda v: v.namespace is not None),
       mutation=st.sampled_from(sorted(KEY_MUTATIONS)))
def test_unknown_keys_in_a_policed_namespace_are_refused(
    data: st.DataObject, validator: Validator, mutation: str
) -> None:
    mutant = KEY_MUTATIONS[mutation](data.draw(key_of(validator)))
    assume(find_validator(mutant) is None and is_policed_namespace(mutant))
    with pytest.raises(InvalidExtraSpec) as refusal:
        validate(mutant, "anything")
    assert refusal.value.message == (
        f"Validation failed; extra spec '{mutant}' does not appear to be a valid extra spec."
    )


@PROPERTY_SETTINGS
@given(data=st.data(), validator=any_validator.filter(lambda v: v.namespace is not None),
       prefix=st.sampled_from(["x", "X", "openkeel_", "0"]), value=st.text(max_size=30))
def test_keys_outside_the_policed_namespaces_are_accepted_whatever_the_value(
    data: st.DataObject, validator: Validator, prefix: str, value: str
) -> None:
    key = prefix + data.draw(key_of(validator))
    assert not is_policed_namespace(key)
    validate(key, value)


@PROPERTY_SETTINGS
@given(key=st.text(alphabet=st.characters(blacklist_characters=":"), min_size=1, max_size=40), value=st.text())
def test_keys_without_a_namespace_are_only_checked_when_registered(key: str, value: str) -> None:
    assume(key not in VALIDATORS)
    validate(key, value)
