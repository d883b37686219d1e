"""The flavor the mapping reads (model.flavor.Flavor), checked as the mapping needs it.

Everything the mapping reads goes through ``parse_flavor``, so a bad flavor is refused with a message
naming the field or extra-spec key instead of producing a half-translated object: the structural
checks of ``Flavor.from_api``, the extra-spec validators of Nova's registry (extra_specs/), and, when
the caller passes one, ``check``: Nova's own validation of POST /flavors, which belongs to the API
(api/flavor_checks.py) and is handed in by the processes that have it (the CLI, the controller).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from openkeel_compute.model.flavor import (
    DISABLED,
    EPHEMERAL,
    IS_PUBLIC,
    Flavor,
    InvalidFlavor,
    check_known_fields,
    parse_api_body,
)

#: Nova's validation of a flavor body (raises InvalidFlavor), as api/flavor_checks.py provides it
FlavorCheck = Callable[[Mapping[str, Any]], None]

__all__ = ["DISABLED", "EPHEMERAL", "IS_PUBLIC", "Flavor", "FlavorCheck", "InvalidFlavor", "check_extra_specs",
           "parse_flavor"]


def check_extra_specs(body: Mapping[str, Any]) -> None:
    """Refuse what Nova's extra-spec validators refuse (POST .../os-extra_specs at 2.86), with their messages.

    Keys that no validator knows are accepted even inside Nova's namespaces: Nova stored them before 2.86.
    """
    specs = body.get("extra_specs")
    if not specs or not isinstance(specs, dict):
        return
    from openkeel_compute.extra_specs import InvalidExtraSpec, find_validator

    for key, value in specs.items():
        validator = find_validator(key)
        if validator is not None:
            try:
                validator.check(key, str(value))
            except InvalidExtraSpec as refusal:
                raise InvalidFlavor(key, refusal.message) from None


def parse_flavor(body: Mapping[str, Any], check: FlavorCheck | None = None) -> Flavor:
    """Check a flavor dict and return it normalised; raise InvalidFlavor naming the culprit.

    ``check`` (Nova's validation of the fields, when given) comes first, then the extra-spec validators,
    so the messages are Nova's.
    """
    check_known_fields(body)
    if check is not None:
        check(body)
    check_extra_specs(body)
    return parse_api_body(body)
