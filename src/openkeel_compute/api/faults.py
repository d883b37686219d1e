"""Nova's error bodies: ``{"<faultName>": {"code": N, "message": "..."}}``.

Errors raised by handlers are ``Fault``s. Errors Nova answers from outside its API router
(unknown routes, 401, 413) come from webob's own exception pages, which Nova also uses, so
their bodies and content types follow the request's Accept header exactly as Nova's do.
"""

from __future__ import annotations

import orjson
import webob.exc

FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
    503: "serviceUnavailable",
}

ERROR_CONTENT_TYPE = "application/json; charset=UTF-8"


class Fault(Exception):
    """An API error with Nova's status and message."""

    status = 500

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    def body(self) -> bytes:
        return fault_body(self.status, self.message)


class BadRequest(Fault):
    status = 400


class Forbidden(Fault):
    status = 403


class NotFound(Fault):
    status = 404


class Conflict(Fault):
    status = 409


class UnsupportedMediaType(Fault):
    status = 415


class NotAcceptable(Fault):
    status = 406


def fault_body(status: int, message: str) -> bytes:
    name = FAULT_NAMES.get(status, "computeFault")
    return orjson.dumps({name: {"code": status, "message": message}})


def webob_error(status: int, environ: dict, **kwargs) -> tuple[str, list[tuple[str, str]], bytes]:
    """Render webob's page for ``status`` (as Nova's own 401/404/413 are) without a WSGI round trip."""
    exc = webob.exc.status_map[status](**kwargs)
    captured: dict = {}

    def start_response(status_line, headers, exc_info=None):
        captured["status"] = status_line
        captured["headers"] = headers

    body = b"".join(exc(environ, start_response))
    return captured["status"], list(captured["headers"]), body
