"""A minimal identity (Keystone v3) answer under ``/identity``, served only with noauth2.

Why: clients start with Keystone. They authenticate there and take the endpoints of compute and
image from the token's service catalog (``openstack server create --image NAME`` looks the name up
in the image service), and the ``openstack`` CLI builds an identity v3 client before ``flavor
create``, ``flavor set`` and ``flavor unset`` (to resolve ``--project``). Under noauth2 every
``user:project`` token is trusted and a project is just a name, so this answers what those clients
read and nothing more:

  GET  /identity                  the version list (v3 only)
  GET  /identity/v3               the v3 version document
  POST /identity/v3/auth/tokens   a token for the "token" method (a ``user:project`` token) or the
                                  "password" method (any password), scoped to the project asked for;
                                  the token is ``user:project`` (X-Subject-Token) and its catalog
                                  lists compute, identity and, when ``[glance] api_servers`` names
                                  one, the image service, Placement when ``[placement]`` points at the
                                  embedded one (``auth_type = admin_token``), and Cinder (types
                                  block-storage and volumev3, the project filled in) when ``[cinder]
                                  endpoint_template`` names it
  GET  /identity/v3/projects/ID   project ID, for any ID (its name is its id, domain "default")
  GET  /identity/v3/projects      ?name=N gives project N; without a name, an empty list

Everything else under /identity answers 404. With ``auth_strategy = keystone`` this is never
mounted: the real Keystone answers, and /identity is an unknown path like any other.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import threading
from collections.abc import Callable
from typing import Any
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


def _error(code: int, title: str, message: str) -> tuple[str, dict]:
    return f"{code} {title}", {"error": {"code": code, "title": title, "message": message}}


def _read_json(environ) -> object:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    raw = environ["wsgi.input"].read(length) if length > 0 else b""
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return None


def _entry(service_type: str, name: str, url: str) -> dict:
    ident = hashlib.sha1(f"{service_type} {url}".encode(), usedforsecurity=False).hexdigest()
    return {"type": service_type, "name": name, "id": ident[:32], "endpoints": [
        {"id": ident[8:], "interface": interface, "region": "RegionOne", "region_id": "RegionOne", "url": url}
        for interface in ("public", "internal")]}


def catalog(environ, image_url: str | None, placement_url: str | None = None, volume_template: str | None = None,
            project: str = "") -> list[dict]:
    """The service catalog of every token: this endpoint's compute and identity, the image service,
    Placement and Cinder (``volume_template``, e.g. ``http://cinder/v3/%(project_id)s``, for ``project``) if
    known."""
    base = _base(environ)
    root = base[: -len(PREFIX)]
    services = [_entry("compute", "nova", root + "/v2.1"), _entry("identity", "keystone", base)]
    if image_url:
        services.append(_entry("image", "glance", image_url.rstrip("/")))
    if placement_url:
        services.append(_entry("placement", "placement", placement_url.rstrip("/")))
    if volume_template:
        values = {"project_id": project, "tenant": project, "user_id": "", "user": ""}
        try:
            url = volume_template % values
        except (KeyError, ValueError, TypeError):
            url = None  # a template the volume client cannot fill in either: no entry
        if url:
            services += [_entry("block-storage", "cinder", url.rstrip("/")),
                         _entry("volumev3", "cinderv3", url.rstrip("/"))]
    return services


def _token(environ, image_url: str | None, placement_url: str | None = None,
           volume_template: str | None = None) -> tuple[str, dict, str | None]:
    """POST /v3/auth/tokens: (status, body, subject token)."""
    body = _read_json(environ)
    auth: Any = body.get("auth") if isinstance(body, dict) else None
    identity = auth.get("identity") if isinstance(auth, dict) else None
    if not isinstance(identity, dict) or not isinstance(identity.get("methods"), list):
        return (*_error(400, "Bad Request", "Expecting to find identity in auth - the server could not comply "
                                            "with the request since it is either malformed or otherwise "
                                            "incorrect. The client is assumed to be in error."), None)
    methods = identity["methods"]
    user: Any = None
    project: Any = None
    if "token" in methods:
        token = (identity.get("token") or {}).get("id") or ""
        user, _, project = str(token).partition(":")
    elif "password" in methods:
        named = ((identity.get("password") or {}).get("user") or {})
        user = named.get("name") or named.get("id")
    if not user:
        return (*_error(401, "Unauthorized", "The request you have made requires authentication."), None)
    scope: Any = auth.get("scope") if isinstance(auth.get("scope"), dict) else {}
    wanted: Any = scope.get("project") if isinstance(scope.get("project"), dict) else {}
    project = wanted.get("id") or wanted.get("name") or project or user
    now = datetime.datetime.now(datetime.UTC)
    stamp = "%Y-%m-%dT%H:%M:%S.000000Z"
    domain = {"id": "default", "name": "Default"}
    roles = (["admin"] if user == "admin" else []) + ["member", "reader"]
    subject = f"{user}:{project}"
    return "201 Created", {"token": {
        "methods": [m for m in methods if m in ("token", "password")],
        "user": {"id": user, "name": user, "domain": domain, "password_expires_at": None},
        "project": {"id": project, "name": project, "domain": domain},
        "roles": [{"id": role, "name": role} for role in roles],
        "is_domain": False,
        "audit_ids": [hashlib.sha1(subject.encode(), usedforsecurity=False).hexdigest()[:22]],
        "issued_at": now.strftime(stamp),
        "expires_at": (now + datetime.timedelta(days=1)).strftime(stamp),
        "catalog": catalog(environ, image_url, placement_url, volume_template, str(project)),
    }}, subject


def answer(environ, image_url: str | None = None, placement_url: str | None = None,
           volume_template: str | None = None) -> tuple[str, dict, str | None]:
    """Status line, JSON body and subject token (or None) for one request under /identity.

    PATH_INFO includes the prefix; ``image_url`` is the image service the catalog names, if any.
    """
    path = environ.get("PATH_INFO", "")[len(PREFIX):].rstrip("/")
    base = _base(environ)
    if path == "/v3/auth/tokens" and environ.get("REQUEST_METHOD") == "POST":
        return _token(environ, image_url, placement_url, volume_template)
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return (*_error(405, "Method Not Allowed",
                        "The identity answer of noauth2 only issues tokens; everything else is read-only."), None)
    if path == "":
        return "300 Multiple Choices", {"versions": {"values": [_version(base)]}}, None
    if path == "/v3":
        return "200 OK", {"version": _version(base)}, None
    if path == "/v3/projects":
        names = parse_qs(environ.get("QUERY_STRING", "")).get("name", [])
        return "200 OK", {"projects": [_project(base, name) for name in names],
                          "links": {"self": base + "/v3/projects", "next": None, "previous": None}}, None
    match = _PROJECT.match(path)
    if match:
        return "200 OK", {"project": _project(base, match.group(1))}, None
    return (*_error(404, "Not Found", "The identity answer of noauth2 knows only tokens and projects."), None)


class NoAuthIdentity:
    """Answer /identity… here (see the module docstring); pass everything else to ``app``."""

    def __init__(self, app, image_url: str | None = None, placement_url: str | None = None, *,
                 urls: Callable[[], tuple[str | None, ...]] | None = None):
        """``urls``, when given, returns (image_url, placement_url[, volume_template]); it is called once, at
        the first identity request, instead of passing the URLs here."""
        self.app = app
        self.image_url = image_url
        self.placement_url = placement_url
        self.volume_template: str | None = None
        self._urls = urls
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            return self.app(environ, start_response)
        if self._urls is not None:
            with self._lock:
                if self._urls is not None:
                    self.image_url, self.placement_url, *more = self._urls()
                    self.volume_template = more[0] if more else None
                    self._urls = None
        status, body, subject = answer(environ, self.image_url, self.placement_url, self.volume_template)
        data = json.dumps(body).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        if subject is not None:
            headers.append(("X-Subject-Token", subject))
        start_response(status, headers)
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [data]
