"""The few Kubernetes quantity conversions the mapping needs (binary suffixes, whole MiB)."""

from __future__ import annotations

import re
from decimal import Decimal

_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?")
_FACTORS = {
    None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}
MIB = 1024**2


def to_bytes(value: str | float) -> Decimal:
    """Bytes of a quantity such as ``2Gi``, ``512Mi``, ``1G`` or a bare number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Decimal(str(value))
    match = _QUANTITY.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not a quantity")
    number, suffix = match.groups()
    if suffix == "m":
        return Decimal(number) / 1000
    return Decimal(number) * _FACTORS[suffix]


def binary_quantity(n_bytes: int) -> str:
    """The shortest exact binary form: 1073741824 -> ``1Gi``, 2097152 -> ``2Mi``."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        factor = _FACTORS[suffix]
        if n_bytes and n_bytes % factor == 0:
            return f"{n_bytes // factor}{suffix}"
    return str(n_bytes)
