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
