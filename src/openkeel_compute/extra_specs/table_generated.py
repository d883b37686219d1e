"""The ``resources{group}:`` and ``trait{group}:`` extra specs, generated from os-resource-classes and os-traits.

They are generated rather than listed so that the registry follows the pinned package versions, as
Nova's does (os-traits 3.9.0 gives 377 traits, os-resource-classes 1.1.0 gives 21 standard classes).
"""

from __future__ import annotations

import os_resource_classes  # type: ignore[import-untyped]
import os_traits  # type: ignore[import-untyped]

from openkeel_compute.extra_specs.model import Parameter, Validator

# A granular request group suffix: empty (the unnumbered group) or up to 64 of [a-zA-Z0-9_-].
REQUEST_GROUP = Parameter("group", r"([a-zA-Z0-9_-]{1,64})?", "Optional request group suffix.", "")
CUSTOM_SUFFIX = r"[A-Z0-9_]+"

TRAIT_SETTINGS = ("required", "forbidden")


def resource_validators() -> tuple[Validator, ...]:
    """One validator per standard resource class, then one for every CUSTOM_ class."""
    standard = tuple(
        Validator(f"resources{{group}}:{resource_class}", "resources",
                  f"How much {resource_class} the request group asks Placement for.", "int",
                  parameters=(REQUEST_GROUP,))
        for resource_class in os_resource_classes.STANDARDS
    )
    custom = Validator(
        "resources{group}:CUSTOM_{resource}", "resources",
        "How much of the operator-defined class CUSTOM_{resource} the request group asks Placement for.",
        "int", parameters=(REQUEST_GROUP, Parameter("resource", CUSTOM_SUFFIX, "Custom class suffix.", "GPU")),
    )
    return (*standard, custom)


def trait_validators() -> tuple[Validator, ...]:
    """One validator per standard trait, then one for every CUSTOM_ trait."""
    standard = tuple(
        Validator(f"trait{{group}}:{trait}", "trait",
                  f"Placement must pick providers that have (required) or lack (forbidden) {trait}.",
                  "str", enum=TRAIT_SETTINGS, parameters=(REQUEST_GROUP,))
        for trait in os_traits.get_traits()
    )
    custom = Validator(
        "trait{group}:CUSTOM_{trait}", "trait",
        "Placement must pick providers that have (required) or lack (forbidden) the operator-defined "
        "trait CUSTOM_{trait}.",
        "str", enum=TRAIT_SETTINGS,
        parameters=(REQUEST_GROUP, Parameter("trait", CUSTOM_SUFFIX, "Custom trait suffix.", "FAST_DISK")),
    )
    return (*standard, custom)
