"""The conformance tier's lists of the Tempest tests a phase expects to fail
(tests/conformance/tempest-<area>-expected.txt: ``uuid | test | why`` a line), read and checked against
../shared's list of the area's tests."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tests._shared import shared_path
from tests.scripts.checkout import ROOT


def expected(area: str) -> Iterator[tuple[str, str, str]]:
    """(uuid, test, why) of each test the ``area`` phase expects to fail."""
    for line in (ROOT / f"tests/conformance/tempest-{area}-expected.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            uuid, test, reason = (part.strip() for part in line.split("|", 2))
            yield uuid, test, reason


def checked(area: str) -> set[str]:
    """The uuids of the area's expected failures, each checked: a test id once, a test of the area's own
    list (reference/tempest/tempest-compute-<area>.txt) by its id and name, and a reason that says why."""
    listed = [line.strip() for line in
              shared_path(f"reference/tempest/tempest-compute-{area}.txt").read_text().splitlines() if line.strip()]
    seen: set[str] = set()
    for uuid, test, reason in expected(area):
        assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", uuid), uuid
        assert uuid not in seen, f"{uuid} twice"
        seen.add(uuid)
        assert [t for t in listed if f"id-{uuid}" in t and t.startswith(f"tempest.api.compute.{test}[")], (test, uuid)
        assert len(reason) > 30, reason
    return seen
