"""Flavor extra-spec validation as Nova 34.0.0 does it from microversion 2.86.

The registry is OpenKeel's own table (``table_hw``, ``table_other``) plus validators generated from the
pinned os-traits and os-resource-classes packages (``table_generated``): 525 names in 12 policed
namespaces. ``validate(key, value)`` refuses exactly what Nova refuses, with Nova's message.

Caller contract (the flavor API's job, not this package's): validation applies only to
POST /flavors/{id}/os-extra_specs and PUT /flavors/{id}/os-extra_specs/{key} at microversion >= 2.86;
a JSON number value is str()-ed first (``1`` -> "1", ``1.5`` -> "1.5") and, at every microversion,
refused past 255 characters before it reaches ``validate``.
"""

from openkeel_compute.extra_specs.model import InvalidExtraSpec, Parameter, Validator, ValueType, parse_bool
from openkeel_compute.extra_specs.registry import (
    NAMESPACES,
    VALIDATORS,
    find_validator,
    is_policed_namespace,
    validate,
)

__all__ = [
    "NAMESPACES",
    "VALIDATORS",
    "InvalidExtraSpec",
    "Parameter",
    "Validator",
    "ValueType",
    "find_validator",
    "is_policed_namespace",
    "parse_bool",
    "validate",
]
