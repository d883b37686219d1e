"""Authentication: keystonemiddleware's auth_token, or noauth2 for development.

noauth2 reproduces the development mode Nova removed in 32.0.0: ``X-Auth-Token: user:project``
is trusted as is (the project defaults to the user), user ``admin`` gets the roles
admin,member,reader and anyone else member,reader. Identity headers sent directly
(X-User-Id, X-Project-Id, X-Roles) are honoured, as Nova's context middleware does behind
auth_token. Never use it where the network is not trusted.
"""

from __future__ import annotations

import logging

from openkeel_compute.api import context as api_context
from openkeel_compute.api import faults

LOG = logging.getLogger(__name__)

ADMIN_ROLES = "admin,member,reader"
MEMBER_ROLES = "member,reader"


class NoAuth2:
    """Turn ``X-Auth-Token: user[:project]`` into the identity headers auth_token would set."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if token and "HTTP_X_USER_ID" not in environ:
            user_id, _, project_id = token.partition(":")
            environ["HTTP_X_USER_ID"] = user_id
            environ["HTTP_X_PROJECT_ID"] = project_id or user_id
            environ.setdefault("HTTP_X_ROLES", ADMIN_ROLES if user_id == "admin" else MEMBER_ROLES)
        return self.app(environ, start_response)


class ContextMiddleware:
    """Build the request context from identity headers; anonymous requests get Nova's 401 page."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        ctx = api_context.from_environ(environ)
        if ctx is None:
            status, headers, body = faults.webob_error(401, environ)
            start_response(status, headers)
            return [body]
        environ["openkeel.context"] = ctx
        return self.app(environ, start_response)


def keystone_auth_token(app, conf):
    """Wrap ``app`` in keystonemiddleware's auth_token, configured from [keystone_authtoken]."""
    from keystonemiddleware import auth_token

    return auth_token.AuthProtocol(app, {"oslo_config_config": conf})


def noauth2_bind_error(host: str) -> str | None:
    """None when every address ``host`` resolves to is a loopback one; otherwise the one-line refusal.

    noauth2 trusts whatever token it is sent, so it is only ever served on loopback addresses.
    """
    import socket

    detail = ""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        outside = sorted({str(info[4][0]) for info in infos if not _is_loopback_peer(str(info[4][0]))})
        if not outside:
            return None
        if outside != [host]:
            detail = f" ({', '.join(outside)})"
    except OSError as exc:
        detail = f" (it does not resolve: {exc.strerror or exc})"
    return (f"[api] auth_strategy = noauth2 trusts any 'X-Auth-Token: user:project', so it listens on loopback "
            f"addresses only, never on '{host}'{detail}: listen on 127.0.0.1 or ::1 (--host, [wsgi] host), or set "
            "[api] auth_strategy = keystone with [keystone_authtoken]")


def _is_loopback_peer(address: str) -> bool:
    import ipaddress

    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(parsed, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is loopback too
    return (mapped or parsed).is_loopback


class LoopbackPeersOnly:
    """Under noauth2, a request from a peer that is not on this host gets the 401 page, unanswered.

    The second line behind the bind check (``noauth2_bind_error``): a WSGI server that loads
    ``openkeel_compute.wsgi`` itself cannot be asked where it listens. Mounted outside the proxy
    headers middleware, so the peer is the TCP one, never a forwarded header; a request without
    a peer address (a Unix socket) is local.
    """

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        peer = environ.get("REMOTE_ADDR")
        if peer and not _is_loopback_peer(peer):
            LOG.warning("noauth2: refused a request from %s, which is not a loopback address", peer)
            status, headers, body = faults.webob_error(401, environ)
            start_response(status, headers)
            return [body]
        return self.app(environ, start_response)
