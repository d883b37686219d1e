"""The assembled registry and Nova's lookup algorithm over it."""

from __future__ import annotations

import re
import types
from collections.abc import Mapping

from openkeel_compute.extra_specs import table_generated, table_hw, table_other
from openkeel_compute.extra_specs.lookup import ValidatorIndex
from openkeel_compute.extra_specs.model import InvalidExtraSpec, Validator


def _build() -> Mapping[str, Validator]:
    # Groups follow Nova's entry-point order (alphabetical by entry point name; the bare keys are
    # Nova's "null" entry point). Order matters: a parametrised key goes to the first regex that fits.
    groups = (
        table_other.ACCEL_VALIDATORS,
        table_other.AGGREGATE_VALIDATORS,
        table_other.CAPABILITY_VALIDATORS,
        table_hw.HW_VALIDATORS,
        table_other.HW_RNG_VALIDATORS,
        table_other.HW_VIDEO_VALIDATORS,
        table_other.BARE_VALIDATORS,
        table_other.OS_VALIDATORS,
        table_other.PCI_PASSTHROUGH_VALIDATORS,
        table_other.QUOTA_VALIDATORS,
        table_generated.resource_validators(),
        table_generated.trait_validators(),
        table_other.VMWARE_VALIDATORS,
    )
    registry: dict[str, Validator] = {}
    for group in groups:
        for validator in group:
            if validator.name in registry:
                raise ValueError(f"extra spec {validator.name!r} is registered twice")
            registry[validator.name] = validator
    return types.MappingProxyType(registry)


VALIDATORS: Mapping[str, Validator] = _build()

# Nova derives the namespaces it polices from the registered names: whatever precedes the first ':'
# of each name regex. A key in one of these namespaces must be known; keys elsewhere pass unchecked.
NAMESPACES: tuple[str, ...] = tuple(
    sorted({v.name_regex.split(":", 1)[0] for v in VALIDATORS.values() if ":" in v.name_regex})
)
_COMPILED_NAMESPACES = tuple(re.compile(namespace) for namespace in NAMESPACES)
_INDEX = ValidatorIndex(VALIDATORS.values())


def find_validator(key: str) -> Validator | None:
    """Return the validator that governs ``key`` (exact name first, then the first regex that fits)."""
    exact = VALIDATORS.get(key)
    if exact is not None:
        return exact
    return _INDEX.first_match(key)


def is_policed_namespace(key: str) -> bool:
    """Whether ``key`` has a namespace in which Nova refuses unknown keys."""
    if ":" not in key:
        return False
    prefix = key.split(":", 1)[0]
    return any(namespace.fullmatch(prefix) for namespace in _COMPILED_NAMESPACES)


def validate(key: str, value: str) -> None:
    """Raise InvalidExtraSpec, with Nova's exact message, if Nova (>= 2.86) would refuse this extra spec.

    ``value`` must already be a string: the flavor API turns JSON numbers into str() first (and refuses
    them past 255 characters) at every microversion, before calling this.
    """
    validator = find_validator(key)
    if validator is not None:
        validator.check(key, value)
        return
    if is_policed_namespace(key):
        raise InvalidExtraSpec(f"Validation failed; extra spec '{key}' does not appear to be a valid extra spec.")
