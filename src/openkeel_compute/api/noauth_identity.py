"""A minimal identity (Keystone v3) answer under ``/identity``, served only with noauth2.

Why: the ``openstack`` CLI builds an identity v3 client before ``flavor create``, ``flavor set``
and ``flavor unset`` (to resolve ``--project``), even when no project is named. Without Keystone
it has nowhere to discover identity v3 and stops with "Service requires API version '3' but the
configured version is '2'". Under noauth2 every ``user:project`` token is trusted and a project is
just a name, so this answers what those commands read and nothing more:

  GET /identity                  the version list (v3 only)
  GET /identity/v3               the v3 version document
  GET /identity/v3/projects/ID   project ID, for any ID (its name is its id, domain "default")
  GET /identity/v3/projects      ?name=N gives project N; without a name, an empty list

Everything else under /identity answers 404. With ``auth_strategy = keystone`` this is never
mounted: the real Keystone answers, and /identity is an unknown path like any other.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs

PREFIX = "/identity"
_PROJECT = re.compile(r"^/v3/projects/([^/]+)$")


def _base(environ) -> str:
    scheme = environ.get("wsgi.url_scheme", "http")
    host = environ.get("HTTP_HOST") or environ.get("SERVER_NAME", "localhost")
    return f"{scheme}://{host}{environ.get('SCRIPT_NAME', '')}{PREFIX}"


def _version(base: str) -> dict:
    return {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": base + "/v3/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.identity-v3+json"}]}


def _project(base: str, project_id: str) -> dict:
    return {"id": project_id, "name": project_id, "domain_id": "default", "description": "",
            "enabled": True, "is_domain": False, "parent_id": "default", "tags": [],
            "links": {"self": f"{base}/v3/projects/{project_id}"}}


def answer(environ) -> tuple[str, dict]:
    """Status line and JSON body for one request under /identity (PATH_INFO includes the prefix)."""
    path = environ.get("PATH_INFO", "")[len(PREFIX):].rstrip("/")
    base = _base(environ)
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return "405 Method Not Allowed", {"error": {"code": 405, "title": "Method Not Allowed",
                                                    "message": "The identity answer of noauth2 is read-only."}}
    if path == "":
        return "300 Multiple Choices", {"versions": {"values": [_version(base)]}}
    if path == "/v3":
        return "200 OK", {"version": _version(base)}
    if path == "/v3/projects":
        names = parse_qs(environ.get("QUERY_STRING", "")).get("name", [])
        return "200 OK", {"projects": [_project(base, name) for name in names],
                          "links": {"self": base + "/v3/projects", "next": None, "previous": None}}
    match = _PROJECT.match(path)
    if match:
        return "200 OK", {"project": _project(base, match.group(1))}
    return "404 Not Found", {"error": {"code": 404, "title": "Not Found",
                                       "message": "The identity answer of noauth2 knows only projects."}}


class NoAuthIdentity:
    """Answer /identity… here (see the module docstring); pass everything else to ``app``."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            return self.app(environ, start_response)
        status, body = answer(environ)
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [data]
