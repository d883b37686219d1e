"""The request context: who is calling, for which project, at which microversion."""

from __future__ import annotations

import functools

from oslo_context import context as oslo_context

from openkeel_compute import policies


class RequestContext(oslo_context.RequestContext):
    """oslo.context's context, plus Nova's ``is_admin`` (rule ``context_is_admin``), computed once."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("is_admin", None)
        super().__init__(*args, **kwargs)

    @functools.cached_property
    def _admin(self) -> bool:
        return policies.authorize(self, "context_is_admin", {}, fatal=False)

    @property
    def is_admin(self) -> bool:
        return self._admin

    @is_admin.setter
    def is_admin(self, value) -> None:
        if value is not None:
            self.__dict__["_admin"] = bool(value)


def from_environ(environ: dict) -> RequestContext | None:
    """Build the context from the identity headers auth_token (or noauth2) set; None if anonymous."""
    headers_user = environ.get("HTTP_X_USER_ID") or environ.get("HTTP_X_USER")
    if not headers_user:
        return None
    return RequestContext.from_environ(environ)
