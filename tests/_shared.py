"""Access to ../shared (the specification and reference data) from the tests.

Tests may read ../shared but never copy it. When it is absent a test skips with the reason;
with OPENKEEL_REQUIRE_SHARED=1 (set by .ci/run) such a skip is a failure instead.

Nothing may read ../shared while pytest collects (at module level, in a decorator's argument,
in a hypothesis strategy built at import): a skip raised there skips or breaks the whole module.
Read it inside a test or fixture with ``shared_path()``; for ``parametrize`` values taken from
../shared, use ``shared_params()``, which collects one placeholder case when it is absent.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterable
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("OPENKEEL_SHARED", ROOT.parent / "shared"))

# The marker shared_params() puts on its placeholder case; tests/conftest.py turns it into
# shared_path()'s skip (or failure) when the case runs.
MARKER = "needs_shared"


def unavailable(reason: str) -> None:
    """Skip with the reason why something made from ../shared is not there (fail under
    OPENKEEL_REQUIRE_SHARED=1): CI must run every test that reads ../shared, not skip it."""
    if os.environ.get("OPENKEEL_REQUIRE_SHARED") == "1":
        pytest.fail(reason + " and OPENKEEL_REQUIRE_SHARED=1", pytrace=False)
    pytest.skip(reason)


def _absent(path: pathlib.Path) -> None:
    unavailable(f"{path} is absent: ../shared is not beside this checkout")


def shared_path(relative: str) -> pathlib.Path:
    """Return ../shared/<relative>, or skip (fail under OPENKEEL_REQUIRE_SHARED=1) if it is absent.

    Call it while a test or fixture runs, never at import or collection time.
    """
    path = SHARED / relative
    if not path.exists():
        _absent(path)
    return path


def shared_params(relative: str, build: Callable[[pathlib.Path], Iterable[Any]]) -> list[Any]:
    """``parametrize`` values built from ../shared/<relative> at collection time.

    When the file is absent, one placeholder case (id "needs-shared") stands for all of them: it
    skips with the reason when it runs, or fails under OPENKEEL_REQUIRE_SHARED=1.
    """
    path = SHARED / relative
    if path.exists():
        return list(build(path))
    return [pytest.param(None, id="needs-shared", marks=getattr(pytest.mark, MARKER)(relative))]


def check_marker(item: pytest.Item) -> None:
    """Skip (or fail) a case collected by shared_params() without its file (a runtest_setup hook)."""
    for mark in item.iter_markers(MARKER):
        shared_path(mark.args[0])
