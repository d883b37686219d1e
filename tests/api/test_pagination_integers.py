"""Every list Nova pages with ``common.limited`` / ``get_pagination_params`` reads ``limit`` and ``offset``
with oslo's integer check after its query schema, whose pattern ``^[0-9]*$`` lets a lone newline through:
Nova answers 400 "Invalid input received: <name> must be an integer", never a server error (found by the
fuzzer on os-security-groups; the class: every handler that reads them)."""

from __future__ import annotations

import pytest

from tests.conftest import admin

LISTS = [
    ("/v2.1/os-security-groups", "2.1"),
    ("/v2.1/os-server-groups", "2.1"),
    ("/v2.1/images", "2.1"),
]


@pytest.mark.parametrize(("path", "version"), LISTS)
@pytest.mark.parametrize("name", ["offset", "limit"])
def test_a_lone_newline_is_novas_400(client, path, version, name):
    got = client.get(f"{path}?{name}=%0A", headers=admin(version))
    assert got.status_code == 400, got.text
    assert got.json == {"badRequest": {"code": 400,
                                       "message": f"Invalid input received: {name} must be an integer"}}
