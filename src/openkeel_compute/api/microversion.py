"""Microversion negotiation, as Nova 34.0.0 does it (min 2.1, max 2.104, default 2.1).

``OpenStack-API-Version: compute X.Y`` wins over the legacy ``X-OpenStack-Nova-API-Version``;
``latest`` means the maximum; a header for another service is ignored. The legacy ``/v2``
endpoint runs as version 2.0 and carries no version headers.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import microversion_parse

SERVICE_TYPE = "compute"
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
HEADER = "OpenStack-API-Version"
_LEGACY_HEADERS = [LEGACY_HEADER.lower()]
_VERSION_RE = re.compile(r"^([1-9]\d*)\.([1-9]\d*|0)$")


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


MIN_VERSION = Version(2, 1)
MAX_VERSION = Version(2, 104)
LEGACY_V2 = Version(2, 0)


class InvalidVersionString(ValueError):
    """400: the requested version is not MajorNum.MinorNum."""

    def __init__(self, requested: str):
        self.requested = requested
        super().__init__(
            f"API Version String {requested} is of invalid format. Must be of format MajorNum.MinorNum."
        )


class UnsupportedVersion(ValueError):
    """406: a well-formed version outside [MIN_VERSION, MAX_VERSION]."""

    def __init__(self, requested: Version):
        self.requested = requested
        super().__init__(
            f"Version {requested} is not supported by the API. "
            f"Minimum is {MIN_VERSION} and maximum is {MAX_VERSION}."
        )


@functools.lru_cache(maxsize=256)
def parse_version_string(text: str) -> Version:
    match = _VERSION_RE.match(text)
    if not match:
        raise InvalidVersionString(text)
    return Version(int(match.group(1)), int(match.group(2)))


def version_from_headers(headers) -> Version:
    """The requested version; raises InvalidVersionString (400) or UnsupportedVersion (406)."""
    requested = microversion_parse.get_version(headers, service_type=SERVICE_TYPE,
                                               legacy_headers=_LEGACY_HEADERS)
    if requested is None:
        return MIN_VERSION
    if requested == "latest":
        return MAX_VERSION
    version = parse_version_string(requested)
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise UnsupportedVersion(version)
    return version


def response_headers(version: Version) -> list[tuple[str, str]]:
    """The headers every response of the versioned API carries, both Vary lines included."""
    return [
        (HEADER, f"{SERVICE_TYPE} {version}"),
        (LEGACY_HEADER, str(version)),
        ("Vary", HEADER),
        ("Vary", LEGACY_HEADER),
    ]


def parse_range(spec: str) -> tuple[Version, Version]:
    """'2.55-' / '2.1-2.54' / '2.0' (exactly) / '-2.101' → inclusive (low, high)."""
    if "-" not in spec:
        v = parse_version_string(spec)
        return v, v
    low, _, high = spec.partition("-")
    return (
        parse_version_string(low) if low else LEGACY_V2,
        parse_version_string(high) if high else MAX_VERSION,
    )


def select(table: dict[str, object], version: Version):
    """The value of the first '<range>' key of ``table`` that contains ``version``, else None."""
    for spec, value in table.items():
        low, high = parse_range(spec)
        if low <= version <= high:
            return value
    return None
