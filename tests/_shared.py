"""Access to ../shared (the specification and reference data) from the tests.

Tests may read ../shared but never copy it. When it is absent a test skips with the reason;
with OPENKEEL_REQUIRE_SHARED=1 (set by .ci/run) such a skip is a failure instead.
"""

from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("OPENKEEL_SHARED", ROOT.parent / "shared"))


def shared_path(relative: str) -> pathlib.Path:
    """Return ../shared/<relative>, or skip (fail under OPENKEEL_REQUIRE_SHARED=1) if it is absent."""
    path = SHARED / relative
    if not path.exists():
        reason = f"{path} is absent: ../shared is not beside this checkout"
        if os.environ.get("OPENKEEL_REQUIRE_SHARED") == "1":
            pytest.fail(reason + " and OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    return path
