"""Shared helpers of the API tests: an API call over a real socket, and the texts and headers of the WSGI
pipeline's answers."""

from __future__ import annotations

import json
import urllib.request


def call_api(port, method, path, body=None, version="2.61"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"X-Auth-Token": "admin:admin", "Content-Type": "application/json",
                                          "OpenStack-API-Version": f"compute {version}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"null")


VERSION_HEADERS = ("OpenStack-API-Version", "X-OpenStack-Nova-API-Version")
NOT_FOUND_TEXT = "404 Not Found\n\nThe resource could not be found.\n\n   "
UNAUTHORIZED_TEXT = (
    "401 Unauthorized\n\nThis server could not verify that you are authorized to access the document you "
    "requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not "
    "understand how to supply the credentials required.\n\n   "
)


def assert_versioned(result, version: str) -> None:
    assert result.header("OpenStack-API-Version") == f"compute {version}"
    assert result.header("X-OpenStack-Nova-API-Version") == version
    assert result.headers_named("Vary") == list(VERSION_HEADERS)


def assert_unversioned(result) -> None:
    for name in VERSION_HEADERS + ("Vary",):
        assert result.header(name) is None, f"{name} should be absent"
